//! The HTTP bodies of Floodgate's public endpoints, as their clients read them, and the error
//! body every endpoint answers with on a 4xx or 5xx: `{ "error": "<code>", "message": "<text
//! for a human>" }`. Clients branch on `error`, a stable snake_case code; `message` may change
//! wording at any time.
//!
//! - [`booking`]: reservations and payments (the booking service).
//! - [`room`]: a sale's public figures, seat counts and the pre-queue draw (the gateway).
//! - [`code`]: every error code, its status and what it means; [`Refusal`]: a refusal as a
//!   service answers it.

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

pub mod code;

/// A refusal, as every service answers it: its code (which decides its status, once, in
/// [`code::ALL`]) and a message for a human.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Refusal {
    pub code: &'static str,
    pub message: String,
}

impl Refusal {
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    /// Its HTTP status: its code's.
    pub fn status(&self) -> u16 {
        code::status_of(self.code)
    }

    /// Its body on the wire.
    pub fn body(&self) -> ErrorBody {
        ErrorBody {
            error: self.code.to_owned(),
            message: self.message.clone(),
        }
    }
}
