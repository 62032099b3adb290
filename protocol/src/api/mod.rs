//! The HTTP bodies of Floodgate's public endpoints, as their clients read them, and the error
//! body every endpoint answers with on a 4xx or 5xx: `{ "error": "<code>", "message": "<text
//! for a human>" }`. Clients branch on `error`, a stable snake_case code; `message` may change
//! wording at any time.
//!
//! - [`booking`]: reservations and payments (the booking service).
//! - [`room`]: a sale's public figures, seat counts and the pre-queue draw (the gateway).

pub mod booking;
pub mod room;

use serde::{Deserialize, Serialize};

/// The body of every 4xx and 5xx.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(example = json!({"error": "unknown_sale", "message": "no such sale is armed; check the sale id"}))]
pub struct ErrorBody {
    /// A stable snake_case code (docs/protocol.md lists them all); branch on this.
    pub error: String,
    /// For a human; its wording may change.
    pub message: String,
}

/// What every endpoint says about a sale id that is not armed (or not an id at all): the
/// gateway and the booking service cannot tell a sale that never existed from one not yet armed.
pub const UNKNOWN_SALE_MESSAGE: &str = "no such sale is armed; check the sale id";

/// Every error code a Floodgate endpoint answers with, defined once: services build their errors
/// from these, and docs/protocol.md says what each means and when it comes. A code, once
/// published, is never renamed (clients branch on it).
pub mod code {
    // Requests.
    pub const BAD_BODY: &str = "bad_body";
    pub const BAD_JSON: &str = "bad_json";
    pub const BAD_NONCE: &str = "bad_nonce";
    pub const BAD_PAGE: &str = "bad_page";
    /// A query parameter the endpoint does not take (docs/openapi/ lists each one's).
    pub const UNKNOWN_PARAMETER: &str = "unknown_parameter";
    pub const BAD_TICKET: &str = "bad_ticket";
    pub const BODY_TOO_LARGE: &str = "body_too_large";
    pub const INVALID_CAP: &str = "invalid_cap";
    pub const INVALID_DIFFICULTY: &str = "invalid_difficulty";
    pub const INVALID_EVENT: &str = "invalid_event";
    pub const INVALID_POOL: &str = "invalid_pool";
    pub const INVALID_RATE: &str = "invalid_rate";
    pub const INVALID_REQUEST: &str = "invalid_request";
    pub const INVALID_SEATS: &str = "invalid_seats";
    pub const SALE_MISSING: &str = "sale_missing";
    pub const WEBSOCKET_REQUIRED: &str = "websocket_required";
    pub const METHOD_NOT_ALLOWED: &str = "method_not_allowed";
    pub const NOT_FOUND: &str = "not_found";
    pub const IDEMPOTENCY_KEY_INVALID: &str = "idempotency_key_invalid";
    pub const IDEMPOTENCY_KEY_MISSING: &str = "idempotency_key_missing";
    pub const IDEMPOTENCY_KEY_REUSED: &str = "idempotency_key_reused";

    // Credentials.
    pub const TOKEN_MISSING: &str = "token_missing";
    pub const TOKEN_MALFORMED: &str = "token_malformed";
    pub const TOKEN_INVALID: &str = "token_invalid";
    pub const TOKEN_EXPIRED: &str = "token_expired";
    pub const TOKEN_WRONG_SALE: &str = "token_wrong_sale";
    pub const TOKEN_SPENT: &str = "token_spent";
    pub const RESUME_INVALID: &str = "resume_invalid";
    pub const RESUME_OTHER_SALE: &str = "resume_other_sale";
    pub const RESUME_OTHER_BUYER: &str = "resume_other_buyer";
    pub const RESUME_IN_URL: &str = "resume_in_url";
    pub const RESUME_REQUIRED: &str = "resume_required";
    pub const DRAW_RATE_LIMITED: &str = "draw_rate_limited";
    pub const DRAW_BUSY: &str = "draw_busy";
    pub const OPS_TOKEN_MISSING: &str = "ops_token_missing";
    pub const OPS_TOKEN_INVALID: &str = "ops_token_invalid";
    pub const SIGNATURE_MISSING: &str = "signature_missing";
    pub const SIGNATURE_MALFORMED: &str = "signature_malformed";
    pub const SIGNATURE_INVALID: &str = "signature_invalid";
    pub const TIMESTAMP_OUTSIDE_TOLERANCE: &str = "timestamp_outside_tolerance";
    pub const SECRET_MISSING: &str = "secret_missing";

    // Who is buying (the identity token from the operator's sign-in) and the bot check.
    pub const IDENTITY_REQUIRED: &str = "identity_required";
    pub const IDENTITY_MALFORMED: &str = "identity_malformed";
    pub const IDENTITY_ALGORITHM: &str = "identity_algorithm";
    pub const IDENTITY_UNKNOWN_KEY: &str = "identity_unknown_key";
    pub const IDENTITY_INVALID: &str = "identity_invalid";
    pub const IDENTITY_EXPIRED: &str = "identity_expired";
    pub const IDENTITY_NOT_YET_VALID: &str = "identity_not_yet_valid";
    pub const IDENTITY_WRONG_ISSUER: &str = "identity_wrong_issuer";
    pub const IDENTITY_WRONG_AUDIENCE: &str = "identity_wrong_audience";
    pub const IDENTITY_NO_SUBJECT: &str = "identity_no_subject";
    pub const IDENTITY_UNAVAILABLE: &str = "identity_unavailable";
    pub const BUYER_MISMATCH: &str = "buyer_mismatch";
    pub const BUYER_LIMIT: &str = "buyer_limit";
    pub const CHALLENGE_REQUIRED: &str = "challenge_required";
    pub const CHALLENGE_FAILED: &str = "challenge_failed";
    pub const CHALLENGE_EXPIRED: &str = "challenge_expired";
    pub const CHALLENGE_REUSED: &str = "challenge_reused";
    pub const CHALLENGE_UNAVAILABLE: &str = "challenge_unavailable";

    // What the request named.
    pub const UNKNOWN_SALE: &str = "unknown_sale";
    pub const UNKNOWN_POOL: &str = "unknown_pool";
    pub const UNKNOWN_RESERVATION: &str = "unknown_reservation";
    pub const UNKNOWN_TICKET: &str = "unknown_ticket";
    pub const TICKET_EXPIRED: &str = "ticket_expired";
    pub const NOT_IN_PREQUEUE: &str = "not_in_prequeue";
    pub const SOLD_OUT: &str = "sold_out";
    /// The sale was ended by its operator (`floodgate-booking sale end`): nothing more is sold.
    pub const SALE_ENDED: &str = "sale_ended";
    pub const NOT_PAYABLE: &str = "not_payable";
    pub const RESERVATION_ENDED: &str = "reservation_ended";
    pub const RESERVATION_LATE: &str = "reservation_late";
    /// Refused, but another attempt with the same key may still take seats: retry with it.
    pub const RESERVATION_UNSETTLED: &str = "reservation_unsettled";

    // Limits and dependencies.
    pub const GATEWAY_DRAINING: &str = "gateway_draining";
    pub const GATEWAY_FULL: &str = "gateway_full";
    pub const JOIN_RATE_LIMITED: &str = "join_rate_limited";
    pub const TOO_MANY_CONNECTIONS: &str = "too_many_connections";
    pub const REDIS_UNAVAILABLE: &str = "redis_unavailable";
    pub const BROKER_UNAVAILABLE: &str = "broker_unavailable";
    /// A reservation's writes were not on a Redis replica in time (docs/runbook.md).
    pub const REPLICA_UNAVAILABLE: &str = "replica_unavailable";
    pub const CATALOG_UNAVAILABLE: &str = "catalog_unavailable";
    pub const BOOKING_UNAVAILABLE: &str = "booking_unavailable";
    pub const POOL_UNAVAILABLE: &str = "pool_unavailable";
    pub const SALE_UNAVAILABLE: &str = "sale_unavailable";
    pub const DRAW_UNAVAILABLE: &str = "draw_unavailable";
    pub const PAYMENT_PROVIDER_UNAVAILABLE: &str = "payment_provider_unavailable";
    pub const INTERNAL: &str = "internal";
}
