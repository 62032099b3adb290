//! The door of a sale's waiting room: who is joining (a buyer's identity token, checked against
//! the operator's sign-in) and the bot check a sale may ask for (a proof of work whose puzzle
//! `GET /v1/sales/{sale}/challenge` hands out). Both are checked before a ticket is taken, so a
//! refused join costs no Redis work beyond the single-use mark of a solved puzzle.

use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::Json;
use floodgate_platform::clients::ClientAddress;
use floodgate_platform::http::SaleId;
use floodgate_protocol::api::code;
use floodgate_protocol::challenge::{
    AutoDifficulty, ChallengeError, ChallengeOffer, ChallengeVerifier,
};
use floodgate_protocol::identity::{
    BuyerId, IdentityError, IDENTITY_HEADER, IDENTITY_SUBPROTOCOL_PREFIX,
};
use floodgate_protocol::now_millis;
use floodgate_protocol::resume::{RESUME_HEADER, RESUME_SUBPROTOCOL_PREFIX};
use floodgate_protocol::settings::{ChallengeRule, Door, IdentityRule};

use crate::error::ApiError;
use crate::sale::Context;
use crate::AppState;

/// The credentials a join or a poll of a place carries, each in its header (apps, scripts) or
/// else as a subprotocol `<prefix><value>` beside `floodgate` (a browser cannot set headers on a
/// WebSocket): a buyer's identity token (`Floodgate-Identity`, `floodgate-identity.<token>`),
/// and the resume token of a place taken before (`Floodgate-Resume`, `floodgate-resume.<token>`).
/// Read only here; each is checked later, against the sale's door and the sale.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Carried {
    pub identity: Option<String>,
    pub resume: Option<String>,
}

impl Carried {
    fn read(headers: &HeaderMap) -> Self {
        Self {
            identity: carried(headers, IDENTITY_HEADER, IDENTITY_SUBPROTOCOL_PREFIX),
            resume: carried(headers, RESUME_HEADER, RESUME_SUBPROTOCOL_PREFIX),
        }
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Carried {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(Self::read(&parts.headers))
    }
}

/// A credential in header `name`, or else as the subprotocol `<prefix><value>`.
fn carried(headers: &HeaderMap, name: &str, prefix: &str) -> Option<String> {
    // An empty header is no header, as the edge reads it (deploy/nginx/cdn.conf).
    if let Some(value) = headers
        .get(name)
        .filter(|v| !v.as_bytes().trim_ascii().is_empty())
    {
        // A value that is not text is a credential all the same (a bad one, refused when
        // checked), not none: the edge counts it as one, and a join with it is no new place.
        return Some(String::from_utf8_lossy(value.as_bytes()).trim().to_owned());
    }
    // Each line as bytes, like the header above: the edge reads a line that is not text too,
    // and counts a socket that carries an identity there as its person's, so the gateway must
    // see (and check) that identity, or a made-up one with a byte past ASCII would be a new
    // place that no cap of its address counts at the edge.
    headers
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .find_map(|line| {
            line.split(',')
                .find_map(|p| p.trim().strip_prefix(prefix))
                .map(str::to_owned)
        })
}

/// The buyer a join's identity token names (`None`: no token, on a sale that does not require
/// one). A token is checked whenever one is presented, so a signed-in buyer always holds one
/// place, whatever the sale requires.
pub async fn identify(
    state: &AppState,
    door: &Door,
    token: Option<&str>,
) -> Result<Option<BuyerId>, ApiError> {
    let required = door.identity == IdentityRule::Required;
    let Some(token) = token else {
        return if required {
            Err(ApiError::new(
                code::IDENTITY_REQUIRED,
                "this sale is for signed-in buyers: sign in, then join with your identity token"
                    .into(),
            ))
        } else {
            Ok(None)
        };
    };
    let Some(verifier) = &state.identity else {
        if required {
            tracing::error!("a sale requires identities, and this gateway has no issuer configured (FLOODGATE_IDENTITY_ISSUER)");
            return Err(ApiError::from(IdentityError::Unavailable));
        }
        // Refused, not ignored: the edge counts a socket that shows an identity as its
        // person's, outside its address's caps, so one it never checks would take a new place
        // past them. The page sends none where no issuer is configured.
        return Err(ApiError::new(
            code::IDENTITY_WRONG_ISSUER,
            "this waiting room trusts no identity issuer: join without an identity token".into(),
        ));
    };
    verifier
        .verify(token)
        .await
        .map(Some)
        .map_err(ApiError::from)
}

/// Checks the bot-check answer of a join to a sale that asks for one, and marks a solved answer
/// spent (until its puzzle expires) so it joins once.
pub async fn pass_challenge(
    state: &AppState,
    ctx: &Context,
    door: &Door,
    answer: Option<&str>,
) -> Result<(), ApiError> {
    let Some(verifier) = verifier(state, door.challenge) else {
        return Ok(());
    };
    // The code says which refusal it is, and its status (403, or 503 when the check cannot
    // be made now).
    let refused = |e: ChallengeError| ApiError::new(e.code(), e.to_string());
    let answer = answer.ok_or_else(|| refused(ChallengeError::Required))?;
    // Checked against the easiest the puzzles were in the last few seconds: a puzzle handed
    // out just before a rise is not thrown away, one hoarded before a flood is.
    let (_, lately) = ctx.room.join_rates();
    let least = auto_difficulty(state).at(door.pow_difficulty, lately);
    let passed = verifier
        .verify(&ctx.scope.sale, answer, least, now_millis())
        .await
        .map_err(refused)?;
    if let Some((id, until_ms)) = passed.single_use {
        // Sent again and again, one answer is held to a person's allowance before its mark is
        // looked up: a replay flood of it costs a map lookup, not a Redis command each.
        state
            .limits
            .person(crate::limits::Person::of((&ctx.scope.sale, "answer", &id)))?;
        let first: Option<String> = redis::cmd("SET")
            .arg(state.keys.spent_puzzle(&id))
            .arg(1)
            .arg("NX")
            .arg("PXAT")
            .arg(until_ms)
            .query_async(&mut state.redis.clone())
            .await?;
        if first.is_none() {
            return Err(refused(ChallengeError::Reused));
        }
    }
    Ok(())
}

/// The verifier of a sale's bot check: where another kind (a CAPTCHA provider's, say) plugs in,
/// as a `ChallengeRule` and its `ChallengeVerifier`.
fn verifier(state: &AppState, rule: ChallengeRule) -> Option<&dyn ChallengeVerifier> {
    match rule {
        ChallengeRule::None => None,
        ChallengeRule::Pow => Some(state.pow.as_ref()),
    }
}

/// `GET /v1/sales/{sale}/challenge`: the sale's puzzle for a sale that asks for a proof of work,
/// or `{"kind": "none"}`. The same for everyone within a few seconds (each answer is what is
/// single-use), so it may be cached for a second, and asking again gets nothing new: only an ask
/// for a sale this gateway has no room for (a made-up id reads Redis) counts against an address.
#[utoipa::path(get, path = "/v1/sales/{sale}/challenge", tag = "waiting room", params(floodgate_platform::openapi::SalePath),
    responses(
        (status = 200, description = "The sale's puzzle for the next few seconds, or `{\"kind\": \"none\"}`; cacheable for a second.", body = floodgate_protocol::challenge::ChallengeOffer),
        crate::openapi::ChallengeRefusals,
    ))]
pub async fn challenge(
    State(state): State<AppState>,
    ClientAddress(client): ClientAddress,
    SaleId(sale): SaleId,
) -> Result<Response, ApiError> {
    let ctx = match state.live_room(&sale) {
        Some(ctx) => ctx,
        None => {
            // Before the sale is looked up in Redis: a flood of made-up sale ids costs a map
            // lookup each.
            state.challenges.admit(client)?;
            state.room(&sale).await?
        }
    };
    let door = door_of(&ctx).await?;
    let body = match door.challenge {
        ChallengeRule::None => ChallengeOffer::None,
        ChallengeRule::Pow => {
            let (now, _) = ctx.room.join_rates();
            let difficulty = auto_difficulty(&state).at(door.pow_difficulty, now);
            state.pow.issue(&sale, difficulty, now_millis()).into()
        }
    };
    let mut response = Json(body).into_response();
    // A second: the difficulty may rise under a flood, and an edge's cache must follow it.
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=1"),
    );
    Ok(response)
}

/// How this gateway raises the proof of work under a flood of joins (its settings).
fn auto_difficulty(state: &AppState) -> AutoDifficulty {
    AutoDifficulty {
        rise_above: state.config.pow_rise_above,
        ceiling: state.config.pow_ceiling,
    }
}

/// The door of `ctx`'s sale, from its room's view.
pub async fn door_of(ctx: &Context) -> Result<Door, ApiError> {
    ctx.room.door().await.ok_or_else(|| {
        ApiError::new(
            code::REDIS_UNAVAILABLE,
            "the waiting room is briefly unavailable; retry in a second".into(),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(*name, HeaderValue::from_str(value).unwrap());
        }
        headers
    }

    #[test]
    fn credentials_come_from_their_headers_or_else_the_subprotocols() {
        assert_eq!(Carried::read(&HeaderMap::new()), Carried::default());
        let browser = headers(&[(
            "sec-websocket-protocol",
            "floodgate, floodgate-identity.id-1 , floodgate-resume.r-2",
        )]);
        assert_eq!(
            Carried::read(&browser),
            Carried {
                identity: Some("id-1".into()),
                resume: Some("r-2".into()),
            }
        );
        // A header is the app's own word: it wins over a subprotocol.
        let app = headers(&[
            ("floodgate-resume", " r-header "),
            ("sec-websocket-protocol", "floodgate-resume.r-sub"),
        ]);
        assert_eq!(Carried::read(&app).resume.as_deref(), Some("r-header"));
        assert_eq!(Carried::read(&app).identity, None);
    }

    /// A subprotocol line that is not text still carries its credentials, as the edge reads
    /// it: before, the line was dropped, and a made-up identity with a byte past ASCII was a
    /// person's socket to the edge (outside its address's caps) and a new place here.
    #[test]
    fn a_subprotocol_line_that_is_not_text_carries_its_credentials() {
        let mut junk = HeaderMap::new();
        let line = HeaderValue::from_bytes(b"floodgate, floodgate-identity.j1\x80").unwrap();
        junk.append(header::SEC_WEBSOCKET_PROTOCOL, line);
        assert_eq!(Carried::read(&junk).identity.as_deref(), Some("j1\u{fffd}"));
    }
}
