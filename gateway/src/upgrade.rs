//! The WebSocket upgrade of `GET /ws`, done here rather than by axum's extractor, for the memory
//! of every idle client: the ticket, a session's one large message (its resume token and lottery
//! commitment make it about 300 bytes), is written straight to the connection before the
//! WebSocket layer exists. tungstenite keeps its write buffer at the largest size it ever held,
//! so a ticket sent through it left every session holding a 320-byte buffer for its whole life;
//! now the buffer is sized by a heartbeat (a ping and a position, about 60 bytes). The session
//! also keeps tungstenite's own stream and typed errors, not axum's wrapper of them.

use std::future::Future;
use std::time::Duration;

use axum::extract::FromRequestParts;
use axum::http::header::{self, HeaderMap, HeaderName, HeaderValue};
use axum::http::request::Parts;
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use floodgate_protocol::api::code;
use floodgate_protocol::ws::{MAX_CLIENT_MESSAGE, SUBPROTOCOL};
use hyper::upgrade::{OnUpgrade, Upgraded};
use hyper_util::rt::TokioIo;
use tokio::io::AsyncWriteExt as _;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};
use tokio_tungstenite::WebSocketStream;
use tokio_util::task::TaskTracker;

use crate::error::ApiError;
use crate::frame_watch::FrameWatch;

/// A session's WebSocket, once open.
pub type Socket = WebSocketStream<FrameWatch<TokioIo<Upgraded>>>;

/// A checked WebSocket handshake (RFC 6455, section 4.2.1), not yet answered.
pub struct Upgrade {
    on_upgrade: OnUpgrade,
    /// The client's `Sec-WebSocket-Key`, answered only once the join is let in (the accept
    /// key is a SHA-1 a refused flood need not pay for).
    key: HeaderValue,
    /// Whether the client offered the `floodgate` subprotocol (a page offers it beside its
    /// identity subprotocol; the answer names only `floodgate`, never a token).
    floodgate: bool,
}

/// Why a request is not a WebSocket handshake this gateway can take, in a few words: a 426
/// `websocket_required`, with the headers RFC 9110 and RFC 6455 ask of it (`Upgrade`, and the
/// version this server speaks); or, for a request without exactly one `Host`, 400
/// `host_missing`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotWebSocket(&'static str);

/// The reason a handshake without exactly one `Host` is refused for: none breaks RFC 6455 4.1,
/// and two leave it open which site the request is for (RFC 9112 3.2 answers both with a 400).
const NO_HOST: &str = "a handshake must carry exactly one Host header (RFC 6455 4.1, RFC 9112 3.2)";

impl IntoResponse for NotWebSocket {
    fn into_response(self) -> Response {
        if self.0 == NO_HOST {
            return ApiError::new(code::HOST_MISSING, NO_HOST.into()).into_response();
        }
        let mut response = ApiError::new(
            code::WEBSOCKET_REQUIRED,
            format!("this endpoint speaks WebSocket only: {}", self.0),
        )
        .into_response();
        let headers = response.headers_mut();
        headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
        headers.insert(
            header::SEC_WEBSOCKET_VERSION,
            HeaderValue::from_static("13"),
        );
        response
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Upgrade {
    type Rejection = NotWebSocket;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, NotWebSocket> {
        let (key, floodgate) = check_handshake(&parts.method, &parts.headers)?;
        // hyper puts this in every HTTP/1.1 request's extensions on a connection served with
        // upgrades (the platform's listener is); it is missing only if a layer took it.
        let on_upgrade = parts
            .extensions
            .remove::<OnUpgrade>()
            .ok_or(NotWebSocket("the connection cannot be upgraded"))?;
        Ok(Self {
            on_upgrade,
            key,
            floodgate,
        })
    }
}

/// Checks a handshake's method and headers: the client's key, and whether it offered the
/// `floodgate` subprotocol. A client that offers subprotocols but not `floodgate` is refused
/// here, before a ticket is taken: the answer could name none of its offers, which a browser
/// (and any conforming client) fails, and the ticket would wait for its grace with nobody
/// behind it.
fn check_handshake(
    method: &Method,
    headers: &HeaderMap,
) -> Result<(HeaderValue, bool), NotWebSocket> {
    if method != Method::GET {
        return Err(NotWebSocket("a WebSocket handshake is a GET"));
    }
    if headers.get_all(header::HOST).iter().count() != 1 {
        return Err(NotWebSocket(NO_HOST));
    }
    if !has_token(headers, &header::CONNECTION, "upgrade") {
        return Err(NotWebSocket(
            "the Connection header does not ask for an upgrade",
        ));
    }
    if !has_token(headers, &header::UPGRADE, "websocket") {
        return Err(NotWebSocket("the Upgrade header does not name websocket"));
    }
    if headers
        .get(header::SEC_WEBSOCKET_VERSION)
        .map(HeaderValue::as_bytes)
        != Some(b"13")
    {
        return Err(NotWebSocket("the Sec-WebSocket-Version header must be 13"));
    }
    let key = headers
        .get(header::SEC_WEBSOCKET_KEY)
        .filter(|key| is_handshake_key(key.as_bytes()))
        .ok_or(NotWebSocket(
            "the Sec-WebSocket-Key header must be 16 bytes in base64",
        ))?;
    let mut offered = headers
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .flat_map(|offers| offers.as_bytes().split(|b| *b == b','))
        .map(<[u8]>::trim_ascii)
        .filter(|protocol| !protocol.is_empty())
        .peekable();
    let any_offered = offered.peek().is_some();
    let floodgate = offered.any(|protocol| protocol == SUBPROTOCOL.as_bytes());
    if any_offered && !floodgate {
        return Err(NotWebSocket(
            "offer the floodgate subprotocol beside any other (new WebSocket(url,              [\"floodgate\", ...]))",
        ));
    }
    Ok((key.clone(), floodgate))
}

/// Whether a comma-separated header holds `token`, ignoring case (`Connection: keep-alive,
/// Upgrade` asks for an upgrade).
fn has_token(headers: &HeaderMap, name: &HeaderName, token: &str) -> bool {
    headers.get_all(name).iter().any(|value| {
        value
            .as_bytes()
            .split(|b| *b == b',')
            .any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
    })
}

/// A `Sec-WebSocket-Key`: 16 bytes in base64, so 22 base64 characters and `==`.
fn is_handshake_key(key: &[u8]) -> bool {
    let base64 = |b: &u8| b.is_ascii_alphanumeric() || *b == b'+' || *b == b'/';
    key.len() == 24 && key[..22].iter().all(base64) && &key[22..] == b"=="
}

impl Upgrade {
    /// Answers 101 Switching Protocols. Once hyper hands the connection over, `then` runs in a
    /// short task of its own (tracked by `tasks`, so a draining gateway waits for it) with the
    /// connection; a client that goes away before that is dropped quietly.
    pub fn respond<F, Fut>(self, tasks: &TaskTracker, then: F) -> Response
    where
        F: FnOnce(TokioIo<Upgraded>) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let on_upgrade = self.on_upgrade;
        tasks.spawn(async move {
            match on_upgrade.await {
                Ok(upgraded) => then(TokioIo::new(upgraded)).await,
                Err(e) => tracing::debug!(error = %e, "a WebSocket upgrade did not complete"),
            }
        });
        let mut response = StatusCode::SWITCHING_PROTOCOLS.into_response();
        let headers = response.headers_mut();
        headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
        headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
        let accept = derive_accept_key(self.key.as_bytes());
        headers.insert(
            header::SEC_WEBSOCKET_ACCEPT,
            HeaderValue::from_str(&accept).expect("base64 is a header value"),
        );
        if self.floodgate {
            headers.insert(
                header::SEC_WEBSOCKET_PROTOCOL,
                HeaderValue::from_static(SUBPROTOCOL),
            );
        }
        response
    }
}

/// Opens the WebSocket on an upgraded connection, writing `first` (a text message) straight to
/// the connection before the WebSocket layer exists, within `timeout`. `Err` if the client does
/// not take it: the connection is dropped.
pub async fn open(
    mut io: TokioIo<Upgraded>,
    first: &str,
    timeout: Duration,
) -> Result<Socket, std::io::Error> {
    let frame = text_frame(first.as_bytes());
    let writing = async {
        io.write_all(&frame).await?;
        io.flush().await
    };
    tokio::time::timeout(timeout, writing)
        .await
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??;
    drop(frame);
    Ok(WebSocketStream::from_raw_socket(FrameWatch::new(io), Role::Server, Some(config())).await)
}

/// A server's text frame (RFC 6455, section 5.2): final, unmasked, with the shortest length
/// encoding.
fn text_frame(payload: &[u8]) -> Vec<u8> {
    const FIN_TEXT: u8 = 0x81;
    let mut frame = Vec::with_capacity(payload.len() + 10);
    frame.push(FIN_TEXT);
    match payload.len() {
        n if n < 126 => frame.push(n as u8),
        n if n <= usize::from(u16::MAX) => {
            frame.push(126);
            frame.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            frame.push(127);
            frame.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    frame.extend_from_slice(payload);
    frame
}

/// The WebSocket layer's settings, sized for many idle sockets.
fn config() -> WebSocketConfig {
    WebSocketConfig::default()
        .max_message_size(Some(MAX_CLIENT_MESSAGE))
        .max_frame_size(Some(MAX_CLIENT_MESSAGE))
        // The default 128 KiB read buffer is allocated per connection up front. Client frames
        // are at most 1 KiB; messages to the client are written at each flush (a heartbeat's
        // ping and position go out in one write; nothing waits longer), and a client that does
        // not read is dropped by the send timeout, so nothing piles up.
        .read_buffer_size(READ_BUFFER)
        .write_buffer_size(WRITE_BATCH)
        .max_write_buffer_size(MAX_WRITE_BUFFER)
}

/// Per-connection WebSocket read buffer. Idle clients send only pongs and pings of a few bytes;
/// a larger frame (up to [`MAX_CLIENT_MESSAGE`]) grows the buffer when it comes.
const READ_BUFFER: usize = 128;
/// Frames smaller than this together wait for the session's flush rather than being written one
/// by one: a heartbeat's ping and position are one write (one system call, the largest part of
/// a message's cost). Every session flushes what it queued before it sleeps.
const WRITE_BATCH: usize = 256;
/// Most bytes one connection may hold unsent: a few messages; past it the send fails and the
/// session ends (the send timeout usually ends a slow client first).
const MAX_WRITE_BUFFER: usize = 64 * 1024;

#[cfg(test)]
mod tests {
    use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};
    use tokio_tungstenite::tungstenite::protocol::frame::Frame;

    use super::*;

    fn handshake(pairs: &[(&str, &str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|(k, v)| {
                (
                    HeaderName::from_bytes(k.as_bytes()).unwrap(),
                    HeaderValue::from_str(v).unwrap(),
                )
            })
            .collect()
    }

    const GOOD: [(&str, &str); 5] = [
        ("host", "gateway.example"),
        ("connection", "keep-alive, Upgrade"),
        ("upgrade", "WebSocket"),
        ("sec-websocket-version", "13"),
        ("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="),
    ];

    #[test]
    fn a_handshake_is_answered_with_the_rfcs_accept_key() {
        let (key, floodgate) = check_handshake(&Method::GET, &handshake(&GOOD)).unwrap();
        // RFC 6455, section 1.3's own example.
        assert_eq!(
            derive_accept_key(key.as_bytes()),
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
        assert!(!floodgate);
    }

    #[test]
    fn the_floodgate_subprotocol_is_found_among_others_and_required_beside_them() {
        let mut headers = handshake(&GOOD);
        headers.append(
            header::SEC_WEBSOCKET_PROTOCOL,
            HeaderValue::from_static("floodgate-identity.abc"),
        );
        assert!(check_handshake(&Method::GET, &headers).is_err());
        headers.append(
            header::SEC_WEBSOCKET_PROTOCOL,
            HeaderValue::from_static("x, floodgate"),
        );
        assert!(check_handshake(&Method::GET, &headers).unwrap().1);
        // An empty header offers nothing.
        let mut empty = handshake(&GOOD);
        empty.insert(
            header::SEC_WEBSOCKET_PROTOCOL,
            HeaderValue::from_static(" , "),
        );
        assert!(!check_handshake(&Method::GET, &empty).unwrap().1);
    }

    #[test]
    fn a_request_that_is_not_a_handshake_is_refused_with_its_reason() {
        assert!(check_handshake(&Method::POST, &handshake(&GOOD)).is_err());
        for (missing, reason) in [
            ("host", NO_HOST),
            (
                "connection",
                "the Connection header does not ask for an upgrade",
            ),
            ("upgrade", "the Upgrade header does not name websocket"),
            (
                "sec-websocket-version",
                "the Sec-WebSocket-Version header must be 13",
            ),
            (
                "sec-websocket-key",
                "the Sec-WebSocket-Key header must be 16 bytes in base64",
            ),
        ] {
            let pairs: Vec<_> = GOOD.into_iter().filter(|(k, _)| *k != missing).collect();
            let refused = check_handshake(&Method::GET, &handshake(&pairs)).unwrap_err();
            assert_eq!(refused, NotWebSocket(reason), "without {missing}");
        }
        for key in [
            "short==",
            "dGhlIHNhbXBsZSBub25jZQ=",
            "dGhlIHNhbXBsZSBub25j!Q==",
        ] {
            let mut headers = handshake(&GOOD);
            headers.insert(header::SEC_WEBSOCKET_KEY, HeaderValue::from_static(key));
            assert!(check_handshake(&Method::GET, &headers).is_err(), "{key}");
        }
        let mut old = handshake(&GOOD);
        old.insert(header::SEC_WEBSOCKET_VERSION, HeaderValue::from_static("8"));
        assert!(check_handshake(&Method::GET, &old).is_err());
    }

    #[test]
    fn a_raw_text_frame_is_the_one_tungstenite_would_write() {
        for len in [0, 1, 125, 126, 300, 65_535, 65_536] {
            let payload = "x".repeat(len);
            let mut theirs = Vec::new();
            Frame::message(payload.clone(), OpCode::Data(Data::Text), true)
                .format(&mut theirs)
                .unwrap();
            assert_eq!(
                text_frame(payload.as_bytes()),
                theirs,
                "a {len}-byte payload"
            );
        }
    }
}
