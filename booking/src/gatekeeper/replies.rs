//! What the gatekeeper's scripts answer, as Rust types, each reply parsed in one function.

use floodgate_contract::reservation::ReservationState;
use floodgate_contract::UnixMillis;

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

/// What `ack.lua` said about a reservation whose `SeatReserved` the broker acknowledged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ack {
    /// This call made it durable; `state` is what it is now (held unless it already ended).
    Acked {
        state: ReservationState,
    },
    /// An earlier request or the relay had made it durable.
    Already {
        state: ReservationState,
    },
    /// It was taken back before the ack: no 2xx may be given for it.
    Aborted,
    Unknown,
}

pub(super) fn parse_ack(reply: &[String]) -> Result<Ack, redis::RedisError> {
    let (outcome, state) = pair("ack", reply)?;
    let state = || record_state("ack", reply, &state);
    Ok(match outcome.as_str() {
        "acked" => Ack::Acked { state: state()? },
        "already" => Ack::Already { state: state()? },
        "aborted" => Ack::Aborted,
        "unknown" => Ack::Unknown,
        _ => return Err(protocol_error("ack", reply)),
    })
}

/// What `abort.lua` did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Abort {
    /// The hold was live and not durable: its seats are back.
    Aborted,
    /// Another request saw it acknowledged (and may have answered 201): it stands.
    Durable { state: ReservationState },
    /// It had already ended otherwise (`None`: there is no such reservation): nothing changed.
    NotHeld { state: Option<ReservationState> },
    /// The pool's state is missing: nothing changed.
    PoolUnavailable,
}

pub(super) fn parse_abort(reply: &[String]) -> Result<Abort, redis::RedisError> {
    let detail = || reply.get(1).map_or("", String::as_str);
    Ok(match reply.first().map(String::as_str) {
        Some("aborted") => Abort::Aborted,
        Some("durable") => Abort::Durable {
            state: record_state("abort", reply, detail())?,
        },
        Some("not_held") => Abort::NotHeld {
            state: ReservationState::from_lua(detail()),
        },
        Some("not_armed") => Abort::PoolUnavailable,
        _ => return Err(protocol_error("abort", reply)),
    })
}

/// What `start_payment.lua` said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PaymentStart {
    /// The payment is recorded as the one that may buy the hold.
    Pending,
    NotHeld {
        state: ReservationState,
    },
    Unknown,
    PoolUnavailable,
}

pub(super) fn parse_start_payment(reply: &[String]) -> Result<PaymentStart, redis::RedisError> {
    Ok(match reply.first().map(String::as_str) {
        Some("pending") => PaymentStart::Pending,
        Some("not_held") => PaymentStart::NotHeld {
            state: record_state(
                "start_payment",
                reply,
                reply.get(1).map_or("", String::as_str),
            )?,
        },
        Some("unknown") => PaymentStart::Unknown,
        Some("not_armed") => PaymentStart::PoolUnavailable,
        _ => return Err(protocol_error("start_payment", reply)),
    })
}

/// Outcome of a successful payment's webhook (`confirm.lua`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Confirmation {
    /// The seats are sold (now, or already by this same payment).
    Confirmed,
    /// Refund the payment. `reason`: the hold's state if it was not live (expired, released,
    /// aborted, sold by another payment), or, for a live hold left as it was,
    /// `unexpected_payment` (not the payment started for it) or `wrong_amount`.
    RefundRequired {
        reason: String,
    },
    /// This webhook event was processed before, with this outcome.
    Duplicate(String),
    /// The pool's state is missing: nothing can be decided until it is rebuilt.
    PoolUnavailable,
    Unknown,
}

/// Outcome of a failed payment's webhook (`release.lua`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Release {
    Released,
    /// Not held any more (the state is given), or not the payment started for it: a late, out of
    /// order or stray failure changes nothing.
    Ignored(String),
    Duplicate(String),
    PoolUnavailable,
    Unknown,
}

pub(super) fn pair(script: &str, reply: &[String]) -> Result<(String, String), redis::RedisError> {
    match reply {
        [a, b] => Ok((a.clone(), b.clone())),
        _ => Err(protocol_error(script, reply)),
    }
}

/// A record's state in `script`'s `reply`; any other word is a protocol error.
fn record_state(
    script: &str,
    reply: &[String],
    state: &str,
) -> Result<ReservationState, redis::RedisError> {
    ReservationState::from_lua(state).ok_or_else(|| protocol_error(script, reply))
}

pub(super) fn protocol_error(script: &str, reply: &[String]) -> redis::RedisError {
    redis::RedisError::from((
        redis::ErrorKind::TypeError,
        "unexpected script reply",
        format!("{script}: {reply:?}"),
    ))
}

pub(super) fn parse_confirm(reply: &[String]) -> Result<Confirmation, redis::RedisError> {
    let (outcome, detail) = pair("confirm", reply)?;
    Ok(match outcome.as_str() {
        "confirmed" => Confirmation::Confirmed,
        "refund_required" => Confirmation::RefundRequired { reason: detail },
        "duplicate" => Confirmation::Duplicate(detail),
        "not_armed" => Confirmation::PoolUnavailable,
        "unknown" => Confirmation::Unknown,
        _ => return Err(protocol_error("confirm", reply)),
    })
}

pub(super) fn parse_release(reply: &[String]) -> Result<Release, redis::RedisError> {
    let (outcome, detail) = pair("release", reply)?;
    Ok(match outcome.as_str() {
        "released" => Release::Released,
        "ignored" => Release::Ignored(detail),
        "duplicate" => Release::Duplicate(detail),
        "not_armed" => Release::PoolUnavailable,
        "unknown" => Release::Unknown,
        _ => return Err(protocol_error("release", reply)),
    })
}

/// A reservation as stored in Redis.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredReservation {
    pub id: String,
    pub secret: String,
    pub seats: u32,
    pub state: ReservationState,
    pub hold_expires_at_ms: UnixMillis,
    pub reserved_at_ms: UnixMillis,
    pub payment_id: Option<String>,
    /// Refunds by payment id: `pending`, `succeeded` or `failed`.
    pub refunds: Vec<(String, String)>,
    pub fare_minor: i64,
    pub currency: String,
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

    #[test]
    fn confirm_release_ack_and_abort_replies_parse() {
        assert_eq!(
            parse_confirm(&strings(&["confirmed", "held"])).unwrap(),
            Confirmation::Confirmed
        );
        assert_eq!(
            parse_confirm(&strings(&["refund_required", "expired"])).unwrap(),
            Confirmation::RefundRequired {
                reason: "expired".into()
            }
        );
        assert_eq!(
            parse_confirm(&strings(&["not_armed", ""])).unwrap(),
            Confirmation::PoolUnavailable
        );
        assert!(parse_confirm(&strings(&["confirmed"])).is_err());
        assert_eq!(
            parse_release(&strings(&["ignored", "sold"])).unwrap(),
            Release::Ignored("sold".into())
        );
        assert!(parse_release(&strings(&["what", "x"])).is_err());
        assert_eq!(
            parse_ack(&strings(&["acked", "held"])).unwrap(),
            Ack::Acked {
                state: ReservationState::Held
            }
        );
        assert_eq!(
            parse_ack(&strings(&["already", "sold"])).unwrap(),
            Ack::Already {
                state: ReservationState::Confirmed
            }
        );
        assert_eq!(parse_ack(&strings(&["aborted", ""])).unwrap(), Ack::Aborted);
        assert!(parse_ack(&strings(&["acked"])).is_err());
        assert_eq!(
            parse_abort(&strings(&["durable", "held"])).unwrap(),
            Abort::Durable {
                state: ReservationState::Held
            }
        );
        assert_eq!(
            parse_abort(&strings(&["not_armed"])).unwrap(),
            Abort::PoolUnavailable
        );
        assert!(parse_abort(&strings(&["?"])).is_err());
        assert_eq!(
            parse_start_payment(&strings(&["not_held", "sold"])).unwrap(),
            PaymentStart::NotHeld {
                state: ReservationState::Confirmed
            }
        );
    }
}
