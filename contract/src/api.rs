//! The error body every Floodgate HTTP endpoint answers with on a 4xx or 5xx:
//! `{ "error": "<code>", "message": "<text for a human>" }`. Clients branch on `error`, a stable
//! snake_case code; `message` may change wording at any time.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: String,
    pub message: String,
}
