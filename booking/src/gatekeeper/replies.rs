//! What the gatekeeper's scripts answer, as Rust types, each reply parsed in one function.

use floodgate_protocol::reservation::ReservationState;
use floodgate_protocol::UnixMillis;

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
