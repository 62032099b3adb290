//! What `reserve.lua` answers, as Rust types: a hold, or a refusal and what it proves about the
//! key's other attempts (the one place that knows the reply's shape is [`Reserved`]'s
//! `FromStrings`).

use floodgate_platform::script::{FromStrings, OddReply, ScriptError};
use floodgate_protocol::UnixMillis;

/// A hold on seats, as granted (or replayed) by `reserve.lua`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hold {
    pub reservation_id: String,
    pub secret: String,
    pub seats: u32,
    pub hold_expires_at_ms: UnixMillis,
    pub reserved_at_ms: UnixMillis,
    /// The outbox entry of its `SeatReserved`, deleted once a request published it.
    pub outbox_entry: String,
    /// The `SeatReserved` envelope still waiting in the outbox, or `None` once it was acked.
    pub pending_event: Option<String>,
    /// True when this is an earlier request's result, returned for a retry.
    pub replayed: bool,
    /// The buyer's record, when the request counted its seats there (its slot's writes are
    /// waited for with the hold's).
    pub buyer_record: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ReserveError {
    #[error("this sale is not open for booking")]
    UnknownSale,
    #[error("this sale has no such pool (train, date and class)")]
    UnknownPool,
    #[error("this pool is temporarily unavailable; retry shortly")]
    PoolUnavailable,
    #[error("this sale has ended: nothing more is for sale in it")]
    SaleEnded,
    /// The attempt reached the pool after its deadline; nothing was taken.
    #[error("the reservation took too long and was not made; retry with the same Idempotency-Key")]
    Late,
    #[error("not enough seats left in this pool ({available} available)")]
    SoldOut { available: u32 },
    #[error("this admission token has already been used for a reservation")]
    TokenSpent,
    /// Refused, but another attempt of the same key may still take seats: the pass stays bound
    /// to the key until a retry settles it.
    #[error("another attempt with this Idempotency-Key may still be taking seats; retry with the same key")]
    Unsettled,
    /// The refusal's writes (the pass given back) could not be shown on a Redis replica in time.
    #[error("the answer could not be copied to a Redis replica in time; retry with the same Idempotency-Key")]
    NotReplicated,
    #[error("this Idempotency-Key was used with a different request")]
    KeyReused,
    /// The buyer's seats in this sale would pass the sale's per-buyer limit.
    #[error(
        "you may hold or buy at most {limit} seats in this sale, and {counted} are yours already"
    )]
    BuyerLimit { limit: u32, counted: u32 },
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    /// A reply or record that is not what the scripts write: a bug, never the client's doing.
    #[error("unexpected script reply: {0}")]
    Protocol(String),
}

/// A script's call failed (Redis' error), or its reply was not one it documents (a bug).
impl From<ScriptError> for ReserveError {
    fn from(e: ScriptError) -> Self {
        match e {
            ScriptError::Redis(e) => Self::Redis(e),
            ScriptError::Odd(OddReply { script, reply }) => {
                Self::Protocol(format!("{script}: {reply}"))
            }
        }
    }
}

/// Why the pool made no hold, and what that proves about other attempts (release_claim.lua).
#[derive(Debug)]
pub struct Refusal {
    pub(super) error: ReserveError,
    /// When the pool refused, by its Redis' clock, or `None` if the refusal proves nothing
    /// about the key's other attempts (a lost pool, a sale that ended, the buyer's limit).
    pub(super) at_ms: Option<UnixMillis>,
    /// The stamp below which the pool has fenced off the key's attempts (`reserve.lua`: this
    /// retry's own fence, or a later attempt's that covers this one): none of them can take
    /// seats any more, once the fence is on the pool's replicas.
    pub(super) fence: Option<i64>,
}

impl Refusal {
    /// A refusal that proves nothing about the key's other attempts.
    pub(super) fn alone(error: ReserveError) -> Self {
        Self {
            error,
            at_ms: None,
            fence: None,
        }
    }
}

/// What `reserve.lua` answered.
#[derive(Debug)]
pub enum Reserved {
    Hold(Hold),
    /// No hold: the claim is given back as the refusal allows ([`Refusal`]).
    Refused(Refusal),
    /// The token was spent by another key's reservation in this pool.
    Spent,
}

/// `{"reserved" | "replay", id, secret, seats, expiry, at, outbox entry, event}`, or a refusal:
/// `{"sold_out", available, at, fence}`, `{"late", at, fence}`, `{"superseded", at}`,
/// `{"spent"}`, `{"not_armed" | "diverged"}`, `{"ended"}`.
impl FromStrings for Reserved {
    fn from_strings(reply: &[String]) -> Option<Self> {
        let int = |i: usize| -> Option<i64> { reply.get(i)?.parse().ok() };
        // "0": no fence; else the stamp it stops attempts below.
        let fence = |i: usize| -> Option<Option<i64>> {
            let stamp = int(i)?;
            (stamp >= 0).then_some((stamp > 0).then_some(stamp))
        };
        let refused = |error, at_ms, fence| {
            Some(Self::Refused(Refusal {
                error,
                at_ms: Some(at_ms),
                fence,
            }))
        };
        match reply.first()?.as_str() {
            kind @ ("reserved" | "replay") if reply.len() == 8 => Some(Self::Hold(Hold {
                reservation_id: reply[1].clone(),
                secret: reply[2].clone(),
                seats: u32::try_from(int(3)?).ok()?,
                hold_expires_at_ms: int(4)?,
                reserved_at_ms: int(5)?,
                outbox_entry: reply[6].clone(),
                pending_event: Some(reply[7].clone()).filter(|e| !e.is_empty()),
                replayed: kind == "replay",
                buyer_record: None,
            })),
            "sold_out" => {
                let available = u32::try_from(int(1)?.max(0)).unwrap_or(u32::MAX);
                refused(ReserveError::SoldOut { available }, int(2)?, fence(3)?)
            }
            "late" => refused(ReserveError::Late, int(1)?, fence(2)?),
            // A later attempt of the same key was refused first: this one is as good as late,
            // and proves nothing about the others (the later one may still be retried).
            "superseded" => refused(ReserveError::Late, int(1)?, None),
            "spent" => Some(Self::Spent),
            // The sale lists the pool (claim_token checked), yet its state is missing (lost) or
            // it lost writes (diverged): the refusal proves nothing about other attempts.
            "not_armed" | "diverged" => {
                Some(Self::Refused(Refusal::alone(ReserveError::PoolUnavailable)))
            }
            "ended" => Some(Self::Refused(Refusal::alone(ReserveError::SaleEnded))),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::strings;
    use super::*;

    fn refusal(reply: &[&str]) -> Refusal {
        match Reserved::from_strings(&strings(reply)) {
            Some(Reserved::Refused(refusal)) => refusal,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    fn held(reply: &[&str]) -> Hold {
        match Reserved::from_strings(&strings(reply)) {
            Some(Reserved::Hold(hold)) => hold,
            other => panic!("expected a hold, got {other:?}"),
        }
    }

    #[test]
    fn reserve_replies_parse_into_holds_and_refusals() {
        let hold = held(&["reserved", "r1", "s1", "2", "900", "100", "1-0", "{}"]);
        assert_eq!((hold.seats, hold.outbox_entry.as_str()), (2, "1-0"));
        assert!(!hold.replayed);
        let replay = held(&["replay", "r1", "s1", "2", "900", "100", "1-0", ""]);
        assert!(replay.replayed);
        assert_eq!(
            (hold.pending_event.as_deref(), replay.pending_event),
            (Some("{}"), None)
        );
        assert!(matches!(
            refusal(&["sold_out", "1", "5000", "0"]),
            Refusal {
                error: ReserveError::SoldOut { available: 1 },
                at_ms: Some(5000),
                fence: None
            }
        ));
        assert!(matches!(
            refusal(&["sold_out", "0", "5000", "4990"]),
            Refusal {
                fence: Some(4990),
                ..
            }
        ));
        assert!(matches!(
            refusal(&["late", "7000", "6500"]),
            Refusal {
                error: ReserveError::Late,
                at_ms: Some(7000),
                fence: Some(6500)
            }
        ));
        assert!(
            matches!(
                refusal(&["superseded", "8000"]),
                Refusal {
                    error: ReserveError::Late,
                    at_ms: Some(8000),
                    fence: None
                }
            ),
            "a superseded attempt is late, and fences nothing"
        );
        assert!(
            matches!(
                refusal(&["not_armed"]),
                Refusal {
                    error: ReserveError::PoolUnavailable,
                    at_ms: None,
                    fence: None
                }
            ),
            "a lost pool proves nothing about other attempts"
        );
        assert!(matches!(
            Reserved::from_strings(&strings(&["spent"])),
            Some(Reserved::Spent)
        ));
        for junk in [
            vec!["reserved", "r1"],
            vec![],
            vec!["sold_out", "1"],
            vec!["sold_out", "1", "5000", "yes"],
            vec!["late"],
            vec!["late", "7000"],
            vec!["superseded"],
        ] {
            assert!(
                Reserved::from_strings(&strings(&junk)).is_none(),
                "{junk:?}"
            );
        }
    }
}
