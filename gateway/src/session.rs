//! One client's WebSocket session in a waiting room.
//!
//! The session owns nothing shared: it watches its room's view, works out its own position and
//! pushes what changed. Positions are coalesced to one message per interval; admission is sent
//! the moment it is seen. Bad input ends only this session, with a documented close code.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket};
use floodgate_contract::now_millis;
use floodgate_contract::token::{AdmissionClaims, TokenSigner};
use floodgate_contract::ws::{close, ClientMessage, ServerMessage, PROTOCOL_VERSION};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::room::{Room, RoomView};

/// What a session needs besides its socket.
pub struct Session {
    pub sale: String,
    pub ticket: u64,
    pub opens_at_ms: i64,
    pub room: Arc<Room>,
    pub signer: Arc<TokenSigner>,
    pub position_interval: Duration,
    /// How often the client is pinged, how long it may stay silent, how long a send may take.
    pub heartbeat: Duration,
    pub idle_timeout: Duration,
    pub send_timeout: Duration,
    pub shutdown: CancellationToken,
    /// Holds this session's place in its IP address's connection count until the session ends.
    pub _connection: crate::limits::ConnectionSlot,
}

/// Why a session ended, for the log.
#[derive(Debug)]
enum End {
    Admitted,
    ClientLeft,
    Closed(u16, &'static str),
}

impl Session {
    #[tracing::instrument(skip_all, fields(sale = %self.sale, ticket = self.ticket))]
    pub async fn run(self, mut socket: WebSocket) {
        let sessions = metrics::gauge!("floodgate_ws_sessions");
        sessions.increment(1.0);
        let end = self.serve(&mut socket).await;
        sessions.decrement(1.0);
        if let End::Closed(code, reason) = end {
            let _ = socket
                .send(Message::Close(Some(CloseFrame {
                    code,
                    reason: Utf8Bytes::from_static(reason),
                })))
                .await;
        }
        if !matches!(end, End::ClientLeft) {
            finish_closing(&mut socket).await;
        }
        tracing::debug!(?end, "session ended");
    }

    async fn serve(&self, socket: &mut WebSocket) -> End {
        let hello = ServerMessage::Ticket {
            protocol: PROTOCOL_VERSION,
            sale: self.sale.clone(),
            ticket: self.ticket,
            opens_at_ms: self.opens_at_ms,
        };
        if self.send(socket, &hello).await.is_err() {
            return End::ClientLeft;
        }
        let mut heartbeat =
            tokio::time::interval_at(Instant::now() + self.heartbeat, self.heartbeat);
        let mut last_heard = Instant::now();
        let mut view = self.room.subscribe();
        view.mark_changed();
        let mut last_sent: Option<u64> = None;
        let mut pending: Option<ServerMessage> = None;
        let mut next_position_at = Instant::now();

        loop {
            let flush_at = pending.as_ref().map(|_| next_position_at);
            tokio::select! {
                _ = self.shutdown.cancelled() => {
                    return End::Closed(close::GOING_AWAY, "gateway shutting down; reconnect");
                }
                changed = view.changed() => {
                    if changed.is_err() {
                        return End::Closed(close::GOING_AWAY, "room closed; reconnect");
                    }
                    let current = view.borrow_and_update().clone();
                    match current.position(self.ticket) {
                        None => return self.admit(socket, &current).await,
                        Some(position) if Some(position) != last_sent => {
                            pending = Some(ServerMessage::Position {
                                position,
                                eta_secs: current.eta_secs(position, now_millis()),
                            });
                        }
                        Some(_) => {}
                    }
                }
                _ = sleep_until(flush_at) => {}
                _ = heartbeat.tick() => {
                    if last_heard.elapsed() >= self.idle_timeout {
                        return End::Closed(close::IDLE_TIMEOUT, "no answer to pings; reconnect");
                    }
                    let ping = socket.send(Message::Ping(Default::default()));
                    if !matches!(tokio::time::timeout(self.send_timeout, ping).await, Ok(Ok(()))) {
                        return End::ClientLeft;
                    }
                }
                incoming = socket.recv() => {
                    last_heard = Instant::now();
                    if let Some(end) = self.on_client_message(socket, incoming).await {
                        return end;
                    }
                }
            }
            if pending.is_some() && Instant::now() >= next_position_at {
                let message = pending.take().expect("checked above");
                if let ServerMessage::Position { position, .. } = &message {
                    last_sent = Some(*position);
                }
                if self.send(socket, &message).await.is_err() {
                    return End::ClientLeft;
                }
                next_position_at = Instant::now() + self.position_interval;
            }
        }
    }

    async fn admit(&self, socket: &mut WebSocket, view: &RoomView) -> End {
        let now = now_millis();
        let claims = AdmissionClaims {
            sale: self.sale.clone(),
            ticket: self.ticket,
            jti: uuid::Uuid::new_v4().simple().to_string(),
            max_seats: view.max_seats,
            iat_ms: now,
            exp_ms: now + view.token_ttl_ms,
        };
        let admitted = ServerMessage::Admitted {
            token: self.signer.sign(&claims),
            expires_at_ms: claims.exp_ms,
            max_seats: claims.max_seats,
        };
        if self.send(socket, &admitted).await.is_err() {
            return End::ClientLeft;
        }
        tracing::debug!("admitted");
        metrics::counter!("floodgate_admissions_pushed_total").increment(1);
        let _ = socket
            .send(Message::Close(Some(CloseFrame {
                code: close::NORMAL,
                reason: Utf8Bytes::from_static("admitted"),
            })))
            .await;
        End::Admitted
    }

    /// Handles one frame from the client; `Some` ends the session.
    async fn on_client_message(
        &self,
        socket: &mut WebSocket,
        incoming: Option<Result<Message, axum::Error>>,
    ) -> Option<End> {
        match incoming {
            None | Some(Ok(Message::Close(_))) => Some(End::ClientLeft),
            Some(Err(e)) => {
                // tungstenite reports an over-limit frame or message as a capacity error.
                let text = e.to_string();
                if text.contains("Space limit exceeded")
                    || text.contains("too long")
                    || text.contains("too big")
                {
                    Some(End::Closed(close::MESSAGE_TOO_BIG, "message too big"))
                } else {
                    tracing::debug!(error = %e, "websocket error");
                    Some(End::ClientLeft)
                }
            }
            // Protocol-level pings are answered by the WebSocket layer itself.
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => None,
            Some(Ok(Message::Binary(_))) => Some(End::Closed(
                close::BAD_MESSAGE,
                "binary frames are not accepted",
            )),
            Some(Ok(Message::Text(text))) => match serde_json::from_str::<ClientMessage>(&text) {
                Ok(ClientMessage::Ping) => self
                    .send(socket, &ServerMessage::Pong)
                    .await
                    .err()
                    .map(|_| End::ClientLeft),
                Err(_) => Some(End::Closed(
                    close::BAD_MESSAGE,
                    "expected a JSON message such as {\"type\":\"ping\"}",
                )),
            },
        }
    }
}

impl Session {
    /// Sends one message, giving up on a client that does not read: a session never queues
    /// more than the message in hand, so a slow client costs one socket buffer, not a backlog.
    async fn send(&self, socket: &mut WebSocket, message: &ServerMessage) -> Result<(), ()> {
        let text = serde_json::to_string(message).expect("server messages serialise");
        match tokio::time::timeout(self.send_timeout, socket.send(Message::Text(text.into()))).await
        {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(()),
            Err(_) => {
                tracing::debug!("client not reading; disconnected");
                Err(())
            }
        }
    }
}

/// How long the gateway waits for the client's half of the closing handshake.
const CLOSE_WAIT: Duration = Duration::from_secs(1);

/// Waits (briefly) for the client to answer our Close frame before the TCP connection goes, as
/// RFC 6455 asks: dropping it at once can make the client lose the close code it was sent (its
/// last writes hit a closed socket before it reads the frame).
async fn finish_closing(socket: &mut WebSocket) {
    let _ = tokio::time::timeout(CLOSE_WAIT, async {
        while let Some(Ok(message)) = socket.recv().await {
            if matches!(message, Message::Close(_)) {
                break;
            }
        }
    })
    .await;
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
