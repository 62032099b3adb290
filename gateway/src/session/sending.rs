//! How a session writes to its client: the room's shared message (after a ping when the
//! heartbeat is due, in one write), any other message serialised, and the send timeout that
//! drops a client that does not read.

use floodgate_protocol::ws::ServerMessage;
use futures::SinkExt;
use tokio_tungstenite::tungstenite::{self, Message, Utf8Bytes};

use super::Session;
use crate::room::frames::Shown;
use crate::upgrade::Socket;

impl Session {
    /// Sends what the client is shown now (the room's shared message), after a ping when its
    /// heartbeat is due: both in one write.
    pub(super) async fn push(
        &self,
        socket: &mut Socket,
        shown: Option<Shown>,
        ping: bool,
    ) -> Result<(), ()> {
        if ping {
            // Buffered: the socket's write buffer holds small frames until the flush below.
            self.within_send_timeout(socket.feed(Message::Ping(Default::default())))
                .await?;
        }
        match shown {
            Some(shown) => {
                let frame = self.ctx.room.frame(shown);
                self.send_text(socket, frame, shown.kind()).await
            }
            None => self.flush(socket).await,
        }
    }

    /// Sends one message, giving up on a client that does not read: a session never queues
    /// more than the message in hand, so a slow client costs one socket buffer, not a backlog.
    pub(super) async fn send(
        &self,
        socket: &mut Socket,
        message: &ServerMessage,
    ) -> Result<(), ()> {
        let text = serde_json::to_string(message).expect("server messages serialise");
        self.send_text(socket, text.into(), message.kind()).await
    }

    /// Sends one message already serialised (its type, `kind`, counted once sent).
    async fn send_text(
        &self,
        socket: &mut Socket,
        text: Utf8Bytes,
        kind: &'static str,
    ) -> Result<(), ()> {
        let sending = socket.send(Message::Text(text));
        self.within_send_timeout(sending).await?;
        count_sent(kind);
        Ok(())
    }

    /// Writes out what is buffered (a ping on its own).
    async fn flush(&self, socket: &mut Socket) -> Result<(), ()> {
        self.within_send_timeout(socket.flush()).await
    }

    /// Awaits a write, giving up on a client that does not read within the send timeout.
    pub(super) async fn within_send_timeout(
        &self,
        write: impl std::future::Future<Output = Result<(), tungstenite::Error>>,
    ) -> Result<(), ()> {
        let mut write = std::pin::pin!(write);
        // Nearly every write completes at once (the socket's buffer has room): only one that
        // has to wait for the client arms the send timeout. A timer per message was a tenth of
        // the gateway's own CPU in a fan-out.
        let written = match futures::FutureExt::now_or_never(&mut write) {
            Some(done) => Ok(done),
            None => tokio::time::timeout(self.ctx.send_timeout, write).await,
        };
        match written {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(()),
            Err(_) => {
                tracing::debug!("client not reading; disconnected");
                Err(())
            }
        }
    }
}

/// Counts a message sent to a client, by its type. Every position push passes here: a counter
/// made once per message type.
pub(super) fn count_sent(kind: &'static str) {
    floodgate_platform::telemetry::fixed_label_counter(
        "floodgate_ws_messages_sent_total",
        "type",
        kind,
    )
    .increment(1);
}
