//! Taking a ticket back with its resume token (`lua/resume.lua`), whether a ticket still stands
//! for the holder of its token (`lua/standing.lua`, the place answer), and whether a buyer made
//! a buyerless ticket theirs (the sale's `owners` hash), with the refusals each can end in.

use floodgate_protocol::api::code;
use floodgate_protocol::resume::BuyerMark;
use floodgate_protocol::UnixMillis;

use floodgate_platform::script::{FromStrings, LuaScript as _};

use super::tickets::Taken;
use super::SaleScope;
use crate::error::ApiError;

floodgate_platform::lua_script! {
    /// `lua/resume.lua`: takes a ticket back on a session of this gateway.
    pub(super) struct Resume<'a> {
        file: "resume.lua",
        helpers: Sale,
        reply: Resumed,
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
            away: "away (sorted set)",
            away_admitted: "admitted away (sorted set)",
            tokens: "unspent tokens per admission batch",
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
        reply: Stands,
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

/// Why a ticket cannot be taken back, or does not stand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Gone {
    /// Its grace ran out, or the sale ended: dead for good.
    Expired,
    /// Another buyer made it theirs.
    Foreign,
    /// The sale is not armed, or never handed it out (or its state was lost).
    Unknown,
}

impl Gone {
    fn from_word(word: &str) -> Option<Self> {
        match word {
            "expired" => Some(Self::Expired),
            "foreign" => Some(Self::Foreign),
            "unknown" => Some(Self::Unknown),
            _ => None,
        }
    }

    fn refusal(self) -> ApiError {
        match self {
            Self::Expired => expired(),
            Self::Foreign => other_buyers(),
            Self::Unknown => unknown_ticket(),
        }
    }
}

/// What `resume.lua` answered.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Resumed {
    /// The ticket keeps its place, and the new session holds it.
    Resumed {
        opens_at_ms: UnixMillis,
        commitment: String,
        /// The frontier as the script read it: the new session's positions start from it.
        frontier: u64,
        /// The session it was taken from (`<gateway>/<n>`), if one was recorded.
        previous: Option<String>,
    },
    Gone(Gone),
}

/// `{"resumed", opens_at_ms, sold_out, commitment, frontier, previous}`, or `{status, ...}` for
/// a ticket that is gone.
impl FromStrings for Resumed {
    fn from_strings(reply: &[String]) -> Option<Self> {
        match reply {
            [status, opens, _sold_out, commitment, frontier, previous] if status == "resumed" => {
                Some(Self::Resumed {
                    opens_at_ms: opens.parse().ok()?,
                    commitment: commitment.clone(),
                    frontier: frontier.parse().ok()?,
                    previous: Some(previous.clone()).filter(|p| !p.is_empty()),
                })
            }
            [status, ..] => Gone::from_word(status).map(Self::Gone),
            [] => None,
        }
    }
}

/// What `standing.lua` answered.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Stands {
    Alive(Standing),
    Gone(Gone),
}

/// `{"alive", until}` (`until` empty while a session holds it) or `{status}`.
impl FromStrings for Stands {
    fn from_strings(reply: &[String]) -> Option<Self> {
        match reply {
            [status, until] if status == "alive" => Some(Self::Alive(Standing {
                kept_until_ms: if until.is_empty() {
                    None
                } else {
                    // A sorted set's score comes back as a float's text.
                    Some(until.parse::<f64>().ok()? as UnixMillis)
                },
            })),
            [status] => Gone::from_word(status).map(Self::Gone),
            _ => None,
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
    let resumed = Resume {
        meta: keys.meta(),
        seq: keys.seq(),
        gone: keys.gone(),
        holders: keys.holders(),
        sessions: keys.gateway_sessions(&scope.instance_id),
        frontier: keys.frontier(),
        alive: keys.gateway_alive(&scope.instance_id),
        gateways: keys.gateways(),
        owners: keys.owners(),
        away: keys.away(),
        away_admitted: keys.away_admitted(),
        tokens: keys.tokens(),
        ticket,
        session_id,
        instance: &scope.instance_id,
        lease_ms: scope.lease.as_millis() as u64,
        buyer: taker.buyer.map_or("", BuyerMark::as_str),
        adopt: if taker.adopt { "adopt" } else { "" },
    }
    .run(&mut scope.redis.clone())
    .await?;
    match resumed {
        Resumed::Resumed {
            opens_at_ms,
            commitment,
            frontier,
            previous,
        } => {
            metrics::counter!("floodgate_tickets_resumed_total").increment(1);
            if let Some(previous) = previous {
                super::taken_over::tell(scope, &previous).await;
            }
            Ok(Taken {
                ticket,
                opens_at_ms,
                draw_nonce: None,
                commitment,
                frontier_floor: frontier,
            })
        }
        Resumed::Gone(gone) => Err(gone.refusal()),
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
    let stands = StandingCall {
        meta: keys.meta(),
        seq: keys.seq(),
        gone: keys.gone(),
        owners: keys.owners(),
        ticket,
        buyer: taker.buyer.map_or("", BuyerMark::as_str),
    }
    .run(&mut scope.redis.clone())
    .await?;
    match stands {
        Stands::Alive(standing) => Ok(standing),
        Stands::Gone(gone) => Err(gone.refusal()),
    }
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

    fn stands(reply: &[&str]) -> Option<Stands> {
        Stands::from_strings(&strings(reply))
    }

    fn resumed(reply: &[&str]) -> Option<Resumed> {
        Resumed::from_strings(&strings(reply))
    }

    #[test]
    fn standing_replies_parse_into_a_grace_or_a_ticket_gone() {
        assert_eq!(
            stands(&["alive", ""]),
            Some(Stands::Alive(Standing {
                kept_until_ms: None
            }))
        );
        assert_eq!(
            stands(&["alive", "1700000000123"]),
            Some(Stands::Alive(Standing {
                kept_until_ms: Some(1_700_000_000_123)
            }))
        );
        assert_eq!(stands(&["expired"]), Some(Stands::Gone(Gone::Expired)));
        assert_eq!(stands(&["foreign"]), Some(Stands::Gone(Gone::Foreign)));
        assert_eq!(stands(&["unknown"]), Some(Stands::Gone(Gone::Unknown)));
        for odd in [&["alive", "soon"][..], &["gone"], &["alive"], &[]] {
            assert_eq!(stands(odd), None, "{odd:?}");
        }
    }

    #[test]
    fn resume_replies_parse_into_tickets_or_a_ticket_gone() {
        assert_eq!(
            resumed(&["resumed", "1000", "0", "c0", "2", ""]),
            Some(Resumed::Resumed {
                opens_at_ms: 1000,
                commitment: "c0".into(),
                frontier: 2,
                previous: None,
            })
        );
        assert_eq!(
            resumed(&["resumed", "1000", "0", "c0", "2", "gw-a/7"]),
            Some(Resumed::Resumed {
                opens_at_ms: 1000,
                commitment: "c0".into(),
                frontier: 2,
                previous: Some("gw-a/7".into()),
            })
        );
        assert_eq!(
            resumed(&["expired", "1000", "0", ""]),
            Some(Resumed::Gone(Gone::Expired))
        );
        assert_eq!(
            resumed(&["foreign", "1000", "0", ""]),
            Some(Resumed::Gone(Gone::Foreign))
        );
        assert_eq!(
            resumed(&["unknown", "0", "0", ""]),
            Some(Resumed::Gone(Gone::Unknown))
        );
        for odd in [
            &["resumed", "x", "0", "c0", "2", ""][..],
            &["lost", "0"],
            &[],
        ] {
            assert_eq!(resumed(odd), None, "{odd:?}");
        }
    }

    #[test]
    fn a_ticket_gone_is_refused_with_its_own_code() {
        for (gone, code, status) in [
            (Gone::Expired, code::TICKET_EXPIRED, 410),
            (Gone::Foreign, code::RESUME_OTHER_BUYER, 403),
            (Gone::Unknown, code::UNKNOWN_TICKET, 404),
        ] {
            let refused = gone.refusal();
            assert_eq!((refused.code(), refused.status().as_u16()), (code, status));
        }
    }
}
