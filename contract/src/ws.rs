//! The waiting-room WebSocket protocol (`GET /ws?sale=<id>` on a gateway).
//!
//! All frames are JSON text objects with a `type`. The server speaks first, with a [`ServerMessage::Ticket`];
//! then it pushes [`ServerMessage::Position`] while the client waits and [`ServerMessage::Admitted`] with
//! the admission token the moment the frontier passes its ticket, after which it closes with
//! [`close::NORMAL`]. The client need not send anything; it may send [`ClientMessage::Ping`].
//! Anything else it sends (binary, non-JSON, an unknown type, an oversized frame) ends the session
//! with a close code from [`close`] and a short reason; the gateway keeps serving everyone else.

use serde::{Deserialize, Serialize};

use crate::UnixMillis;

/// Version of this message set, sent in the first message so clients can check it.
pub const PROTOCOL_VERSION: u16 = 1;

/// The largest frame or message a client may send, in bytes. Clients only send tiny control
/// messages; a small limit keeps a hostile client from making the gateway buffer megabytes.
pub const MAX_CLIENT_MESSAGE: usize = 1024;

/// Messages from the gateway to a client.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ServerMessage {
    /// First message: the client's place in the sale's waiting room.
    Ticket {
        protocol: u16,
        sale: String,
        ticket: u64,
        /// When the sale opens (admission starts), Unix ms.
        opens_at_ms: UnixMillis,
    },
    /// How many live tickets are ahead, and a rough wait. Sent when it changes.
    Position {
        position: u64,
        /// Estimated seconds until admission at the current admission rate; absent before the
        /// sale opens or while admission is paused.
        eta_secs: Option<u64>,
    },
    /// The client may book now: present `token` to the booking API before `expires_at_ms`.
    Admitted {
        token: String,
        expires_at_ms: UnixMillis,
        max_seats: u32,
    },
    /// Nothing is left to sell; the room is closing.
    SoldOut,
    /// Answer to [`ClientMessage::Ping`].
    Pong,
}

/// Messages from a client to the gateway.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ClientMessage {
    /// Application-level liveness check (browsers cannot send WebSocket pings).
    Ping,
}

/// WebSocket close codes used by the gateway. 1000-1015 are the standard ones; 4000-4999 are
/// Floodgate's, numbered after the nearest HTTP status so they are easy to remember.
pub mod close {
    /// The session is complete (the client was admitted and has its token).
    pub const NORMAL: u16 = 1000;
    /// The gateway is shutting down: reconnect, to any gateway.
    pub const GOING_AWAY: u16 = 1001;
    /// A frame or message exceeded [`super::MAX_CLIENT_MESSAGE`].
    pub const MESSAGE_TOO_BIG: u16 = 1009;
    /// An unexpected server error: reconnect with backoff.
    pub const INTERNAL_ERROR: u16 = 1011;
    /// The client sent something that is not a valid [`super::ClientMessage`].
    pub const BAD_MESSAGE: u16 = 4400;
    /// The sale named in the URL is not armed (or does not exist).
    pub const UNKNOWN_SALE: u16 = 4404;
    /// Nothing (not even a pong) arrived from the client for the idle timeout: reconnect.
    pub const IDLE_TIMEOUT: u16 = 4408;
    /// The sale is over (sold out or closed): do not reconnect.
    pub const SALE_OVER: u16 = 4410;
    /// A dependency (Redis) is unavailable: reconnect with backoff; nothing was lost.
    pub const UNAVAILABLE: u16 = 4503;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_have_a_snake_case_type_tag() {
        let json = serde_json::to_value(ServerMessage::Position {
            position: 3,
            eta_secs: Some(1),
        })
        .unwrap();
        assert_eq!(
            json,
            serde_json::json!({"type": "position", "position": 3, "eta_secs": 1})
        );
        assert_eq!(
            serde_json::from_str::<ClientMessage>(r#"{"type":"ping"}"#).unwrap(),
            ClientMessage::Ping
        );
        assert!(serde_json::from_str::<ClientMessage>(r#"{"type":"book"}"#).is_err());
    }
}
