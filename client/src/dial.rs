//! Reaching a gateway's waiting room: where and how to connect ([`Dial`]: the gateway, the
//! sale, the resume token in its header and never the URL, the address to connect from), the
//! upgrade, its refusals read as the JSON errors they are, and the socket's buffers sized for a
//! client that hears a few hundred bytes a second.

use std::net::{IpAddr, SocketAddr};

use floodgate_protocol::api::ErrorBody;
use floodgate_protocol::resume::RESUME_HEADER;
use tokio::net::TcpSocket;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
use tokio_tungstenite::tungstenite::http::HeaderName;
use tokio_tungstenite::tungstenite::Error as WsError;

/// One WebSocket to a gateway.
pub type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Why a join did not get a ticket.
#[derive(Debug, thiserror::Error)]
pub enum JoinError {
    /// Refused before the upgrade with a JSON error (docs/protocol.md 1.1).
    #[error("{status} {}", body.as_ref().map_or("", |b| b.error.as_str()))]
    Refused {
        status: u16,
        /// `Retry-After`, as sent.
        retry_after: Option<String>,
        body: Option<ErrorBody>,
    },
    /// No connection, no upgrade, or no ticket.
    #[error("{0}")]
    Broken(String),
}

/// Where and how to connect.
#[derive(Clone, Debug)]
pub struct Dial<'a> {
    /// The gateway, `host:port`.
    pub gateway: SocketAddr,
    pub sale: &'a str,
    /// A resume token from an earlier connection: take that ticket back. It is sent in the
    /// `Floodgate-Resume` header, never in the URL (where proxies and CDNs log it).
    pub resume: Option<&'a str>,
    /// The local address to connect from (a load test spreads its sockets over several).
    pub from: Option<IpAddr>,
    /// Extra request headers (an `X-Forwarded-For` behind a trusted proxy, say; a signed-in
    /// buyer's `Floodgate-Identity`).
    pub headers: &'a [(&'a str, &'a str)],
    /// The answer to the sale's bot check, when it asks for one.
    pub challenge: Option<&'a str>,
}

impl Dial<'_> {
    /// `ws://<gateway>/ws?sale=<sale>[&challenge=<answer>]`: the resume token is not in it.
    pub fn url(&self) -> String {
        let mut url = format!("ws://{}/ws?sale={}", self.gateway, self.sale);
        if let Some(answer) = self.challenge {
            url.push_str("&challenge=");
            url.push_str(answer);
        }
        url
    }
}

/// Connects and upgrades as `dial` says, without reading anything.
pub async fn connect(dial: &Dial<'_>) -> Result<Socket, JoinError> {
    let mut headers = dial.headers.to_vec();
    if let Some(token) = dial.resume {
        headers.push((RESUME_HEADER, token));
    }
    connect_url(&dial.url(), dial.from, &headers).await
}

/// Connects to a room URL as given (`ws://host:port/ws?sale=...`, with whatever query a test
/// wants to send), from `from` if given, with extra request `headers`.
pub async fn connect_url(
    url: &str,
    from: Option<IpAddr>,
    headers: &[(&str, &str)],
) -> Result<Socket, JoinError> {
    let broken = |e: &dyn std::fmt::Display| JoinError::Broken(e.to_string());
    let mut request = url.into_client_request().map_err(|e| broken(&e))?;
    for (name, value) in headers {
        let name = HeaderName::from_bytes(name.as_bytes()).map_err(|e| broken(&e))?;
        request
            .headers_mut()
            .insert(name, value.parse().map_err(|e| broken(&e))?);
    }
    let authority = request
        .uri()
        .authority()
        .map(|a| a.as_str().to_owned())
        .ok_or_else(|| broken(&"the URL names no gateway"))?;
    let gateway = tokio::net::lookup_host(&authority)
        .await
        .map_err(|e| broken(&e))?
        .next()
        .ok_or_else(|| broken(&format!("{authority} resolves to nothing")))?;
    let socket = match gateway {
        SocketAddr::V4(_) => TcpSocket::new_v4(),
        SocketAddr::V6(_) => TcpSocket::new_v6(),
    }
    .map_err(|e| broken(&e))?;
    if let Some(from) = from {
        // The port is chosen at connect, not at bind (Linux): a port bound without a
        // destination is the address's alone, and thousands of clients on one machine would
        // then take every port of the range from every other connection on it (an edge's to
        // its gateways, say), where ports picked at connect are shared by every destination.
        // Best effort: without it the bind takes a port of its own, as it always did.
        #[cfg(target_os = "linux")]
        let _ = nix::sys::socket::setsockopt(
            &socket,
            nix::sys::socket::sockopt::IpBindAddressNoPort,
            &true,
        );
        socket
            .bind(SocketAddr::new(from, 0))
            .map_err(|e| broken(&e))?;
    }
    let stream = socket
        .connect(gateway)
        .await
        .map_err(|e| broken(&format!("connect: {e}")))?;
    let stream = tokio_tungstenite::MaybeTlsStream::Plain(stream);
    match tokio_tungstenite::client_async_with_config(request, stream, Some(socket_config())).await
    {
        Ok((ws, _)) => Ok(ws),
        Err(WsError::Http(response)) => Err(JoinError::Refused {
            status: response.status().as_u16(),
            retry_after: response
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned),
            body: response
                .body()
                .as_deref()
                .and_then(|b| serde_json::from_slice(b).ok()),
        }),
        Err(e) => Err(broken(&format!("upgrade: {e}"))),
    }
}

/// The largest message this client accepts from a gateway: far above any the protocol defines
/// (the admission message, the largest, is well under 1 KiB), and small enough that a broken or
/// hostile server cannot make the client hold megabytes.
pub const MAX_SERVER_MESSAGE: usize = 64 * 1024;

/// How a connection's buffers are sized. tungstenite's defaults (a 128 KiB read buffer
/// allocated up front, a 128 KiB write buffer) suit a bulk transfer, not a client that hears a
/// few hundred bytes a second: a load generator holding 15,000 sessions measured 140 KB a
/// session with them (BENCHMARKS.md, "What a session costs the load generator"). The read
/// buffer still grows for a larger frame; writes (a ping now and then) go out at once.
fn socket_config() -> tokio_tungstenite::tungstenite::protocol::WebSocketConfig {
    tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
        .read_buffer_size(1024)
        .write_buffer_size(0)
        .max_message_size(Some(MAX_SERVER_MESSAGE))
        .max_frame_size(Some(MAX_SERVER_MESSAGE))
}
