//! The waiting-room WebSocket protocol (`GET /ws?sale=<id>` on a gateway).
//!
//! All frames are JSON text objects with a `type`. The server speaks first, with a [`ServerMessage::Ticket`];
//! then it pushes [`ServerMessage::Position`] while the client waits and [`ServerMessage::Admitted`] with
//! the admission token the moment the frontier passes its ticket, after which it closes with
//! [`close::NORMAL`]. Before the opening it pushes [`ServerMessage::PreQueue`] instead of
//! positions. The client need not send anything; it may send [`ClientMessage::Ping`].
//! docs/protocol.md is the full description, with resume, back-off and the lottery.
//! Anything else it sends (binary, non-JSON, an unknown type, an oversized frame) ends the session
//! with a close code from [`close`] and a short reason; the gateway keeps serving everyone else.

use serde::{Deserialize, Serialize};

use crate::UnixMillis;

/// Version of this message set, sent in the first message so clients can check it. 2: the
/// freshness contract ([`crate::freshness`]): positions rounded to the grid beyond the front
/// 1,000, sent when they cross it and with every heartbeat, rather than every second.
pub const PROTOCOL_VERSION: u16 = 2;

/// The largest frame or message a client may send, in bytes. Clients only send tiny control
/// messages; a small limit keeps a hostile client from making the gateway buffer megabytes.
pub const MAX_CLIENT_MESSAGE: usize = 1024;
/// The WebSocket subprotocol the gateway answers with when a client offers subprotocols (the
/// page offers it with its identity token: [`crate::identity::IDENTITY_SUBPROTOCOL_PREFIX`]).
pub const SUBPROTOCOL: &str = "floodgate";

/// Messages from the gateway to a client.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ServerMessage {
    /// First message: the client's ticket in the sale's waiting room.
    Ticket {
        protocol: u16,
        sale: String,
        ticket: u64,
        /// When the sale opens (admission starts), Unix ms.
        opens_at_ms: UnixMillis,
        /// Present this (the `Floodgate-Resume` header or the `floodgate-resume.<token>`
        /// subprotocol, never the URL) to keep the ticket after a disconnect, on any gateway,
        /// within the grace period.
        resume_token: String,
        /// Whether the ticket was resumed rather than newly issued.
        resumed: bool,
        /// For a ticket taken before the opening: its nonce in the pre-queue's hash chain, so
        /// its holder can check that the published draw includes it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        draw_nonce: Option<String>,
        /// SHA-256 (hex) of the lottery's secret seed, fixed when the sale was armed.
        commitment: String,
    },
    /// Before the opening: how many tickets are in the pre-queue so far. Sent when it changes (at
    /// most once a second) and with every heartbeat.
    PreQueue { size: u64, opens_at_ms: UnixMillis },
    /// How many live tickets are ahead, plus one (1 = next), and a rough wait: exact up to
    /// [`crate::freshness::EXACT_UP_TO`], rounded up to the grid beyond ([`crate::freshness`]).
    /// Sent when it changes and with every heartbeat (a fresh ETA); it never goes up.
    Position {
        position: u64,
        /// Estimated seconds until admission at the measured admission rate; absent before the
        /// sale opens or while admission is paused.
        eta_secs: Option<u64>,
    },
    /// The client may book now: present `token` to the booking API before `expires_at_ms`.
    Admitted {
        token: String,
        expires_at_ms: UnixMillis,
        max_seats: u32,
    },
    /// Nothing is left to sell and no hold can return; the room closes with [`close::SALE_OVER`].
    SoldOut,
    /// Answer to [`ClientMessage::Ping`].
    Pong,
}

impl ServerMessage {
    /// One message of every type, in the order of a session (docs/asyncapi.yaml must describe
    /// each; tests/tests/it/asyncapi.rs checks it). A new variant does not compile here until it
    /// is added.
    pub fn one_of_each() -> Vec<ServerMessage> {
        let all = vec![
            ServerMessage::Ticket {
                protocol: PROTOCOL_VERSION,
                sale: "s".into(),
                ticket: 1,
                opens_at_ms: 0,
                resume_token: "r2.1..mac.s".into(),
                resumed: false,
                draw_nonce: None,
                commitment: "0".repeat(64),
            },
            ServerMessage::PreQueue {
                size: 1,
                opens_at_ms: 0,
            },
            ServerMessage::Position {
                position: 1,
                eta_secs: None,
            },
            ServerMessage::Admitted {
                token: "t".into(),
                expires_at_ms: 0,
                max_seats: 1,
            },
            ServerMessage::SoldOut,
            ServerMessage::Pong,
        ];
        for message in &all {
            match message {
                ServerMessage::Ticket { .. }
                | ServerMessage::PreQueue { .. }
                | ServerMessage::Position { .. }
                | ServerMessage::Admitted { .. }
                | ServerMessage::SoldOut
                | ServerMessage::Pong => {}
            }
        }
        all
    }

    /// The message's `type`, as it goes on the wire (a metric's label).
    pub fn kind(&self) -> &'static str {
        match self {
            ServerMessage::Ticket { .. } => "ticket",
            ServerMessage::PreQueue { .. } => "pre_queue",
            ServerMessage::Position { .. } => "position",
            ServerMessage::Admitted { .. } => "admitted",
            ServerMessage::SoldOut => "sold_out",
            ServerMessage::Pong => "pong",
        }
    }
}

/// Messages from a client to the gateway.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ClientMessage {
    /// Application-level liveness check (browsers cannot send WebSocket pings).
    Ping,
}

impl ClientMessage {
    /// One message of every type (see [`ServerMessage::one_of_each`]).
    pub fn one_of_each() -> Vec<ClientMessage> {
        let all = vec![ClientMessage::Ping];
        for message in &all {
            match message {
                ClientMessage::Ping => {}
            }
        }
        all
    }
}

/// WebSocket close codes used by the gateway. 1000-1015 are the standard ones; 4000-4999 are
/// Floodgate's, numbered after the nearest HTTP status so they are easy to remember.
pub mod close {
    /// The session is complete (the client was admitted and has its token).
    pub const NORMAL: u16 = 1000;
    /// The gateway is going away for another reason: reconnect (with the resume token), to any
    /// gateway.
    pub const GOING_AWAY: u16 = 1001;
    /// The client broke RFC 6455 itself (reserved bits or opcodes, a frame it did not mask, a
    /// fragment out of place, a control frame over 125 bytes or in fragments, a close payload of
    /// one byte): section 7.4.1's "protocol error".
    pub const PROTOCOL_ERROR: u16 = 1002;
    /// A text frame whose payload is not UTF-8 (RFC 6455's "invalid frame payload data").
    pub const INVALID_DATA: u16 = 1007;
    /// The client sent more frames than a session may (RFC 6455's "policy violation"): a flood
    /// of pings or empty fragments, which a person's client never sends.
    pub const POLICY_VIOLATION: u16 = 1008;
    /// A data frame or message exceeded [`super::MAX_CLIENT_MESSAGE`] (a control frame over 125
    /// bytes, however long, is [`PROTOCOL_ERROR`]).
    pub const MESSAGE_TOO_BIG: u16 = 1009;
    /// An unexpected server error: reconnect with backoff.
    pub const INTERNAL_ERROR: u16 = 1011;
    /// The gateway is draining (shutdown or restart). The close reason is the client's resume
    /// token: reconnect with it, after a random delay, to keep the place in line.
    pub const SERVICE_RESTART: u16 = 1012;
    /// The client sent something that is not a valid [`super::ClientMessage`].
    pub const BAD_MESSAGE: u16 = 4400;
    /// The sale named in the URL is not armed (or does not exist).
    pub const UNKNOWN_SALE: u16 = 4404;
    /// Nothing (not even a pong) arrived from the client for the idle timeout: reconnect.
    pub const IDLE_TIMEOUT: u16 = 4408;
    /// A newer session took this place back with its resume token (another tab, the app after
    /// a lost network, another device): the place goes on there. Do not reconnect from here
    /// on your own (the two would take it from each other in turn); offer to, if the person asks.
    pub const TAKEN_OVER: u16 = 4409;
    /// The sale is over for this client: sold out, or its admission expired unused. Do not
    /// reconnect with this ticket.
    pub const SALE_OVER: u16 = 4410;
    /// A dependency (Redis) is unavailable: reconnect with backoff; nothing was lost.
    pub const UNAVAILABLE: u16 = 4503;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_messages_kind_is_its_type_on_the_wire() {
        let all = ServerMessage::one_of_each();
        let kinds: std::collections::BTreeSet<_> = all.iter().map(ServerMessage::kind).collect();
        assert_eq!(kinds.len(), all.len(), "one message of each type");
        for message in all {
            let json = serde_json::to_value(&message).unwrap();
            assert_eq!(json["type"], message.kind());
        }
    }

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
