//! The one way Floodgate's services serve HTTP: a listener that no stranger can hold open for
//! free. `axum::serve` sets no header-read timeout and no connection cap, so a socket that sends
//! nothing, or a request trickled a byte a minute, would be held for ever wherever a listener is
//! reachable without a proxy in front. Here every connection:
//!
//! - counts against a cap ([`Limits::max_connections`]) for its whole life, WebSocket sessions
//!   included (the permit travels inside the connection's I/O, into the upgrade); at the cap
//!   the listener stops accepting, and the kernel's backlog, itself bounded, holds the rest;
//! - must send a request's whole header within [`Limits::header_read_timeout`], and the next
//!   one on a kept-alive connection too (hyper's timer runs from the moment it waits for a
//!   request), or it is closed: a silent socket, a slow upgrade or an idle keep-alive alike;
//! - must send a request's body at a pace ([`Limits::body_timeout`] between chunks), or the
//!   request fails with 408 and the connection closes;
//! - is told to finish when the service stops (the shutdown future), as `axum::serve` does.
//!
//! The peer's address is given to handlers as `ConnectInfo<SocketAddr>`, as before.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tower::ServiceExt as _;

/// What one listener allows a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Most connections open at once (WebSocket sessions count).
    pub max_connections: usize,
    /// How long a connection may take to send a request's header (from when it is waited for).
    pub header_read_timeout: Duration,
    /// How long a request's body may pause between chunks.
    pub body_timeout: Duration,
}

/// A service's listener settings, from flags or `FLOODGATE_*` environment variables (the same
/// names for every service).
#[derive(Clone, Debug, clap::Args)]
pub struct ListenerArgs {
    /// How long a connection may take to send a request's header, or to start its next request
    /// on a kept-alive connection, before it is closed: a socket that says nothing is not held.
    #[arg(long, env = "FLOODGATE_HEADER_TIMEOUT_MS", default_value_t = 10_000)]
    pub header_timeout_ms: u64,
    /// How long a request's body may pause between chunks before the request fails with 408.
    #[arg(long, env = "FLOODGATE_BODY_TIMEOUT_MS", default_value_t = 10_000)]
    pub body_timeout_ms: u64,
    /// Most connections the public listener holds at once (a gateway's WebSocket sessions
    /// count); past it, new connections wait in the kernel's backlog. Default: the open-files
    /// limit less a reserve.
    #[arg(long, env = "FLOODGATE_MAX_CONNECTIONS")]
    pub max_connections: Option<usize>,
}

impl Default for ListenerArgs {
    fn default() -> Self {
        Self {
            header_timeout_ms: 10_000,
            body_timeout_ms: 10_000,
            max_connections: None,
        }
    }
}

impl ListenerArgs {
    /// The limits of a listener whose cap, unless configured, is `default_max`.
    pub fn limits(&self, default_max: usize) -> Limits {
        Limits {
            max_connections: self.max_connections.unwrap_or(default_max).max(1),
            header_read_timeout: Duration::from_millis(self.header_timeout_ms.max(1)),
            body_timeout: Duration::from_millis(self.body_timeout_ms.max(1)),
        }
    }
}

impl Limits {
    /// The limits of an internal listener (admin, metrics): the defaults, with a small cap.
    pub fn internal() -> Self {
        Self {
            max_connections: 256,
            header_read_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(10),
        }
    }
}

/// Serves `router` on `listener` within `limits` until `shutdown` completes, then lets the open
/// connections finish their requests (upgraded ones are the service's own to end).
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let router = router.layer(tower_http::timeout::RequestBodyTimeoutLayer::new(
        limits.body_timeout,
    ));
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    // Dropped at shutdown: every connection task sees it and finishes gracefully; each holds a
    // receiver of `done`, so the server knows when the last one is gone.
    let (stop, stopping) = watch::channel(());
    let (done, finished) = watch::channel(());
    let mut shutdown = pin!(shutdown);
    loop {
        let permit = tokio::select! {
            permit = permits.clone().acquire_owned() => permit.expect("the semaphore is never closed"),
            () = &mut shutdown => break,
        };
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of file descriptors, or a connection reset before it was accepted: the
                // listener itself is fine. Pause a little so a full table can drain.
                tracing::warn!(error = %e, "accepting a connection failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let io = Counted {
            stream,
            _permit: permit,
        };
        tokio::spawn(connection(
            io,
            peer,
            router.clone(),
            limits,
            stopping.clone(),
            finished.clone(),
        ));
    }
    drop(stop);
    drop(finished);
    done.closed().await;
    Ok(())
}

/// Serves one connection until it ends, or gracefully once `stopping` says so.
async fn connection(
    io: Counted,
    peer: SocketAddr,
    router: Router,
    limits: Limits,
    mut stopping: watch::Receiver<()>,
    _finished: watch::Receiver<()>,
) {
    let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
        request.extensions_mut().insert(ConnectInfo(peer));
        router.clone().oneshot(request.map(Body::new))
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    let mut conn = pin!(builder
        .serve_connection(TokioIo::new(io), service)
        .with_upgrades());
    let mut asked_to_stop = false;
    loop {
        tokio::select! {
            served = conn.as_mut() => {
                if let Err(e) = served {
                    tracing::debug!(error = %e, "connection ended");
                }
                return;
            }
            _ = stopping.changed(), if !asked_to_stop => {
                asked_to_stop = true;
                conn.as_mut().graceful_shutdown();
            }
        }
    }
}

/// A connection's socket with its place under the cap, given back when the connection (or the
/// WebSocket it was upgraded to) is dropped.
struct Counted {
    stream: TcpStream,
    _permit: OwnedSemaphorePermit,
}

impl AsyncRead for Counted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Counted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}
