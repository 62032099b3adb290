//! The waiting room (docs/protocol.md 1): one connection ([`join`], then [`next`] until the
//! wait ends), and a whole wait in line across dropped connections and drains
//! ([`wait_in_line`]), reconnecting with the resume token after the prescribed back-off.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use floodgate_protocol::identity::IDENTITY_HEADER;
use floodgate_protocol::ws::ServerMessage;
use futures::StreamExt;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

use crate::backoff;
use crate::close::{CloseCode, Then};
pub use crate::dial::{connect, connect_url, Dial, JoinError, Socket, MAX_SERVER_MESSAGE};

/// The first message of a connection: the ticket this connection holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ticket {
    pub ticket: u64,
    pub resume_token: String,
    pub resumed: bool,
    /// For a ticket taken before the opening: its nonce in the pre-queue (new tickets only).
    pub draw_nonce: Option<String>,
    pub commitment: String,
}

/// What a connection heard next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Heard {
    Message(ServerMessage),
    /// The server's close frame: code and reason.
    Closed(u16, String),
    /// The connection ended without a close frame (the gateway died, the network broke).
    Dropped,
    /// A text frame that is not a protocol message.
    Garbled(String),
}

/// How long a new connection may take to say which ticket it holds.
const TICKET_TIMEOUT: Duration = Duration::from_secs(30);

/// Connects as `dial` says and reads the ticket.
pub async fn join(dial: &Dial<'_>) -> Result<(Socket, Ticket), JoinError> {
    let mut ws = connect(dial).await?;
    let ticket = read_ticket(&mut ws).await?;
    Ok((ws, ticket))
}

/// Reads a new connection's first message, its ticket.
pub async fn read_ticket(ws: &mut Socket) -> Result<Ticket, JoinError> {
    match next(ws, TICKET_TIMEOUT).await {
        Some(Heard::Message(ServerMessage::Ticket {
            ticket,
            resume_token,
            resumed,
            draw_nonce,
            commitment,
            ..
        })) => Ok(Ticket {
            ticket,
            resume_token,
            resumed,
            draw_nonce,
            commitment,
        }),
        other => Err(JoinError::Broken(format!(
            "expected a ticket first, got {other:?}"
        ))),
    }
}

/// The next thing `ws` heard within `timeout`; `None` if no protocol message came in that time
/// (control frames do not count: a test that asserts silence must not be kept waiting by pings).
pub async fn next(ws: &mut Socket, timeout: Duration) -> Option<Heard> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let frame = tokio::time::timeout_at(deadline, ws.next()).await.ok()?;
        if let Some(heard) = heard(frame) {
            return Some(heard);
        }
    }
}

/// The next protocol message, close or drop on `ws`; `None` only once nothing at all (not even
/// a ping) has arrived for `silence`: a connection that still carries the gateway's pings is
/// alive, however long its room stays still.
async fn next_alive(ws: &mut Socket, silence: Duration) -> Option<Heard> {
    loop {
        let frame = tokio::time::timeout(silence, ws.next()).await.ok()?;
        if let Some(heard) = heard(frame) {
            return Some(heard);
        }
    }
}

/// What one frame (or the stream's end) means to a client; `None` for a control frame.
fn heard(frame: Option<Result<Message, WsError>>) -> Option<Heard> {
    Some(match frame {
        Some(Ok(Message::Text(text))) => match serde_json::from_str(&text) {
            Ok(message) => Heard::Message(message),
            Err(e) => Heard::Garbled(format!("{e}: {text}")),
        },
        Some(Ok(Message::Close(Some(frame)))) => {
            Heard::Closed(u16::from(frame.code), frame.reason.to_string())
        }
        Some(Ok(Message::Close(None))) => Heard::Closed(1005, String::new()),
        // Pings are answered by the library; nothing else is for the client.
        Some(Ok(_)) => return None,
        Some(Err(_)) | None => Heard::Dropped,
    })
}

/// How a wait in line ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Waited {
    /// Admitted: the admission token.
    Admitted(String),
    /// The sale is over for this ticket (sold out, or close 4410).
    SoldOut,
    /// A newer session took the place back with its resume token (close 4409): it goes on
    /// there, and this client does not take it back on its own.
    Elsewhere,
    /// Gave up: why.
    Failed(String),
}

/// A wait in line: where to connect, and what the client learnt on the way.
#[derive(Debug)]
pub struct Line<'a> {
    /// Gateways to connect to, in turn (the first connection goes to the first).
    pub gateways: &'a [SocketAddr],
    pub sale: &'a str,
    pub from: Option<IpAddr>,
    /// Reconnections before giving up (the back-off makes about six in a 30 s grace).
    pub reconnects: u32,
    /// The ticket, once known.
    pub ticket: Option<Ticket>,
    /// A signed-in buyer's identity token, sent with every connection.
    pub identity: Option<&'a str>,
    /// The answer to the sale's bot check, for a connection that takes a new place (one that
    /// takes a ticket back with its resume token needs none).
    pub challenge: Option<String>,
    /// How long a connection may carry nothing at all, not even a ping, before it is taken
    /// for dead and the client reconnects: [`SILENCE`] by default.
    pub silence: Duration,
}

/// Four of the gateway's heartbeats (15 s each by default, `FLOODGATE_HEARTBEAT_MS`): one lost
/// ping is not a dead connection.
pub const SILENCE: Duration = Duration::from_secs(60);

impl<'a> Line<'a> {
    pub fn new(gateways: &'a [SocketAddr], sale: &'a str) -> Self {
        Self {
            gateways,
            sale,
            from: None,
            reconnects: 8,
            ticket: None,
            identity: None,
            challenge: None,
            silence: SILENCE,
        }
    }
}

/// What happened during a wait in line, as it happened ([`wait_in_line_with`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RoomEvent {
    /// A connection holds a ticket: a new one, or one taken back (`resumed`).
    Ticket(Ticket),
    /// Before the opening: the pre-queue's size.
    PreQueue { size: u64 },
    /// After the opening: 1 + the live tickets ahead; seconds to go at the measured rate.
    Position {
        position: u64,
        eta_secs: Option<u64>,
    },
    /// The connection ended mid-wait (`close`: its close code, `None` if it dropped without
    /// one); the client comes back with the resume token after `after`.
    Reconnecting {
        close: Option<CloseCode>,
        after: Duration,
    },
}

/// What one connection's messages came to.
enum Connection {
    Done(Waited),
    /// It ended mid-wait; `drained` if the gateway said it was draining (1012).
    Lost {
        why: String,
        drained: bool,
        close: Option<CloseCode>,
    },
}

/// Waits in line the way docs/protocol.md 1.5 tells a client to (and the page does): when the
/// connection drops, or the gateway closes it for anything but the end of the sale, reconnect
/// to the next gateway with the resume token after the back-off, and keep the place.
/// `connected` is called once, when the first connection holds a ticket.
pub async fn wait_in_line(line: &mut Line<'_>, mut connected: impl FnMut()) -> Waited {
    let mut first = true;
    wait_in_line_with(line, |event| {
        if first && matches!(event, RoomEvent::Ticket(_)) {
            first = false;
            connected();
        }
    })
    .await
}

/// [`wait_in_line`], telling `on_event` everything that happens on the way: each ticket, the
/// pre-queue's size, the place in line, each reconnection and why.
pub async fn wait_in_line_with(line: &mut Line<'_>, mut on_event: impl FnMut(RoomEvent)) -> Waited {
    let mut why = String::from("no connection");
    let mut resume: Option<String> = None;
    let headers: Vec<(&str, &str)> = line
        .identity
        .map(|identity| (IDENTITY_HEADER, identity))
        .into_iter()
        .collect();
    for attempt in 0..=line.reconnects {
        let gateway = line.gateways[attempt as usize % line.gateways.len()];
        let dial = Dial {
            gateway,
            sale: line.sale,
            resume: resume.as_deref(),
            from: line.from,
            headers: &headers,
            challenge: line.challenge.as_deref().filter(|_| resume.is_none()),
        };
        let (drained, close) = match join(&dial).await {
            Ok((mut ws, ticket)) => {
                on_event(RoomEvent::Ticket(ticket.clone()));
                resume = Some(ticket.resume_token.clone());
                if !ticket.resumed || line.ticket.is_none() {
                    line.ticket = Some(ticket);
                }
                match listen(&mut ws, line.silence, &mut resume, &mut on_event).await {
                    Connection::Done(waited) => return waited,
                    Connection::Lost {
                        why: lost,
                        drained,
                        close,
                    } => {
                        why = lost;
                        (drained, close)
                    }
                }
            }
            // A ticket whose grace ran out (410), that the sale never had (404) or that is
            // another buyer's (403) is over.
            Err(JoinError::Refused {
                status: status @ (403 | 404 | 410),
                ..
            }) if resume.is_some() => {
                return Waited::Failed(format!("resume refused: {status}"));
            }
            Err(e) => {
                why = format!("join: {e}");
                (false, None)
            }
        };
        // A first join that never got a ticket is not retried forever: one more try.
        if attempt == line.reconnects || (line.ticket.is_none() && attempt > 0) {
            break;
        }
        let delay = backoff::reconnect_delay(attempt, drained, &mut rand::thread_rng());
        on_event(RoomEvent::Reconnecting {
            close,
            after: delay,
        });
        tokio::time::sleep(delay).await;
    }
    Waited::Failed(why)
}

/// Reads one connection until admission, the end of the sale, or the connection's loss; a
/// drain's close reason is the (latest) resume token.
async fn listen(
    ws: &mut Socket,
    silence: Duration,
    resume: &mut Option<String>,
    on_event: &mut impl FnMut(RoomEvent),
) -> Connection {
    loop {
        // The gateway pings on every heartbeat: only a silence with no ping either is a dead
        // connection. (Counting pings as silence made every client of a still room reconnect
        // once a minute: 300,000 reconnections in a benchmark of 100,000 waiting people.)
        let heard = next_alive(ws, silence).await;
        match heard {
            Some(Heard::Message(ServerMessage::Admitted { token, .. })) => {
                return Connection::Done(Waited::Admitted(token))
            }
            Some(Heard::Message(ServerMessage::SoldOut)) => {
                return Connection::Done(Waited::SoldOut)
            }
            Some(Heard::Message(ServerMessage::PreQueue { size, .. })) => {
                on_event(RoomEvent::PreQueue { size });
            }
            Some(Heard::Message(ServerMessage::Position { position, eta_secs })) => {
                on_event(RoomEvent::Position { position, eta_secs });
            }
            Some(Heard::Message(_)) => {}
            Some(Heard::Closed(code, reason)) => {
                let close = CloseCode::from_u16(code);
                match close.then() {
                    Then::Stop if close == CloseCode::SaleOver => {
                        return Connection::Done(Waited::SoldOut)
                    }
                    Then::Stop => {
                        return Connection::Done(Waited::Failed(format!(
                            "the sale is not armed: {code} {reason}"
                        )))
                    }
                    Then::Elsewhere => return Connection::Done(Waited::Elsewhere),
                    Then::FixClient => {
                        return Connection::Done(Waited::Failed(format!(
                            "the gateway refused this client's messages: {code} {reason}"
                        )))
                    }
                    Then::Book | Then::Reconnect | Then::ReconnectSoon => {}
                }
                let drained = close == CloseCode::ServiceRestart;
                if drained && !reason.is_empty() {
                    *resume = Some(reason.clone());
                }
                return Connection::Lost {
                    why: format!("closed: {code} {reason}"),
                    drained,
                    close: Some(close),
                };
            }
            Some(Heard::Garbled(text)) => {
                return Connection::Done(Waited::Failed(format!("unreadable message: {text}")))
            }
            Some(Heard::Dropped) | None => {
                return Connection::Lost {
                    why: "the connection dropped".into(),
                    drained: false,
                    close: None,
                }
            }
        }
    }
}
