//! The waiting-room client of the tests: `floodgate_client`'s connection, with what a test
//! asserts on recorded (every position, every pre-queue size) and any surprise a panic.

use std::time::Duration;

use floodgate_client::room::{self, JoinError, Socket};
use floodgate_protocol::ws::ServerMessage;

pub use floodgate_client::room::Heard;

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
    /// Joins `url` (`ws://.../ws?sale=..`) and reads the ticket message.
    pub async fn join(url: &str) -> Result<Self, Refused> {
        Self::join_with(url, &[]).await
    }

    /// Takes the ticket of resume token `token` back at `url` (`ws://.../ws?sale=..`), with extra
    /// request `headers`: the token rides as the `floodgate-resume.<token>` subprotocol, as a
    /// browser sends it (docs/protocol.md 1.5), never in the URL.
    pub async fn resume(url: &str, token: &str, headers: &[(&str, &str)]) -> Result<Self, Refused> {
        let protocols = format!("floodgate, floodgate-resume.{token}");
        let mut headers = headers.to_vec();
        headers.push(("sec-websocket-protocol", &protocols));
        Self::join_with(url, &headers).await
    }

    /// Joins with extra request headers (an `X-Forwarded-For`, say).
    pub async fn join_with(url: &str, headers: &[(&str, &str)]) -> Result<Self, Refused> {
        Self::join_from(url, None, headers).await
    }

    /// The refusal of a join with `headers` to `url`: its status and error code (a join that is
    /// let in fails the test).
    pub async fn refusal(url: &str, headers: &[(&str, &str)]) -> (u16, String) {
        match Self::join_with(url, headers).await {
            Ok(client) => panic!("joined with ticket {}", client.ticket),
            Err(r) => (r.status, r.body["error"].as_str().unwrap_or("").to_owned()),
        }
    }

    /// Joins from the local address `from` (another 127.0.0.x: another client, to whoever
    /// counts addresses), with extra request headers.
    pub async fn join_from(
        url: &str,
        from: Option<std::net::IpAddr>,
        headers: &[(&str, &str)],
    ) -> Result<Self, Refused> {
        let joined = match room::connect_url(url, from, headers).await {
            Ok(mut ws) => room::read_ticket(&mut ws).await.map(|ticket| (ws, ticket)),
            Err(e) => Err(e),
        };
        match joined {
            Ok((ws, ticket)) => Ok(Self {
                ws,
                ticket: ticket.ticket,
                resume_token: ticket.resume_token,
                resumed: ticket.resumed,
                draw_nonce: ticket.draw_nonce,
                commitment: ticket.commitment,
                positions: Vec::new(),
                prequeue: Vec::new(),
            }),
            Err(JoinError::Refused {
                status,
                retry_after,
                body,
            }) => Err(Refused {
                status,
                retry_after,
                body: serde_json::to_value(body).unwrap_or_default(),
            }),
            Err(e) => panic!("joining {url}: {e}"),
        }
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

    /// The next thing heard within `timeout`, or `None` if nothing was (a session that is only
    /// waiting may hear nothing for a while).
    pub async fn try_next(&mut self, timeout: Duration) -> Option<Heard> {
        match room::next(&mut self.ws, timeout).await {
            Some(Heard::Garbled(text)) => panic!("not a protocol message: {text}"),
            heard => heard,
        }
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

    /// Sends the protocol's ping and waits for its pong (other messages pass by, recorded):
    /// whether the connection still carries messages both ways.
    pub async fn ping(&mut self, timeout: Duration) -> bool {
        use futures::SinkExt;
        let ping = serde_json::to_string(&floodgate_protocol::ws::ClientMessage::Ping).unwrap();
        let sent = self
            .ws
            .send(tokio_tungstenite::tungstenite::Message::Text(ping.into()))
            .await;
        if sent.is_err() {
            return false;
        }
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match self.try_next(left).await {
                Some(Heard::Message(ServerMessage::Pong)) => return true,
                Some(Heard::Message(ServerMessage::Position { position, .. })) => {
                    self.positions.push(position);
                }
                Some(Heard::Message(_)) => {}
                _ => return false,
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
    match room::next(ws, timeout).await {
        Some(Heard::Garbled(text)) => panic!("not a protocol message: {text}"),
        Some(heard) => heard,
        None => panic!("the waiting room said nothing within {timeout:?}"),
    }
}

/// The answer to a WebSocket join written by hand to `target` (from the local address `from`,
/// another client to whoever counts addresses): `GET <path>` with the upgrade's headers and
/// `extra`, header lines each ending in CRLF that a client library would not send (bytes past
/// ASCII, blanks, a body's length). Read until its headers and the body they announce are in,
/// or the connection ends (a refusing edge may reset it after answering).
pub async fn hand_written_join(
    target: std::net::SocketAddr,
    from: Option<std::net::Ipv4Addr>,
    path: &str,
    extra: &str,
) -> String {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    if let Some(from) = from {
        socket.bind((from, 0).into()).unwrap();
    }
    let mut socket = socket.connect(target).await.unwrap();
    let join = format!(
        "GET {path} HTTP/1.1\r\nHost: floodgate\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
         Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n{extra}\r\n"
    );
    socket.write_all(join.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let mut chunk = [0u8; 4096];
    while !answered(&answer) {
        let read = tokio::time::timeout(Duration::from_secs(30), socket.read(&mut chunk));
        match read.await.expect("an answer") {
            Ok(0) | Err(_) => break,
            Ok(n) => answer.extend_from_slice(&chunk[..n]),
        }
    }
    String::from_utf8_lossy(&answer).into_owned()
}

/// Whether `answer` holds an HTTP answer's headers and the body they announce.
fn answered(answer: &[u8]) -> bool {
    let text = String::from_utf8_lossy(answer);
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        return false;
    };
    let length = head
        .lines()
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| name.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, value)| value.trim().parse::<usize>().ok())
        .unwrap_or(0);
    body.len() >= length
}
