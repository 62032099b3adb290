//! A reservation's state, in the three vocabularies it is written in: the pool scripts' record
//! in Redis (`rec.state`: `held`, `sold`, ...), the booking API (`status`: `held`, `confirmed`,
//! ...) and PostgreSQL's `bookings.status` (`PENDING_PAYMENT`, `CONFIRMED`, ...). One enum, so
//! no code compares or translates the strings by hand.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Where a reservation is in its life. Serialised with the booking API's names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReservationState {
    /// Seats held, awaiting payment (`held`; `PENDING_PAYMENT`).
    Held,
    /// Paid: the seats are sold (`sold` in Redis; `confirmed`; `CONFIRMED`).
    Confirmed,
    /// The payment failed: the seats are back (`released` in Redis; `cancelled`; `CANCELLED`).
    Cancelled,
    /// The hold ran out unpaid: the seats are back (`expired`; `EXPIRED`).
    Expired,
    /// Taken back because its event could not be made durable; the client was never told it
    /// existed (`aborted`; `ABORTED`).
    Aborted,
    /// A payment for a hold that had died was refunded (`refunded`; `REFUNDED`). Redis keeps
    /// such a record as `expired`, with the refund beside it.
    Refunded,
}

impl ReservationState {
    /// Every state, in the order of a reservation's life.
    pub const ALL: [Self; 6] = [
        Self::Held,
        Self::Confirmed,
        Self::Cancelled,
        Self::Expired,
        Self::Aborted,
        Self::Refunded,
    ];

    /// The record's state as the pool scripts write it (`lua/lib.lua`).
    pub fn lua(self) -> &'static str {
        match self {
            Self::Held => "held",
            Self::Confirmed => "sold",
            Self::Cancelled => "released",
            Self::Expired | Self::Refunded => "expired",
            Self::Aborted => "aborted",
        }
    }

    /// A state a pool script wrote; `None` for anything else (`unknown`: no such record).
    pub fn from_lua(text: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .filter(|s| *s != Self::Refunded)
            .find(|s| s.lua() == text)
    }

    /// The booking API's name (`status` of a reservation).
    pub fn api(self) -> &'static str {
        match self {
            Self::Held => "held",
            Self::Confirmed => "confirmed",
            Self::Cancelled => "cancelled",
            Self::Expired => "expired",
            Self::Aborted => "aborted",
            Self::Refunded => "refunded",
        }
    }

    pub fn from_api(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.api() == text)
    }

    /// PostgreSQL's `bookings.status` (its check constraint lists these).
    pub fn db(self) -> &'static str {
        match self {
            Self::Held => "PENDING_PAYMENT",
            Self::Confirmed => "CONFIRMED",
            Self::Cancelled => "CANCELLED",
            Self::Expired => "EXPIRED",
            Self::Aborted => "ABORTED",
            Self::Refunded => "REFUNDED",
        }
    }

    pub fn from_db(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.db() == text)
    }

    /// The record a pool rebuilt from PostgreSQL keeps for a booking in this state; `None` for
    /// an aborted one (its hold was taken back and its token may reserve again).
    pub fn rebuilt(self) -> Option<&'static str> {
        (self != Self::Aborted).then(|| self.lua())
    }
}

impl fmt::Display for ReservationState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.api())
    }
}

/// Documented as its API names (the OpenAPI documents, docs/openapi/), from the same table
/// `Serialize` writes.
impl utoipa::PartialSchema for ReservationState {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::schema::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .enum_values(Some(Self::ALL.map(Self::api)))
            .description(Some(
                "Where a reservation is in its life (docs/protocol.md 2.3).",
            ))
            .into()
    }
}

impl utoipa::ToSchema for ReservationState {}

impl Serialize for ReservationState {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.api())
    }
}

impl<'de> Deserialize<'de> for ReservationState {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        Self::from_api(&text)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown reservation status {text:?}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_vocabulary_round_trips() {
        for s in ReservationState::ALL {
            assert_eq!(ReservationState::from_api(s.api()), Some(s));
            assert_eq!(ReservationState::from_db(s.db()), Some(s));
            let json = serde_json::to_string(&s).unwrap();
            assert_eq!(serde_json::from_str::<ReservationState>(&json).unwrap(), s);
        }
        for s in ReservationState::ALL
            .into_iter()
            .filter(|s| *s != ReservationState::Refunded)
        {
            assert_eq!(ReservationState::from_lua(s.lua()), Some(s));
        }
    }

    #[test]
    fn the_vocabularies_name_the_same_states() {
        use ReservationState::*;
        assert_eq!(
            (Held.lua(), Held.api(), Held.db()),
            ("held", "held", "PENDING_PAYMENT")
        );
        assert_eq!((Confirmed.lua(), Confirmed.api()), ("sold", "confirmed"));
        assert_eq!(
            (Cancelled.lua(), Cancelled.api()),
            ("released", "cancelled")
        );
        assert_eq!(ReservationState::from_lua("expired"), Some(Expired));
        assert_eq!(ReservationState::from_lua("unknown"), None);
        assert_eq!(ReservationState::from_db("SOLD"), None);
        assert_eq!(
            Refunded.rebuilt(),
            Some("expired"),
            "a refund follows a dead hold"
        );
        assert_eq!(Aborted.rebuilt(), None, "an aborted hold is not rebuilt");
        assert!(serde_json::from_str::<ReservationState>("\"sold\"").is_err());
    }

    #[test]
    fn every_db_status_rebuilds_the_record_its_events_left() {
        let rebuilt = |db: &str| ReservationState::from_db(db).and_then(ReservationState::rebuilt);
        assert_eq!(rebuilt("PENDING_PAYMENT"), Some("held"));
        assert_eq!(rebuilt("CONFIRMED"), Some("sold"));
        assert_eq!(rebuilt("CANCELLED"), Some("released"));
        assert_eq!(rebuilt("EXPIRED"), Some("expired"));
        assert_eq!(rebuilt("REFUNDED"), Some("expired"));
        assert_eq!(
            rebuilt("ABORTED"),
            None,
            "an aborted token may reserve again"
        );
    }
}
