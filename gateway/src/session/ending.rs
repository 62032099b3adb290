//! How a session ends: why ([`End`], and whether the ticket keeps its place for the grace), the
//! close frame it calls for (counted by code), and the wait for the client's half of the
//! closing handshake.

use std::borrow::Cow;
use std::time::Duration;

use floodgate_protocol::ws::close;
use futures::{SinkExt as _, StreamExt as _};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::{Message, Utf8Bytes};

use crate::upgrade::Socket;

/// Why a session ended.
#[derive(Debug)]
pub(super) enum End {
    /// Admitted (token sent): the ticket has done its job.
    Admitted,
    /// The client went away (closed, network gone, stopped reading).
    ClientLeft,
    /// We close with this code and reason.
    Closed(u16, Cow<'static, str>),
    /// The sale is over for this ticket (sold out, admission lapsed): closed, no grace.
    Over(&'static str),
}

impl End {
    /// Whether the ticket keeps its place for the grace period: yes unless its business is done.
    pub(super) fn keeps_place(&self) -> bool {
        matches!(self, End::ClientLeft | End::Closed(..))
    }
}

/// Counts a close frame the gateway sends, by its code (`floodgate_ws_closes_total{code}`): a
/// few documented codes (docs/protocol.md), so a few series.
pub(super) fn count_close(code: u16) {
    metrics::counter!("floodgate_ws_closes_total", "code" => code.to_string()).increment(1);
}

/// Sends the close frame `end` calls for, and waits for the client's.
pub(super) async fn say_goodbye(socket: &mut Socket, end: &End) {
    let frame = match end {
        End::Closed(code, reason) => Some((*code, reason.clone())),
        End::Over(reason) => Some((close::SALE_OVER, Cow::Borrowed(*reason))),
        End::Admitted | End::ClientLeft => None,
    };
    if let Some((code, reason)) = frame {
        count_close(code);
        send_close(socket, code, Utf8Bytes::from(reason.into_owned())).await;
    }
    if !matches!(end, End::ClientLeft) {
        finish_closing(socket).await;
    }
}

/// How long the gateway waits to write its Close to a client that does not read: the same as
/// any message's send timeout by default, so a stalled client holds its socket no longer for
/// being closed.
const CLOSE_SEND: Duration = Duration::from_secs(10);

/// Sends a Close with `code` and `reason`, giving up on a client that does not read.
pub(super) async fn send_close(socket: &mut Socket, code: u16, reason: Utf8Bytes) {
    let close = Message::Close(Some(CloseFrame {
        code: CloseCode::from(code),
        reason,
    }));
    let _ = tokio::time::timeout(CLOSE_SEND, socket.send(close)).await;
}

/// How long the gateway waits for the client's half of the closing handshake.
const CLOSE_WAIT: Duration = Duration::from_secs(1);

/// Waits (briefly) for the client to answer our Close frame before the TCP connection goes, as
/// RFC 6455 asks: dropping it at once can make the client lose the close code it was sent (its
/// last writes hit a closed socket before it reads the frame).
async fn finish_closing(socket: &mut Socket) {
    let _ = tokio::time::timeout(CLOSE_WAIT, async {
        while let Some(Ok(message)) = socket.next().await {
            if matches!(message, Message::Close(_)) {
                break;
            }
        }
    })
    .await;
}
