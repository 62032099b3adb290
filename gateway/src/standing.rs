//! `GET /v1/sales/{sale}/place`: where a place in line stands, keyed by its resume token, for
//! an app that cannot hold a socket while the phone has it in the background. The app polls this
//! now and then, tells its person when their turn is near or has come, and connects again (with
//! the token, within the sale's grace) to receive the pass.
//!
//! What a poll may cost (crate::guards): the token first (a MAC; one that fails counts against
//! its address's allowance, a map lookup, and past it is answered 429), then the place's own
//! allowance (once every 5 s; a genuine token never counts against its address), then the buyer
//! it is bound to. A place this gateway already knows is over (declared dead, its turn come
//! and gone, the sale sold out) is answered from memory; only a place that may still be alive
//! costs one read-only script in the sale's slot, within the gateway's read budget and the
//! address's share of it (past either, the answer is the gateway's memory's, `unconfirmed`,
//! never a refusal). The position
//! is the room's own view on this gateway. Nothing is written: a poll keeps no place alive.

use axum::extract::State;
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::Json;
use floodgate_platform::clients::ClientAddress;
use floodgate_platform::http::SaleId;
use floodgate_protocol::api::code;
use floodgate_protocol::api::room::{PlaceStanding, PlaceState};
use floodgate_protocol::now_millis;

use crate::error::ApiError;
use crate::join::resume_refusal;
use crate::room::{Room, RoomView};
use crate::scripts::takeback::{self, Taker};
use crate::{door, AppState};

/// `GET /v1/sales/{sale}/place`, with `Floodgate-Resume: <resume token>` (and the buyer's
/// `Floodgate-Identity` when the token is bound to one).
#[utoipa::path(
    get,
    path = "/v1/sales/{sale}/place",
    tag = "waiting room",
    summary = "Where a place in line stands, by its resume token (never cached)",
    description = "For an app that cannot hold a socket while in the background: the place, \
        its ETA, and whether the pass is ready to be collected by connecting again with the \
        resume token. Reading it keeps no place alive: only a session, or the grace after one, \
        does.",
    params(
        floodgate_platform::openapi::SalePath,
        ("Floodgate-Resume" = String, Header, description = "The place's resume token (never in the URL)."),
        ("Floodgate-Identity" = Option<String>, Header, description = "The buyer's identity token, when the place is a signed-in buyer's."),
    ),
    responses(
        (status = 200, description = "Where the place stands; `Cache-Control: no-store`.", body = PlaceStanding),
        crate::openapi::PlaceRefusals,
    ),
)]
pub async fn place(
    State(state): State<AppState>,
    ClientAddress(client): ClientAddress,
    SaleId(sale): SaleId,
    carried: door::Carried,
) -> Result<Response, ApiError> {
    let claim = carried
        .resume
        .as_deref()
        .ok_or_else(|| {
            ApiError::new(
                code::RESUME_REQUIRED,
                "send the place's resume token in the Floodgate-Resume header".into(),
            )
        })
        .and_then(|token| {
            state
                .resume
                .verify(token, &sale)
                .map_err(|e| resume_refusal(e, &sale))
        });
    // A token that checks (a MAC, no Redis) is held to its place's allowance and the gateway's
    // reads, never to its address's: the people behind one carrier's address each ask about
    // their own place, and a stranger there sending junk cannot spend their allowance. Only a
    // question without a genuine token counts against its address.
    let claim =
        claim.map_err(|refused| state.place.guard.admit(client).err().unwrap_or(refused))?;
    state.place.ask(&sale, claim.ticket)?;
    let ctx = match state.live_room(&sale) {
        Some(ctx) => ctx,
        // Looking a sale up reads Redis (a sale over, or not here yet): its address pays, as a
        // join's does, so genuine tokens of old sales cannot buy reads by the thousand.
        None => {
            state.place.guard.admit(client)?;
            state.room(&sale).await?
        }
    };
    let door = door::door_of(&ctx).await?;
    let buyer = door::identify(&state, &door, carried.identity.as_deref()).await?;
    let mark = buyer.map(|b| state.resume.buyer_mark(b.as_str()));
    if !claim.may_be_taken_by(mark.as_ref()) {
        return Err(takeback::other_buyers());
    }
    let taker = Taker {
        buyer: mark.as_ref(),
        adopt: false,
    };
    // What this gateway knows already costs no script: the sale is over for everyone, or this
    // place is over for good.
    let view = ctx.room.subscribe().borrow().clone();
    let now = now_millis();
    if view.loaded && view.sold_out {
        return Ok(answer(place_of(&ctx.room, &view, claim.ticket, now)?));
    }
    if ctx.room.is_over(claim.ticket, now) {
        return Err(takeback::expired());
    }
    // Within this address's share of the gateway's reads, and within its budget, the place's
    // record is read. Past either, the answer is what this gateway holds in memory, marked
    // unconfirmed, rather than a refusal: an app behind a busy carrier's address (a stranger
    // there polling thousands of places, say) still learns where its place stands, and no
    // question costs the sale's slot more than the budget.
    if state.place.guard.read(client).is_err() {
        let standing = place_of(&ctx.room, &view, claim.ticket, now)?;
        return Ok(answer(PlaceStanding {
            unconfirmed: true,
            ..standing
        }));
    }
    let kept = takeback::standing(&ctx.scope, claim.ticket, taker)
        .await
        .inspect_err(|refused| {
            if refused.code() == code::TICKET_EXPIRED {
                ctx.room.note_expired(claim.ticket);
            }
        })?;
    let standing = place_of(&ctx.room, &view, claim.ticket, now)?;
    Ok(answer(PlaceStanding {
        kept_until_ms: kept.kept_until_ms,
        ..standing
    }))
}

/// The answer, never cached.
fn answer(body: PlaceStanding) -> Response {
    let mut response = Json(body).into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// Where `ticket` stands in `room` as of `view`, at `now_ms`, as its session would be told.
fn place_of(
    room: &Room,
    view: &RoomView,
    ticket: u64,
    now_ms: i64,
) -> Result<PlaceStanding, ApiError> {
    if !view.loaded {
        return Err(ApiError::new(
            code::REDIS_UNAVAILABLE,
            "the waiting room is briefly unavailable; retry in a second".into(),
        ));
    }
    let mut standing = PlaceStanding {
        ticket,
        state: PlaceState::PreQueue,
        position: None,
        eta_secs: None,
        pre_queue_size: None,
        opens_at_ms: view.opens_at_ms,
        pass_ready: false,
        pass_expires_at_ms: None,
        kept_until_ms: None,
        unconfirmed: false,
    };
    if view.sold_out {
        standing.state = PlaceState::SoldOut;
        return Ok(standing);
    }
    match room.place(ticket) {
        // Opened, but this gateway's room has not learnt the draw yet (it started just now):
        // saying "pre-queue" would be wrong.
        None if now_ms >= view.opens_at_ms => {
            return Err(ApiError::new(
                code::REDIS_UNAVAILABLE,
                "the waiting room is catching up; retry in a second".into(),
            ))
        }
        None => standing.pre_queue_size = Some(view.issued),
        Some(place) if place <= view.frontier => {
            if room.turn_over(ticket, now_ms) {
                return Err(takeback::expired());
            }
            standing.state = PlaceState::YourTurn;
            standing.pass_ready = true;
            standing.pass_expires_at_ms = room.token_expiry(place);
        }
        Some(place) => {
            let position = room.position(place, view.frontier);
            standing.state = PlaceState::Waiting;
            standing.position = Some(position);
            standing.eta_secs = view.eta_secs(position, now_ms);
        }
    }
    Ok(standing)
}
