//! The events Floodgate writes to Kafka.
//!
//! Every message on the reservations topic is one JSON [`Envelope`]: a schema version, a unique and
//! *deterministic* event id (`<reservation id>.<transition>`: a retried or relayed-again event has
//! the same id, so consumers can deduplicate), the sale and pool, and one [`Event`] as
//! `{"type": .., "data": {..}}`. The Kafka message key is the platform's `keys::pool_partition_key`, so one
//! pool's events stay in order on one partition.
//!
//! Every event carries the whole reservation ([`ReservationData`]), not just what changed, so a
//! consumer can apply any event even if it sees it before the one that created the reservation.
//!
//! The pool scripts in `lua/` build these envelopes (in `lua/lib.lua`) and write them to the pool's
//! outbox in the same atomic step as the change; this module is their schema. Compatibility rule:
//! within one `v`, fields may be added (readers ignore unknown fields) but never removed or changed
//! in meaning; anything else is a new `v`, and consumers keep reading the old.

use serde::{Deserialize, Serialize};

use crate::UnixMillis;

/// The version written by this build.
pub const SCHEMA_VERSION: u16 = 1;

/// The default topic of reservation events (configurable everywhere it is used).
pub const DEFAULT_RESERVATIONS_TOPIC: &str = "floodgate.reservations";

/// One event as it travels through Kafka.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Envelope {
    /// Schema version of this envelope and its payload.
    pub v: u16,
    /// `<reservation id>.<transition>`: unique per decision and the same on every retry of it.
    pub id: String,
    /// When the decision was made (Redis server time), Unix ms.
    pub at_ms: UnixMillis,
    pub sale: String,
    pub pool: String,
    /// The pool's event sequence: 1, 2, 3, ... one number per event the pool writes, in the
    /// order Redis decided them (relayed events may reach Kafka out of this order). A pool whose
    /// Redis is behind the highest number Kafka holds lost writes in a failover (docs/runbook.md).
    /// Absent on events written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<i64>,
    #[serde(flatten)]
    pub event: Event,
}

/// What happened to a reservation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", content = "data")]
pub enum Event {
    /// Seats were taken from the pool into a hold awaiting payment.
    SeatReserved(ReservationData),
    /// The hold was taken back because its `SeatReserved` could not be made durable in time;
    /// the client was told 503. Cancels a `SeatReserved` that lands late.
    ReservationAborted(ReservationData),
    /// Payment succeeded on a live hold: the seats are sold.
    PaymentConfirmed(ReservationData),
    /// Payment failed: the seats went back to the pool.
    PaymentFailed(ReservationData),
    /// The hold lapsed unpaid: the seats went back to the pool.
    HoldExpired(ReservationData),
    /// Money arrived for a hold that was no longer live; it is being refunded.
    RefundRequired(ReservationData),
    /// The provider confirmed the refund.
    RefundSucceeded(ReservationData),
    /// The provider could not refund: a person must follow up.
    RefundFailed(ReservationData),
}

impl Event {
    /// The `type` tag as written on the wire, for logs and metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Event::SeatReserved(_) => "SeatReserved",
            Event::ReservationAborted(_) => "ReservationAborted",
            Event::PaymentConfirmed(_) => "PaymentConfirmed",
            Event::PaymentFailed(_) => "PaymentFailed",
            Event::HoldExpired(_) => "HoldExpired",
            Event::RefundRequired(_) => "RefundRequired",
            Event::RefundSucceeded(_) => "RefundSucceeded",
            Event::RefundFailed(_) => "RefundFailed",
        }
    }

    pub fn data(&self) -> &ReservationData {
        match self {
            Event::SeatReserved(d)
            | Event::ReservationAborted(d)
            | Event::PaymentConfirmed(d)
            | Event::PaymentFailed(d)
            | Event::HoldExpired(d)
            | Event::RefundRequired(d)
            | Event::RefundSucceeded(d)
            | Event::RefundFailed(d) => d,
        }
    }
}

/// The reservation an event is about, as it stands after the event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReservationData {
    pub reservation_id: String,
    /// The admission token that made it (one reservation per token).
    pub token_id: String,
    /// The waiting-room ticket that was admitted.
    pub ticket: u64,
    pub seats: u32,
    /// When Redis granted the hold, Unix ms.
    pub reserved_at_ms: UnixMillis,
    /// When the hold lapses (or lapsed) unless paid, Unix ms.
    pub hold_expires_at_ms: UnixMillis,
    /// The provider's payment id, on payment and refund events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payment_id: Option<String>,
    /// The signed-in buyer who made it (the issuer's subject, or its keyed hash), when the
    /// admission token named one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buyer: Option<String>,
}

impl Event {
    /// Whether this event ends, for good, the one reservation its admission token can make
    /// without a sale: its seats no longer count against the buyer's per-sale limit. An abort is
    /// not such an end: the client's retry with the same key reserves afresh with the same
    /// token, and those seats count once, as before.
    pub fn frees_buyer_seats(&self) -> bool {
        matches!(self, Event::PaymentFailed(_) | Event::HoldExpired(_))
    }
}

impl Envelope {
    pub fn from_json(bytes: &[u8]) -> Result<Self, serde_json::Error> {
        serde_json::from_slice(bytes)
    }

    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("envelope serialises")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wire_shape_is_stable() {
        let json = br#"{"v":1,"id":"p~r.reserved","at_ms":5,"sale":"s1","pool":"p1",
            "type":"SeatReserved","data":{"reservation_id":"p~r","token_id":"t1","ticket":3,
            "seats":2,"reserved_at_ms":4,"hold_expires_at_ms":9}}"#;
        let envelope = Envelope::from_json(json).unwrap();
        assert_eq!(envelope.event.kind(), "SeatReserved");
        assert_eq!(envelope.event.data().seats, 2);
        assert_eq!(envelope.event.data().payment_id, None);
        let round: serde_json::Value = serde_json::from_slice(&envelope.to_json()).unwrap();
        let original: serde_json::Value = serde_json::from_slice(json).unwrap();
        assert_eq!(round, original);
    }

    #[test]
    fn unknown_fields_are_tolerated_and_unknown_types_are_errors() {
        let with_extra = br#"{"v":1,"id":"e","at_ms":1,"sale":"s","pool":"p","new":true,
            "type":"PaymentConfirmed","data":{"reservation_id":"r","token_id":"t","ticket":1,
            "seats":1,"reserved_at_ms":1,"hold_expires_at_ms":2,"payment_id":"pay_1","later":0}}"#;
        let e = Envelope::from_json(with_extra).unwrap();
        assert_eq!(e.event.data().payment_id.as_deref(), Some("pay_1"));
        let unknown =
            br#"{"v":1,"id":"e","at_ms":1,"sale":"s","pool":"p","type":"Nope","data":{}}"#;
        assert!(Envelope::from_json(unknown).is_err());
    }
}
