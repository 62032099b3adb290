//! A waiting-room client for tests: joins over a real WebSocket and records what it is told.

use std::time::Duration;

use floodgate_contract::ws::ServerMessage;
use futures::StreamExt;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

pub type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// What a client saw next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Heard {
    Message(ServerMessage),
    /// The server's close frame: code and reason.
    Closed(u16, String),
    /// The connection ended without a close frame (the gateway died).
    Dropped,
}

/// A connected waiting-room client.
pub struct RoomClient {
    ws: Socket,
    pub ticket: u64,
    pub resume_token: String,
    pub resumed: bool,
    pub draw_nonce: Option<String>,
    pub commitment: String,
    /// Every position it was told, in order.
    pub positions: Vec<u64>,
    /// Every pre-queue size it was told.
    pub prequeue: Vec<u64>,
}

/// A join the gateway refused before the upgrade: HTTP status, headers and JSON body.
#[derive(Debug)]
pub struct Refused {
    pub status: u16,
    pub retry_after: Option<String>,
    pub body: serde_json::Value,
}

impl RoomClient {
    /// Joins `url` (`ws://.../ws?sale=..[&resume=..]`) and reads the ticket message.
    pub async fn join(url: &str) -> Result<Self, Refused> {
        Self::join_with(url, &[]).await
    }

    /// Joins with extra request headers (an `X-Forwarded-For`, say).
    pub async fn join_with(url: &str, headers: &[(&str, &str)]) -> Result<Self, Refused> {
        use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
        let mut request = url.into_client_request().expect("a WebSocket URL");
        for (name, value) in headers {
            request.headers_mut().insert(
                tokio_tungstenite::tungstenite::http::HeaderName::from_bytes(name.as_bytes())
                    .unwrap(),
                value.parse().unwrap(),
            );
        }
        let mut ws = match tokio_tungstenite::connect_async(request).await {
            Ok((ws, _)) => ws,
            Err(WsError::Http(response)) => {
                return Err(Refused {
                    status: response.status().as_u16(),
                    retry_after: response
                        .headers()
                        .get("retry-after")
                        .map(|v| v.to_str().unwrap().to_owned()),
                    body: serde_json::from_slice(response.body().as_deref().unwrap_or(b"null"))
                        .unwrap_or_default(),
                })
            }
            Err(e) => panic!("connecting to {url}: {e}"),
        };
        let first = next_frame(&mut ws, Duration::from_secs(10)).await;
        let Heard::Message(ServerMessage::Ticket {
            ticket,
            resume_token,
            resumed,
            draw_nonce,
            commitment,
            ..
        }) = first
        else {
            panic!("expected a ticket first, got {first:?}");
        };
        Ok(Self {
            ws,
            ticket,
            resume_token,
            resumed,
            draw_nonce,
            commitment,
            positions: Vec::new(),
            prequeue: Vec::new(),
        })
    }

    /// The next thing heard within `timeout` (panics if nothing comes), recording positions.
    pub async fn next(&mut self, timeout: Duration) -> Heard {
        let heard = next_frame(&mut self.ws, timeout).await;
        match &heard {
            Heard::Message(ServerMessage::Position { position, .. }) => {
                self.positions.push(*position)
            }
            Heard::Message(ServerMessage::PreQueue { size, .. }) => self.prequeue.push(*size),
            _ => {}
        }
        heard
    }

    /// Reads until admitted; the admission token. Panics on anything that ends the wait.
    pub async fn admitted(&mut self, timeout: Duration) -> String {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match self.next(left).await {
                Heard::Message(ServerMessage::Admitted { token, .. }) => return token,
                Heard::Message(_) => {}
                other => panic!("ticket {} ended before admission: {other:?}", self.ticket),
            }
        }
    }

    /// Reads until the wait ends: admitted, sold out, closed or dropped; what ended it.
    pub async fn outcome(&mut self, timeout: Duration) -> Heard {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match self.next(left).await {
                Heard::Message(
                    ServerMessage::Position { .. }
                    | ServerMessage::PreQueue { .. }
                    | ServerMessage::Pong
                    | ServerMessage::Ticket { .. },
                ) => {}
                ended => return ended,
            }
        }
    }

    /// Reads until the first position message; that position.
    pub async fn position(&mut self, timeout: Duration) -> u64 {
        loop {
            match self.next(timeout).await {
                Heard::Message(ServerMessage::Position { position, .. }) => return position,
                Heard::Message(_) => {}
                other => panic!("ticket {} ended while waiting: {other:?}", self.ticket),
            }
        }
    }

    /// Reads until the position is `expected` (positions only go down); panics otherwise.
    pub async fn position_becomes(&mut self, expected: u64, timeout: Duration) {
        let deadline = tokio::time::Instant::now() + timeout;
        while self.positions.last() != Some(&expected) {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            assert!(
                !left.is_zero(),
                "ticket {}: position never became {expected}: {:?}",
                self.ticket,
                self.positions
            );
            if let Heard::Closed(..) | Heard::Dropped = self.next(left).await {
                panic!("ticket {} closed while waiting", self.ticket);
            }
        }
    }

    /// Leaves as a browser tab closing would: a close frame, then gone.
    pub async fn leave(mut self) {
        let _ = self.ws.close(None).await;
    }

    /// Whether positions only ever went down.
    pub fn positions_never_rose(&self) -> bool {
        self.positions.windows(2).all(|w| w[1] <= w[0])
    }
}

async fn next_frame(ws: &mut Socket, timeout: Duration) -> Heard {
    loop {
        let frame = tokio::time::timeout(timeout, ws.next())
            .await
            .expect("the waiting room said something in time");
        return match frame {
            Some(Ok(Message::Text(text))) => {
                Heard::Message(serde_json::from_str(&text).expect("a protocol message"))
            }
            Some(Ok(Message::Close(Some(frame)))) => {
                Heard::Closed(u16::from(frame.code), frame.reason.to_string())
            }
            Some(Ok(Message::Close(None))) => Heard::Closed(1005, String::new()),
            Some(Ok(_)) => continue,
            Some(Err(_)) | None => Heard::Dropped,
        };
    }
}
