//! What the gatekeeper is asked: a reservation, and the payment a webhook reports.

use floodgate_protocol::token::AdmissionClaims;

/// The reservation a payment-provider webhook event is about.
pub struct WebhookTarget<'a> {
    pub sale: &'a str,
    pub pool: &'a str,
    pub reservation_id: &'a str,
    /// The provider's event id.
    pub event: &'a str,
}

/// A reservation request, already authenticated and validated.
pub struct ReserveRequest<'a> {
    pub claims: &'a AdmissionClaims,
    pub pool: &'a str,
    pub seats: u32,
    pub idempotency_key: &'a str,
}

/// A payment as the provider reported it: what a confirmation is checked against.
#[derive(Clone, Copy, Debug)]
pub struct Paid<'a> {
    pub payment_id: &'a str,
    pub amount_minor: i64,
    pub currency: &'a str,
}
