//! What a client sends: the protocol's ping, answered; a Close, answered at once (RFC 6455
//! 5.5.1); anything else ends the session with the close code docs/protocol.md gives it (1002 for
//! a frame RFC 6455 forbids, 1007 for text that is not UTF-8, 1008 past the budget of frames,
//! 1009 past the size limit, 4400 for what is not a client message).

use std::borrow::Cow;

use floodgate_protocol::ws::{close, ClientMessage, ServerMessage};
use futures::SinkExt as _;
use tokio_tungstenite::tungstenite::{self, Message};

use super::ending::End;
use super::Session;
use crate::frame_watch::FrameWatch;
use crate::upgrade::Socket;

impl Session {
    /// Handles one frame from the client; `Some` ends the session.
    pub(super) async fn on_client_message(
        &self,
        socket: &mut Socket,
        incoming: Option<Result<Message, tungstenite::Error>>,
    ) -> Option<End> {
        let bad =
            |reason: &'static str| Some(End::Closed(close::BAD_MESSAGE, Cow::Borrowed(reason)));
        match incoming {
            None => Some(End::ClientLeft),
            // RFC 6455 5.5.1: a Close MUST be answered. The WebSocket layer queued the answer
            // (the client's code echoed, or 1002 for a code no endpoint may send); writing it
            // out also ends the connection on our side, as the server closes TCP first.
            Some(Ok(Message::Close(_))) => {
                let _ = self.within_send_timeout(socket.flush()).await;
                Some(End::ClientLeft)
            }
            Some(Err(e)) => Some(Self::on_receive_error(&e, socket.get_ref())),
            // Protocol-level pings are answered by the WebSocket layer itself.
            // (A raw frame is never what a read returns.)
            Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => None,
            Some(Ok(Message::Binary(_))) => bad("binary frames are not accepted"),
            Some(Ok(Message::Text(text))) => match serde_json::from_str::<ClientMessage>(&text) {
                Ok(ClientMessage::Ping) => self
                    .send(socket, &ServerMessage::Pong)
                    .await
                    .err()
                    .map(|_| End::ClientLeft),
                Err(_) => bad("expected a JSON message such as {\"type\":\"ping\"}"),
            },
        }
    }

    /// How a failed read ends the session, with what `watch` saw of the client's frames
    /// (crate::frame_watch): a control frame over 125 bytes, more frames than the budget.
    fn on_receive_error<T>(e: &tungstenite::Error, watch: &FrameWatch<T>) -> End {
        use tungstenite::error::{CapacityError, ProtocolError};
        let control_too_long = watch.control_too_long();
        match e {
            // More frames than a session may send (a flood of pings or empty fragments).
            tungstenite::Error::Io(_) if watch.flooded() => End::Closed(
                close::POLICY_VIOLATION,
                Cow::Borrowed("more frames than a session may send"),
            ),
            // The layer refuses any frame past the size limit by its length alone: a control
            // frame that long broke RFC 6455 (5.5), which is 1002, not a message too big.
            tungstenite::Error::Capacity(CapacityError::MessageTooLong { .. })
                if control_too_long =>
            {
                End::Closed(close::PROTOCOL_ERROR, Cow::Borrowed("protocol error"))
            }
            tungstenite::Error::Capacity(CapacityError::MessageTooLong { .. }) => {
                End::Closed(close::MESSAGE_TOO_BIG, Cow::Borrowed("message too big"))
            }
            // The client vanished without a Close: there is nobody to tell.
            tungstenite::Error::Protocol(ProtocolError::ResetWithoutClosingHandshake) => {
                End::ClientLeft
            }
            // Anything else the WebSocket layer refuses is the client breaking RFC 6455 (a
            // control frame over 125 bytes among them): 7.1.7 asks for a Close with 1002 before
            // the connection goes, and the client logs why.
            tungstenite::Error::Protocol(protocol) => {
                tracing::debug!(error = %protocol, "closing a session that broke RFC 6455");
                End::Closed(close::PROTOCOL_ERROR, Cow::Borrowed("protocol error"))
            }
            // The protocol promises a close code for bad input: a text frame that is not UTF-8
            // gets RFC 6455's own, and the connection is still fit to carry it.
            tungstenite::Error::Utf8(_) => {
                tracing::info!(error = %e, "closing a session that sent a text frame that is not UTF-8");
                End::Closed(
                    close::INVALID_DATA,
                    Cow::Borrowed("text frames must be UTF-8"),
                )
            }
            _ => {
                tracing::debug!(error = %e, "websocket error");
                End::ClientLeft
            }
        }
    }
}
