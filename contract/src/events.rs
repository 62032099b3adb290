//! The events Floodgate writes to Kafka.
//!
//! Every message on the reservations topic is one JSON [`Envelope`]: a schema version, a unique and
//! *deterministic* event id (a retried decision produces the same id, so consumers can deduplicate),
//! the sale and pool, and one [`Event`] as `{"type": .., "data": {..}}`. The Kafka message key is
//! [`crate::keys::pool_partition_key`], so one pool's events stay in order on one partition.
//!
//! Compatibility rule: within one `v`, fields may be added (readers ignore unknown fields) but never
//! removed or changed in meaning; anything else is a new `v`, and consumers keep reading the old.

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
    /// Unique per decision and the same on every retry of it: the consumer's deduplication key.
    pub id: String,
    /// When the decision was made (Redis server time), Unix ms.
    pub at_ms: UnixMillis,
    pub sale: String,
    pub pool: String,
    #[serde(flatten)]
    pub event: Event,
}

/// What happened. Later kinds (payment, expiry, refund, abort) join this enum.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", content = "data")]
#[non_exhaustive]
pub enum Event {
    /// Seats were taken from a pool into a hold awaiting payment.
    SeatReserved(SeatReserved),
}

impl Event {
    /// The `type` tag as written on the wire, for logs and metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Event::SeatReserved(_) => "SeatReserved",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeatReserved {
    pub reservation_id: String,
    /// The admission token that made it (one reservation per token).
    pub token_id: String,
    /// The waiting-room ticket that was admitted.
    pub ticket: u64,
    pub seats: u32,
    /// When the hold lapses unless paid, Unix ms.
    pub hold_expires_at_ms: UnixMillis,
}

impl Envelope {
    pub fn new(id: String, at_ms: UnixMillis, sale: &str, pool: &str, event: Event) -> Self {
        Self {
            v: SCHEMA_VERSION,
            id,
            at_ms,
            sale: sale.to_owned(),
            pool: pool.to_owned(),
            event,
        }
    }

    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("envelope serialises")
    }

    pub fn from_json(bytes: &[u8]) -> Result<Self, serde_json::Error> {
        serde_json::from_slice(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wire_shape_is_stable() {
        let envelope = Envelope::new(
            "e1".into(),
            5,
            "s1",
            "p1",
            Event::SeatReserved(SeatReserved {
                reservation_id: "r1".into(),
                token_id: "t1".into(),
                ticket: 3,
                seats: 2,
                hold_expires_at_ms: 9,
            }),
        );
        let json: serde_json::Value = serde_json::from_slice(&envelope.to_json()).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "v": 1, "id": "e1", "at_ms": 5, "sale": "s1", "pool": "p1",
                "type": "SeatReserved",
                "data": {"reservation_id": "r1", "token_id": "t1", "ticket": 3, "seats": 2,
                         "hold_expires_at_ms": 9}
            })
        );
        assert_eq!(Envelope::from_json(&envelope.to_json()).unwrap(), envelope);
    }

    #[test]
    fn unknown_fields_are_tolerated_and_unknown_types_are_errors() {
        let with_extra = br#"{"v":1,"id":"e","at_ms":1,"sale":"s","pool":"p","new":true,
            "type":"SeatReserved","data":{"reservation_id":"r","token_id":"t","ticket":1,
            "seats":1,"hold_expires_at_ms":2,"later":0}}"#;
        assert!(Envelope::from_json(with_extra).is_ok());
        let unknown =
            br#"{"v":1,"id":"e","at_ms":1,"sale":"s","pool":"p","type":"Nope","data":{}}"#;
        assert!(Envelope::from_json(unknown).is_err());
    }
}
