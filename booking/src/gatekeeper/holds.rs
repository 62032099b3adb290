//! What `reserve.lua` answers, as Rust types: a hold, or a refusal and what it proves about the
//! key's other attempts (the one function that knows the reply's shape is [`parse_reserve`]).

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
    #[error("unexpected script reply: {0}")]
    Protocol(String),
}

/// Why the pool made no hold, and what that proves about other attempts (release_claim.lua).
#[derive(Debug)]
pub(super) struct Refusal {
    pub(super) error: ReserveError,
    /// When the pool refused, by its Redis' clock, or `None` if the refusal proves nothing
    /// about the key's other attempts (a lost pool, a sale that ended, the buyer's limit).
    pub(super) at_ms: Option<UnixMillis>,
    /// The pool fenced off the key's earlier attempts (a retry's refusal, `reserve.lua`): none
    /// of them can take seats any more, once the fence is on the pool's replicas.
    pub(super) fenced: bool,
}

/// Turns `reserve.lua`'s reply into a hold or a refusal: the one place that knows its shape.
/// A refusal that made no hold comes with what the claim's release needs ([`Refusal`]).
pub(super) fn parse_reserve(reply: &[String]) -> Result<Hold, Result<Refusal, ReserveError>> {
    let bad = || Err(ReserveError::Protocol(format!("reserve: {reply:?}")));
    let int = |i: usize| -> Option<i64> { reply.get(i).and_then(|s| s.parse().ok()) };
    let flag = |i: usize| match reply.get(i).map(String::as_str) {
        Some("1") => Some(true),
        Some("0") => Some(false),
        _ => None,
    };
    match reply.first().map(String::as_str) {
        Some(kind @ ("reserved" | "replay")) if reply.len() == 8 => {
            let (Some(seats), Some(expires), Some(at)) = (int(3), int(4), int(5)) else {
                return Err(bad());
            };
            Ok(Hold {
                reservation_id: reply[1].clone(),
                secret: reply[2].clone(),
                seats: u32::try_from(seats).map_err(|_| bad())?,
                hold_expires_at_ms: expires,
                reserved_at_ms: at,
                outbox_entry: reply[6].clone(),
                pending_event: Some(reply[7].clone()).filter(|e| !e.is_empty()),
                replayed: kind == "replay",
                buyer_record: None,
            })
        }
        Some("sold_out") => match (int(1), int(2), flag(3)) {
            (Some(available), Some(at_ms), Some(fenced)) => Err(Ok(Refusal {
                error: ReserveError::SoldOut {
                    available: u32::try_from(available.max(0)).unwrap_or(u32::MAX),
                },
                at_ms: Some(at_ms),
                fenced,
            })),
            _ => Err(bad()),
        },
        Some("late") => match (int(1), flag(2)) {
            (Some(at_ms), Some(fenced)) => Err(Ok(Refusal {
                error: ReserveError::Late,
                at_ms: Some(at_ms),
                fenced,
            })),
            _ => Err(bad()),
        },
        // A later attempt of the same key was refused first: this one is as good as late, and
        // proves nothing about the others (the later one may still be retried).
        Some("superseded") => match int(1) {
            Some(at_ms) => Err(Ok(Refusal {
                error: ReserveError::Late,
                at_ms: Some(at_ms),
                fenced: false,
            })),
            None => Err(bad()),
        },
        Some("spent") => Err(Err(ReserveError::TokenSpent)),
        // The sale lists the pool (claim_token checked), yet its state is missing (lost) or it
        // lost writes (diverged): the refusal proves nothing about other attempts.
        Some("not_armed" | "diverged") => Err(Ok(Refusal {
            error: ReserveError::PoolUnavailable,
            at_ms: None,
            fenced: false,
        })),
        Some("ended") => Err(Ok(Refusal {
            error: ReserveError::SaleEnded,
            at_ms: None,
            fenced: false,
        })),
        _ => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::super::strings;
    use super::*;

    fn refusal(reply: &[&str]) -> Refusal {
        match parse_reserve(&strings(reply)) {
            Err(Ok(refusal)) => refusal,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn reserve_replies_parse_into_holds_and_refusals() {
        let hold = parse_reserve(&strings(&[
            "reserved", "r1", "s1", "2", "900", "100", "1-0", "{}",
        ]))
        .unwrap();
        assert_eq!((hold.seats, hold.outbox_entry.as_str()), (2, "1-0"));
        assert!(!hold.replayed);
        let replay = parse_reserve(&strings(&[
            "replay", "r1", "s1", "2", "900", "100", "1-0", "",
        ]))
        .unwrap();
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
                fenced: false
            }
        ));
        assert!(matches!(
            refusal(&["sold_out", "0", "5000", "1"]),
            Refusal { fenced: true, .. }
        ));
        assert!(matches!(
            refusal(&["late", "7000", "1"]),
            Refusal {
                error: ReserveError::Late,
                at_ms: Some(7000),
                fenced: true
            }
        ));
        assert!(
            matches!(
                refusal(&["superseded", "8000"]),
                Refusal {
                    error: ReserveError::Late,
                    at_ms: Some(8000),
                    fenced: false
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
                    fenced: false
                }
            ),
            "a lost pool proves nothing about other attempts"
        );
        assert!(matches!(
            parse_reserve(&strings(&["spent"])),
            Err(Err(ReserveError::TokenSpent))
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
                matches!(
                    parse_reserve(&strings(&junk)),
                    Err(Err(ReserveError::Protocol(_)))
                ),
                "{junk:?}"
            );
        }
    }
}
