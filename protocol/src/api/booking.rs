//! The booking service's public bodies (docs/protocol.md 2).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::reservation::ReservationState;
use crate::UnixMillis;

/// `POST /v1/sales/{sale}/reservations`, 201. A retry with the same `Idempotency-Key` gets
/// these exact bytes again.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, ToSchema)]
pub struct ReservationCreated {
    pub reservation_id: String,
    pub sale: String,
    pub pool: String,
    pub seats: u32,
    /// Always held in a 201: the seats are reserved until `hold_expires_at_ms` unless paid.
    pub status: ReservationState,
    #[schema(value_type = i64)] // Unix milliseconds
    pub reserved_at_ms: UnixMillis,
    #[schema(value_type = i64)] // Unix milliseconds
    pub hold_expires_at_ms: UnixMillis,
    /// Authorizes reading and paying for this reservation; shown once, keep it private.
    pub secret: String,
}

/// `GET /v1/sales/{sale}/reservations/{id}`: a reservation's state, for whoever holds its
/// secret.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, ToSchema)]
pub struct ReservationView {
    pub reservation_id: String,
    pub sale: String,
    pub pool: String,
    pub seats: u32,
    pub status: ReservationState,
    #[schema(value_type = i64)] // Unix milliseconds
    pub reserved_at_ms: UnixMillis,
    #[schema(value_type = i64)] // Unix milliseconds
    pub hold_expires_at_ms: UnixMillis,
    /// Price of the whole reservation, in the currency's minor unit.
    pub amount_minor: i64,
    pub currency: String,
    /// The payment that bought the seats, once confirmed.
    pub payment_id: Option<String>,
    /// Refunds of payments that arrived when the hold was no longer live.
    pub refunds: Vec<RefundView>,
}

/// `GET /v1/sales/{sale}/reservations` with the buyer's identity: their own reservations in the
/// sale, newest first, as the durable record (PostgreSQL) has them. No secrets: a reservation's
/// secret is given once, in its 201.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, ToSchema)]
pub struct BuyerReservations {
    pub sale: String,
    pub reservations: Vec<BuyerReservation>,
}

/// One of a buyer's reservations.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, ToSchema)]
pub struct BuyerReservation {
    pub reservation_id: String,
    pub pool: String,
    pub seats: u32,
    pub status: ReservationState,
    #[schema(value_type = i64)] // Unix milliseconds
    pub reserved_at_ms: UnixMillis,
    #[schema(value_type = i64)] // Unix milliseconds
    pub hold_expires_at_ms: UnixMillis,
    pub payment_id: Option<String>,
}

/// A refund of a payment that could not buy the seats.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, ToSchema)]
pub struct RefundView {
    pub payment_id: String,
    /// `pending`, `succeeded` or `failed`.
    pub status: String,
}

/// `POST /v1/sales/{sale}/reservations/{id}/payment`, 202: the payment is started at the
/// provider; the outcome arrives by webhook and shows on the reservation.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, ToSchema)]
pub struct PaymentStarted {
    pub reservation_id: String,
    pub payment_id: String,
    /// The provider's status of the payment (`pending` at first).
    pub status: String,
    /// Where the payer completes the payment (the provider's page).
    pub checkout_url: String,
    pub amount_minor: i64,
    pub currency: String,
    #[schema(value_type = i64)] // Unix milliseconds
    pub hold_expires_at_ms: UnixMillis,
}

/// `POST /v1/payments/webhook`, 200: what became of the event. The provider only needs the
/// 200; the body says why, for its logs and an operator's, and a redelivery gets the same.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq, ToSchema)]
pub struct WebhookAnswer {
    /// `confirmed`, `released`, `refund_requested`, `duplicate`, `ignored`, or what a refund's
    /// outcome did to its reservation.
    pub result: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// For a duplicate: the first delivery's result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub earlier: Option<String>,
    /// For an ignored failure: the reservation's state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation: Option<String>,
}

impl WebhookAnswer {
    pub fn result(result: impl Into<String>) -> Self {
        Self {
            result: result.into(),
            ..Self::default()
        }
    }

    pub fn because(result: &str, reason: impl Into<String>) -> Self {
        Self {
            reason: Some(reason.into()),
            ..Self::result(result)
        }
    }

    pub fn duplicate(earlier: impl Into<String>) -> Self {
        Self {
            earlier: Some(earlier.into()),
            ..Self::result("duplicate")
        }
    }
}

/// `GET /healthz` of every service: the process is up (not whether its dependencies are).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, ToSchema)]
pub struct Health {
    pub status: String,
}

impl Health {
    pub fn ok() -> Self {
        Self {
            status: "ok".into(),
        }
    }
}
