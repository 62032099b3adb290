//! The gateway's refusals (before a WebSocket upgrade, and on its small JSON endpoints) are
//! `floodgate_platform::http::ApiError`s: a code, whose status is the code's, and a message.

pub use floodgate_platform::http::ApiError;
