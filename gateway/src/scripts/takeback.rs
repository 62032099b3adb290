//! Taking a ticket back with its resume token (`lua/resume.lua`), whether a ticket still stands
//! for the holder of its token (`lua/standing.lua`, the place answer), and whether a buyer made
//! a buyerless ticket theirs (the sale's `owners` hash), with the refusals each can end in.

use floodgate_protocol::api::code;
use floodgate_protocol::resume::BuyerMark;
use floodgate_protocol::UnixMillis;

use floodgate_platform::script::LuaScript as _;

use super::tickets::{number, Taken};
use super::SaleScope;
use crate::error::ApiError;

floodgate_platform::lua_script! {
    /// `lua/resume.lua`: takes a ticket back on a session of this gateway.
    pub(super) struct Resume<'a> {
        file: "resume.lua",
        helpers: Sale,
        reply: Vec<String>,
        keys {
            meta: "sale meta hash",
            seq: "ticket sequence",
            gone: "gone (sorted set)",
            holders: "holders (hash)",
            sessions: "this gateway's session set",
            frontier: "frontier",
            alive: "this gateway's liveness key",
            gateways: "the sale's gateway registry (set)",
            owners: "owners (hash: ticket -> buyer mark",
        }
        args {
            ticket: u64 = "ticket",
            session_id: &'a str = "the new session's id",
            instance: &'a str = "this gateway's instance id",
            lease_ms: u64 = "the liveness key's lifetime (ms)",
            buyer: &'a str = "the mark of the buyer taking the ticket back",
            adopt: &'a str = "\"adopt\"",
        }
    }
}

floodgate_platform::lua_script! {
    /// `lua/standing.lua`: whether a ticket still stands for the holder of its token.
    pub(super) struct StandingCall<'a> {
        file: "standing.lua",
        helpers: Sale,
        reply: Vec<String>,
        keys {
            meta: "sale meta hash",
            seq: "ticket sequence",
            gone: "gone (sorted set)",
            owners: "owners (hash: ticket -> buyer mark)",
        }
        args {
            ticket: u64 = "ticket",
            buyer: &'a str = "the mark of the buyer asking",
        }
    }
}

/// Who takes a ticket back.
#[derive(Clone, Copy)]
pub struct Taker<'a> {
    /// The mark of the buyer taking it (`None`: someone not signed in).
    pub buyer: Option<&'a BuyerMark>,
    /// The ticket was taken before its buyer signed in and becomes theirs now, unless another
    /// buyer made it theirs first.
    pub adopt: bool,
}

/// Takes `ticket` back on session `session_id` of this gateway, for `taker`.
pub async fn resume(
    scope: &SaleScope,
    ticket: u64,
    session_id: &str,
    taker: Taker<'_>,
) -> Result<Taken, ApiError> {
    let keys = &scope.keys;
    let reply = Resume {
        meta: keys.meta(),
        seq: keys.seq(),
        gone: keys.gone(),
        holders: keys.holders(),
        sessions: keys.gateway_sessions(&scope.instance_id),
        frontier: keys.frontier(),
        alive: keys.gateway_alive(&scope.instance_id),
        gateways: keys.gateways(),
        owners: keys.owners(),
        ticket,
        session_id,
        instance: &scope.instance_id,
        lease_ms: scope.lease.as_millis() as u64,
        buyer: taker.buyer.map_or("", BuyerMark::as_str),
        adopt: if taker.adopt { "adopt" } else { "" },
    }
    .run(&mut scope.redis.clone())
    .await?;
    let taken = parse_resume(ticket, &reply)?;
    metrics::counter!("floodgate_tickets_resumed_total").increment(1);
    Ok(taken)
}

/// `resume.lua`'s reply: `{"resumed", opens_at_ms, sold_out, commitment, frontier}`, or
/// `{"expired", ...}` / `{"foreign", ...}` / `{"unknown", ...}`.
fn parse_resume(ticket: u64, reply: &[String]) -> Result<Taken, ApiError> {
    match reply {
        [status, opens, _sold_out, commitment, frontier] if status == "resumed" => Ok(Taken {
            ticket,
            opens_at_ms: number(opens)?,
            draw_nonce: None,
            commitment: commitment.clone(),
            frontier_floor: number(frontier)?,
        }),
        [status, ..] if status == "expired" => Err(expired()),
        [status, ..] if status == "foreign" => Err(other_buyers()),
        _ => Err(unknown_ticket()),
    }
}

/// Whether a ticket still stands, as `standing.lua` reads it.
#[derive(Debug, PartialEq, Eq)]
pub struct Standing {
    /// When a departed holder's grace runs out (Unix ms); `None` while a session holds it.
    pub kept_until_ms: Option<UnixMillis>,
}

/// Whether `ticket` is alive for `taker` (read only: a poll keeps no place alive).
pub async fn standing(
    scope: &SaleScope,
    ticket: u64,
    taker: Taker<'_>,
) -> Result<Standing, ApiError> {
    let keys = &scope.keys;
    let reply = StandingCall {
        meta: keys.meta(),
        seq: keys.seq(),
        gone: keys.gone(),
        owners: keys.owners(),
        ticket,
        buyer: taker.buyer.map_or("", BuyerMark::as_str),
    }
    .run(&mut scope.redis.clone())
    .await?;
    parse_standing(&reply)
}

fn parse_standing(reply: &[String]) -> Result<Standing, ApiError> {
    match reply {
        [status, until] if status == "alive" => Ok(Standing {
            kept_until_ms: if until.is_empty() {
                None
            } else {
                // A sorted set's score comes back as a float's text.
                Some(until.parse::<f64>().map_err(|_| odd_standing(reply))? as UnixMillis)
            },
        }),
        [status] if status == "expired" => Err(expired()),
        [status] if status == "foreign" => Err(other_buyers()),
        [status] if status == "unknown" => Err(unknown_ticket()),
        _ => Err(odd_standing(reply)),
    }
}

fn odd_standing(reply: &[String]) -> ApiError {
    crate::error::odd_reply("standing.lua", &reply.join(" "))
}

/// Whether a buyer made `ticket` theirs by taking it with its buyerless token (the sale's
/// `owners` hash): a session without that buyer's identity then gets no pass for it.
pub async fn owned(scope: &SaleScope, ticket: u64) -> Result<bool, ApiError> {
    let owned: bool = redis::cmd("HEXISTS")
        .arg(scope.keys.owners())
        .arg(ticket)
        .query_async(&mut scope.redis.clone())
        .await?;
    Ok(owned)
}

/// The refusal of a resume token whose ticket is another buyer's.
pub fn other_buyers() -> ApiError {
    ApiError::new(
        code::RESUME_OTHER_BUYER,
        "this place is another buyer's; join without the resume token for a place of your own"
            .into(),
    )
}

/// The refusal of a join that came back for a ticket that is dead, with no door passed for a
/// new place.
pub fn expired() -> ApiError {
    ApiError::new(
        code::TICKET_EXPIRED,
        "this ticket was given up after its grace period; join again for a new one".into(),
    )
}

/// The refusal of a resume token whose ticket this sale never handed out (or whose state was
/// lost).
fn unknown_ticket() -> ApiError {
    ApiError::new(
        code::UNKNOWN_TICKET,
        "this sale has no such ticket; join again for a new one".into(),
    )
}

#[cfg(test)]
mod tests {
    use super::super::strings;
    use super::*;

    #[test]
    fn standing_replies_parse_into_a_grace_or_refusals() {
        assert_eq!(
            parse_standing(&strings(&["alive", ""])).unwrap(),
            Standing {
                kept_until_ms: None
            }
        );
        assert_eq!(
            parse_standing(&strings(&["alive", "1700000000123"]))
                .unwrap()
                .kept_until_ms,
            Some(1_700_000_000_123)
        );
        for (reply, status) in [("expired", 410), ("foreign", 403), ("unknown", 404)] {
            let refused = parse_standing(&strings(&[reply])).unwrap_err();
            let answered = axum::response::IntoResponse::into_response(refused);
            assert_eq!(answered.status().as_u16(), status, "{reply}");
        }
        assert_eq!(
            parse_standing(&strings(&["alive", "soon"]))
                .map_err(|e| e.status().as_u16())
                .err(),
            Some(503)
        );
    }

    #[test]
    fn resume_replies_parse_into_tickets_or_refusals() {
        let taken = parse_resume(3, &strings(&["resumed", "1000", "0", "c0", "2"])).unwrap();
        assert_eq!((taken.ticket, taken.frontier_floor), (3, 2));
        assert_eq!(
            parse_resume(3, &strings(&["expired", "1000", "0", ""]))
                .map_err(|e| e.code())
                .err(),
            Some(code::TICKET_EXPIRED)
        );
        assert_eq!(
            parse_resume(3, &strings(&["foreign", "1000", "0", ""]))
                .map_err(|e| e.code())
                .err(),
            Some(code::RESUME_OTHER_BUYER)
        );
        assert_eq!(
            parse_resume(3, &strings(&["unknown", "0", "0", ""]))
                .map_err(|e| e.code())
                .err(),
            Some(code::UNKNOWN_TICKET)
        );
    }
}
