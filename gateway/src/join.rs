//! `GET /ws`: joining a sale's waiting room, or coming back to it. The request is checked, the
//! client admitted within this gateway's limits, and a ticket taken before the upgrade, so every
//! refusal is a JSON error the client can read; then the socket becomes a [`Session`].

use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::response::{IntoResponse as _, Response};
use floodgate_platform::origins::SameSite;
use floodgate_protocol::api::code;
use floodgate_protocol::identity::BuyerId;
use floodgate_protocol::ids::check_sale_id;
use floodgate_protocol::resume::{self, ResumeError};
use serde::Deserialize;

use crate::door;
use crate::error::ApiError;
use crate::limits;

mod entry;
use crate::scripts::{buyers, takeback, tickets};
use crate::session::{Hello, Session};
use crate::upgrade::{NotWebSocket, Upgrade};
use crate::AppState;
use entry::{gateway_slot, pay, Entry};
use floodgate_platform::clients::ClientAddress;

#[derive(Deserialize)]
pub struct JoinParams {
    sale: String,
    /// Named only to refuse it: a resume token in a URL lands in every proxy's and CDN's log, so
    /// it travels in a header or a subprotocol ([`door::Carried`]).
    resume: Option<String>,
    /// The client's own draw nonce for the pre-queue lottery (16 to 64 lowercase hex
    /// characters); the gateway picks one for a client that sends none.
    nonce: Option<String>,
    /// The answer to the sale's bot check, when it asks for one (`<puzzle>~<nonce>` for the
    /// proof of work).
    challenge: Option<String>,
}

/// `GET /ws?sale=<id>[&nonce=<hex>][&challenge=<answer>]`, with a buyer's identity token in
/// `Floodgate-Identity` or the `floodgate-identity.<token>` subprotocol, and a resume token in
/// `Floodgate-Resume` or the `floodgate-resume.<token>` subprotocol: join a sale's waiting room,
/// or come back to it.
///
/// The ticket is taken (or taken back) before the upgrade so that an unknown sale, a bad resume
/// token or an unreachable Redis is a plain JSON HTTP error the client can read, not a socket
/// that opens and dies.
#[utoipa::path(
    get,
    path = "/ws",
    tag = "waiting room",
    summary = "Join a sale's waiting room (WebSocket)",
    description = "Upgrades to the WebSocket session described in docs/asyncapi.yaml: a ticket, \
        the place in line, then the admission token. A refusal comes before the upgrade, as a \
        plain JSON answer.",
    params(
        ("sale" = String, Query, min_length = 1, max_length = 64, pattern = r"^[A-Za-z0-9._-]{1,64}$", description = "The sale to join."),
        ("resume" = Option<String>, Query, description = "Refused (400 `resume_in_url`): a resume token never travels in a URL. Send it in `Floodgate-Resume`, or as the `floodgate-resume.<token>` subprotocol."),
        ("nonce" = Option<String>, Query, pattern = r"^[0-9a-f]{16,64}$", description = "The client's own draw nonce for the pre-queue lottery."),
        ("challenge" = Option<String>, Query, description = "The bot check's answer, `<puzzle>~<nonce>`, when the sale asks for one."),
        ("Floodgate-Identity" = Option<String>, Header, description = "A signed-in buyer's identity token (or the `floodgate-identity.<token>` subprotocol)."),
        ("Floodgate-Resume" = Option<String>, Header, description = "A resume token from an earlier session: take that place back (or the `floodgate-resume.<token>` subprotocol)."),
    ),
    responses(
        (status = 101, description = "Switching Protocols: the session (docs/asyncapi.yaml)."),
        crate::openapi::JoinRefusals,
    ),
)]
#[tracing::instrument(skip_all)]
pub async fn join_queue(
    State(state): State<AppState>,
    ClientAddress(client): ClientAddress,
    carried: door::Carried,
    params: Result<Query<JoinParams>, QueryRejection>,
    upgrade: Result<Upgrade, NotWebSocket>,
    origin: Result<SameSite, ApiError>,
) -> Result<Response, ApiError> {
    // Another site's page, before anything is counted or taken (platform::origins): its bad
    // joins would otherwise spend the allowance of its visitors' addresses (a carrier's, shared
    // with thousands of people) from a site the stranger does not even have to be on.
    origin?;
    // The query's errors come next: a plain HTTP request for an unknown sale hears of the sale.
    // A made-up resume token costs a MAC, and its address.
    let request = JoinRequest::read(&state, params, carried.resume.as_deref())
        .map_err(|e| Entry::new(&state.limits, client).failed(e))?;
    let upgrade = match upgrade {
        Ok(upgrade) => upgrade,
        Err(refusal) => return Ok(refusal.into_response()),
    };
    let budget = gateway_slot(&state)?;
    let mut entry = Entry::new(&state.limits, client);
    let ctx = match state.live_room(&request.sale) {
        Some(ctx) => ctx,
        None => {
            // Looking a sale up reads Redis: the address pays for it.
            entry.address()?;
            state.room(&request.sale).await?
        }
    };
    let door = door::door_of(&ctx).await?;
    entry.before_identity(&request, carried.identity.is_some())?;
    let buyer = door::identify(&state, &door, carried.identity.as_deref())
        .await
        .map_err(|e| entry.failed(e))?;
    let mark = buyer.as_ref().map(|b| state.resume.buyer_mark(b.as_str()));
    let slot = pay(
        &state,
        &mut entry,
        &request,
        &ctx,
        &door,
        buyer.as_ref(),
        mark.as_ref(),
    )
    .await?;
    let number = state.sessions.fetch_add(1, Ordering::Relaxed);
    // The ticket is taken in a task of its own, which hands it to a `Session` at once: if this
    // request is abandoned half-way (the client resets the connection), the task still finishes
    // and the session's drop gives the ticket back, so no ticket is ever live with nobody behind
    // it.
    let expired = ctx.room.clone();
    let taking = take_session(
        ctx,
        Wants {
            resumed: request.resumed.as_ref().map(|c| c.ticket),
            nonce: request.nonce,
            buyer: buyer.zip(mark),
        },
        number,
        slot,
        budget,
    );
    let taken = tokio::spawn(taking).await.map_err(|e| {
        tracing::error!(error = %e, "taking a ticket failed");
        ApiError::new(
            code::REDIS_UNAVAILABLE,
            "the waiting room is briefly unavailable; retry in a second".into(),
        )
    })?;
    let mut session = taken.map_err(|refused| {
        // A place over for good is remembered, so asking again costs no script; a refusal of
        // the client's own making counts against its address.
        if let Some(claim) = &request.resumed {
            if refused.code() == code::TICKET_EXPIRED {
                expired.note_expired(claim.ticket);
            }
        }
        entry.failed(refused)
    })?;
    let tasks = state.tasks.clone();
    Ok(upgrade.respond(&state.tasks, move |connection| async move {
        // The ticket goes out before the WebSocket layer exists (see `upgrade`); a client
        // that does not take it never had its ticket, which the session's drop gives back.
        let Ok(socket) = session.open(connection).await else {
            return;
        };
        // A task of its own rather than this short one: every idle client pays for its
        // task's size, which is the session's alone. For the same reason a span nobody
        // records (debug logs off) is not carried either.
        let span =
            tracing::debug_span!("session", sale = %session.ctx.scope.sale, ticket = session.ticket);
        if span.is_disabled() {
            tasks.spawn(session.run(socket));
        } else {
            tasks.spawn(tracing::Instrument::instrument(session.run(socket), span));
        }
    }))
}

/// A join's query, checked.
struct JoinRequest {
    sale: String,
    /// What a genuine resume token for this sale claims.
    resumed: Option<resume::Claim>,
    nonce: String,
    challenge: Option<String>,
}

impl JoinRequest {
    /// Checks the sale id, the nonce and the resume token: no Redis work, so a flood of bad
    /// joins costs only this.
    fn read(
        state: &AppState,
        params: Result<Query<JoinParams>, QueryRejection>,
        resume: Option<&str>,
    ) -> Result<Self, ApiError> {
        let Query(JoinParams {
            sale,
            resume: resume_in_url,
            nonce,
            challenge,
        }) = params.map_err(|_| {
            ApiError::new(
                code::SALE_MISSING,
                "name the sale to join: /ws?sale=<sale id>".into(),
            )
        })?;
        check_sale_id(&sale).map_err(|_| ApiError::unknown_sale())?;
        if let Some(nonce) = &nonce {
            floodgate_protocol::lottery::check_nonce(nonce)
                .map_err(|m| ApiError::new(code::BAD_NONCE, m))?;
        }
        let nonce = nonce.unwrap_or_else(floodgate_protocol::lottery::random_nonce);
        if resume_in_url.is_some() {
            return Err(ApiError::new(
                code::RESUME_IN_URL,
                "a resume token never goes in a URL (it would land in proxy and CDN logs): send \
                 it in the Floodgate-Resume header or as the floodgate-resume.<token> subprotocol"
                    .into(),
            ));
        }
        let resumed = resume
            .map(|token| state.resume.verify(token, &sale))
            .transpose()
            .map_err(|e| resume_refusal(e, &sale))?;
        Ok(Self {
            sale,
            resumed,
            nonce,
            challenge,
        })
    }
}

/// The answer to a resume token that is not genuine, or not for `sale`.
pub(crate) fn resume_refusal(e: ResumeError, sale: &str) -> ApiError {
    match e {
        ResumeError::Invalid => ApiError::new(
            code::RESUME_INVALID,
            "the resume token is not genuine; join without it for a new ticket".into(),
        ),
        ResumeError::OtherSale(other) => ApiError::new(
            code::RESUME_OTHER_SALE,
            format!("the resume token is for sale {other}, not {sale}"),
        ),
    }
}

/// What a join lays claim to: a ticket named by a resume token, a signed-in buyer's place (with
/// their mark), or a new ticket with the client's draw nonce.
struct Wants {
    resumed: Option<u64>,
    nonce: String,
    buyer: Option<(BuyerId, resume::BuyerMark)>,
}

/// Takes a ticket (or takes one back) for session `number` and wraps it in its session. A
/// signed-in buyer holds one place per sale: their ticket is taken back if they have one, else
/// the resume token's ticket (if it is still in line) or a new one becomes theirs.
async fn take_session(
    ctx: Arc<crate::sale::Context>,
    claim: Wants,
    number: u64,
    connection: limits::SessionSlot,
    budget: crate::budget::BudgetSlot,
) -> Result<Box<Session>, ApiError> {
    let session_id = ctx.session_id(number);
    let (taken, resumed) = match (&claim.buyer, claim.resumed) {
        (Some((buyer, mark)), resumed) => {
            let joining = buyers::Joining {
                scope: &ctx.scope,
                turn_over: &|ticket| ctx.room.turn_over(ticket, floodgate_protocol::now_millis()),
                buyer,
                mark,
                nonce: &claim.nonce,
                session_id: &session_id,
                resumed,
            };
            buyers::take(&joining).await?
        }
        (None, None) => (tickets::join(&ctx.scope, &claim.nonce).await?, false),
        (None, Some(ticket)) => {
            let anyone = takeback::Taker {
                buyer: None,
                adopt: false,
            };
            (
                takeback::resume(&ctx.scope, ticket, &session_id, anyone).await?,
                true,
            )
        }
    };
    let buyer: Option<Arc<str>> = claim.buyer.map(|(b, _)| b.as_str().into());
    if let Some(buyer) = &buyer {
        ctx.waiting.add(number, taken.ticket, buyer.clone());
    }
    Ok(Box::new(Session {
        ctx,
        ticket: taken.ticket,
        opens_at_ms: taken.opens_at_ms,
        resumed,
        buyer,
        frontier_floor: taken.frontier_floor,
        number,
        hello: Some(Box::new(Hello {
            draw_nonce: taken.draw_nonce,
            commitment: taken.commitment,
        })),
        _connection: connection,
        _budget: budget,
        started: false,
        departed: false,
    }))
}
