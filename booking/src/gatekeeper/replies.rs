//! What the gatekeeper's scripts answer, as Rust types, each read from its script's reply in
//! one place (`FromStrings`: `None` is a reply the script does not document).

use floodgate_platform::script::FromStrings;
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

/// `{outcome, state}`.
impl FromStrings for Ack {
    fn from_strings(reply: &[String]) -> Option<Self> {
        let [outcome, state] = reply else {
            return None;
        };
        let state = || ReservationState::from_lua(state);
        Some(match outcome.as_str() {
            "acked" => Self::Acked { state: state()? },
            "already" => Self::Already { state: state()? },
            "aborted" => Self::Aborted,
            "unknown" => Self::Unknown,
            _ => return None,
        })
    }
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

/// `{outcome}` or `{outcome, state}`.
impl FromStrings for Abort {
    fn from_strings(reply: &[String]) -> Option<Self> {
        let detail = || reply.get(1).map_or("", String::as_str);
        Some(match reply.first()?.as_str() {
            "aborted" => Self::Aborted,
            "durable" => Self::Durable {
                state: ReservationState::from_lua(detail())?,
            },
            "not_held" => Self::NotHeld {
                state: ReservationState::from_lua(detail()),
            },
            "not_armed" => Self::PoolUnavailable,
            _ => return None,
        })
    }
}

/// What `start_payment.lua` said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PaymentStart {
    /// The payment is recorded as the one that may buy the hold.
    Pending,
    /// Another was recorded first (a start at the same moment): that one may buy the hold.
    Started(StartedPayment),
    NotHeld {
        state: ReservationState,
    },
    Unknown,
    PoolUnavailable,
}

/// `{outcome}` or `{"not_held", state}`.
impl FromStrings for PaymentStart {
    fn from_strings(reply: &[String]) -> Option<Self> {
        Some(match reply.first()?.as_str() {
            "pending" => Self::Pending,
            "started" => Self::Started(StartedPayment {
                payment_id: reply.get(1)?.clone(),
                checkout_url: reply.get(2)?.clone(),
                status: reply.get(3)?.clone(),
            }),
            "not_held" => Self::NotHeld {
                state: ReservationState::from_lua(reply.get(1)?)?,
            },
            "unknown" => Self::Unknown,
            "not_armed" => Self::PoolUnavailable,
            _ => return None,
        })
    }
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

/// `{outcome, detail}`.
impl FromStrings for Confirmation {
    fn from_strings(reply: &[String]) -> Option<Self> {
        let [outcome, detail] = reply else {
            return None;
        };
        Some(match outcome.as_str() {
            "confirmed" => Self::Confirmed,
            "refund_required" => Self::RefundRequired {
                reason: detail.clone(),
            },
            "duplicate" => Self::Duplicate(detail.clone()),
            "not_armed" => Self::PoolUnavailable,
            "unknown" => Self::Unknown,
            _ => return None,
        })
    }
}

/// `{outcome, detail}`.
impl FromStrings for Release {
    fn from_strings(reply: &[String]) -> Option<Self> {
        let [outcome, detail] = reply else {
            return None;
        };
        Some(match outcome.as_str() {
            "released" => Self::Released,
            "ignored" => Self::Ignored(detail.clone()),
            "duplicate" => Self::Duplicate(detail.clone()),
            "not_armed" => Self::PoolUnavailable,
            "unknown" => Self::Unknown,
            _ => return None,
        })
    }
}

/// What `refund_result.lua` recorded of the provider's verdict on a refund.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefundVerdict {
    /// `RefundSucceeded` or `RefundFailed` emitted.
    Recorded,
    /// No refund of this payment was pending: nothing changed.
    NotPending,
    /// This webhook event was processed before.
    Duplicate,
    /// The pool's state is missing: nothing can be decided until it is rebuilt.
    PoolUnavailable,
    Unknown,
}

impl RefundVerdict {
    /// The word the provider is answered with.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Recorded => "recorded",
            Self::NotPending => "not_pending",
            Self::Duplicate => "duplicate",
            Self::PoolUnavailable => "not_armed",
            Self::Unknown => "unknown",
        }
    }
}

/// `{outcome, ...}`.
impl FromStrings for RefundVerdict {
    fn from_strings(reply: &[String]) -> Option<Self> {
        Some(match reply.first()?.as_str() {
            "recorded" => Self::Recorded,
            "not_pending" => Self::NotPending,
            "duplicate" => Self::Duplicate,
            "not_armed" => Self::PoolUnavailable,
            "unknown" => Self::Unknown,
            _ => return None,
        })
    }
}

/// What `expire.lua` did with one due hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expiry {
    /// This call expired it: its seats are back.
    Expired,
    /// Not live and due (sold, released, expired by another reaper, not yet due), or its pool's
    /// state is missing (the rebuild restores the hold's expiry): nothing changed.
    Skipped,
}

/// `{"expired"}`, `{"skipped", state}` or `{"not_armed"}`.
impl FromStrings for Expiry {
    fn from_strings(reply: &[String]) -> Option<Self> {
        match reply.first()?.as_str() {
            "expired" => Some(Self::Expired),
            "skipped" | "not_armed" => Some(Self::Skipped),
            _ => None,
        }
    }
}

/// A record whose state is not one the scripts write, as the Redis error it is to callers.
pub(super) fn odd_record(state: &str) -> redis::RedisError {
    redis::RedisError::from((
        redis::ErrorKind::TypeError,
        "odd reservation record",
        format!("state {state:?}"),
    ))
}

/// A payment started at the provider for a hold: where its payer completes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StartedPayment {
    pub payment_id: String,
    pub checkout_url: String,
    pub status: String,
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
    /// The payment started for it at the provider, the one that may buy it.
    pub started: Option<StartedPayment>,
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
            Confirmation::from_strings(&strings(&["confirmed", "held"])).unwrap(),
            Confirmation::Confirmed
        );
        assert_eq!(
            Confirmation::from_strings(&strings(&["refund_required", "expired"])).unwrap(),
            Confirmation::RefundRequired {
                reason: "expired".into()
            }
        );
        assert_eq!(
            Confirmation::from_strings(&strings(&["not_armed", ""])).unwrap(),
            Confirmation::PoolUnavailable
        );
        assert!(Confirmation::from_strings(&strings(&["confirmed"])).is_none());
        assert_eq!(
            Release::from_strings(&strings(&["ignored", "sold"])).unwrap(),
            Release::Ignored("sold".into())
        );
        assert!(Release::from_strings(&strings(&["what", "x"])).is_none());
        assert_eq!(
            Ack::from_strings(&strings(&["acked", "held"])).unwrap(),
            Ack::Acked {
                state: ReservationState::Held
            }
        );
        assert_eq!(
            Ack::from_strings(&strings(&["already", "sold"])).unwrap(),
            Ack::Already {
                state: ReservationState::Confirmed
            }
        );
        assert_eq!(
            Ack::from_strings(&strings(&["aborted", ""])).unwrap(),
            Ack::Aborted
        );
        assert!(Ack::from_strings(&strings(&["acked"])).is_none());
        assert_eq!(
            Abort::from_strings(&strings(&["durable", "held"])).unwrap(),
            Abort::Durable {
                state: ReservationState::Held
            }
        );
        assert_eq!(
            Abort::from_strings(&strings(&["not_armed"])).unwrap(),
            Abort::PoolUnavailable
        );
        assert!(Abort::from_strings(&strings(&["?"])).is_none());
        assert_eq!(
            PaymentStart::from_strings(&strings(&["not_held", "sold"])).unwrap(),
            PaymentStart::NotHeld {
                state: ReservationState::Confirmed
            }
        );
        assert!(PaymentStart::from_strings(&strings(&["not_held", "lost"])).is_none());
    }

    #[test]
    fn refund_and_expiry_replies_parse() {
        assert_eq!(
            RefundVerdict::from_strings(&strings(&["duplicate", "recorded"])),
            Some(RefundVerdict::Duplicate)
        );
        assert_eq!(
            RefundVerdict::from_strings(&strings(&["not_armed", ""])),
            Some(RefundVerdict::PoolUnavailable)
        );
        assert_eq!(RefundVerdict::from_strings(&strings(&["done"])), None);
        assert_eq!(
            Expiry::from_strings(&strings(&["skipped", "sold"])),
            Some(Expiry::Skipped)
        );
        assert_eq!(
            Expiry::from_strings(&strings(&["expired"])),
            Some(Expiry::Expired)
        );
        assert_eq!(Expiry::from_strings(&strings(&[])), None);
    }
}
