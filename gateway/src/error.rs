//! The gateway's refusals (before a WebSocket upgrade, and on its small JSON endpoints) are
//! `floodgate_platform::http::ApiError`s: a code, whose status is the code's, and a message.

pub use floodgate_platform::http::ApiError;
use floodgate_protocol::api::code;

/// What the gateway answers when a script's reply is not the shape it documents: logged with
/// the reply, and a retryable 503 for the client.
pub fn odd_reply(script: &str, reply: &str) -> ApiError {
    tracing::error!(script, %reply, "a waiting-room script answered oddly");
    ApiError::new(
        code::REDIS_UNAVAILABLE,
        "the waiting room answered oddly; retry in a second".into(),
    )
}
