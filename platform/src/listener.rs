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
//!   request fails (400) and the connection closes;
//! - gets a whole request answered within [`Limits::request_timeout`] (a body trickled just
//!   under the pace, a handler that waits), else 408;
//! - must read what it is sent: a write that cannot go out for [`Limits::write_timeout`] ends
//!   the connection, so a client that never reads its answer holds no slot;
//! - is told to finish when the service stops (the shutdown future), as `axum::serve` does, and
//!   is given [`DRAIN_TIMEOUT`] to do so.
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
    /// How long a request may take from its header to its answer (a WebSocket's upgrade
    /// included, not the session after it).
    pub request_timeout: Duration,
    /// How long a write to the connection may wait for the client to read.
    pub write_timeout: Duration,
}

/// How long a stopping listener waits for its connections to finish their requests.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// A service's listener settings, from flags or `FLOODGATE_*` environment variables (the same
/// names for every service).
#[derive(Clone, Debug, clap::Args)]
pub struct ListenerArgs {
    /// How long a connection may take to send a request's header, or to start its next request
    /// on a kept-alive connection, before it is closed: a socket that says nothing is not held.
    #[arg(long = "header-timeout-ms", env = "FLOODGATE_HEADER_TIMEOUT_MS", default_value = "10000", value_parser = crate::settings::millis)]
    pub header_timeout: Duration,
    /// How long a request's body may pause between chunks before the request fails with 408.
    #[arg(long = "body-timeout-ms", env = "FLOODGATE_BODY_TIMEOUT_MS", default_value = "10000", value_parser = crate::settings::millis)]
    pub body_timeout: Duration,
    /// How long a request may take, its body included, before it is answered 408: above the
    /// booking service's slowest answer (a reservation waits up to its delivery timeout).
    #[arg(long = "request-timeout-ms", env = "FLOODGATE_REQUEST_TIMEOUT_MS", default_value = "30000", value_parser = crate::settings::millis)]
    pub request_timeout: Duration,
    /// How long a write may wait for the client to read before the connection is closed.
    #[arg(long = "write-timeout-ms", env = "FLOODGATE_WRITE_TIMEOUT_MS", default_value = "30000", value_parser = crate::settings::millis)]
    pub write_timeout: Duration,
    /// Most connections the public listener holds at once (a gateway's WebSocket sessions
    /// count); past it, new connections wait in the kernel's backlog. Default: the open-files
    /// limit less a reserve.
    #[arg(long, env = "FLOODGATE_MAX_CONNECTIONS")]
    pub max_connections: Option<usize>,
}

impl Default for ListenerArgs {
    /// The declared defaults (written once, on the flags above).
    fn default() -> Self {
        crate::settings::defaults()
    }
}

impl ListenerArgs {
    /// The limits of a listener whose cap, unless configured, is `default_max`.
    pub fn limits(&self, default_max: usize) -> Limits {
        Limits {
            max_connections: self.max_connections.unwrap_or(default_max).max(1),
            header_read_timeout: self.header_timeout.max(Duration::from_millis(1)),
            body_timeout: self.body_timeout.max(Duration::from_millis(1)),
            request_timeout: self.request_timeout.max(Duration::from_millis(1)),
            write_timeout: self.write_timeout.max(Duration::from_millis(1)),
        }
    }
}

impl Limits {
    /// The limits of an internal listener (admin, metrics): the defaults, with a small cap.
    pub fn internal() -> Self {
        Self {
            ..ListenerArgs::default().limits(256)
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
    serve_all(vec![listener], router, limits, shutdown).await
}

/// [`serve`] on several listeners at once, their connections under one cap: a gateway listens
/// on several ports so that an edge in front has several destinations to open its upstream
/// connections to (each destination has its own range of source ports; docs/deploy.md, "The
/// edge's ports").
pub async fn serve_all(
    listeners: Vec<TcpListener>,
    router: Router,
    limits: Limits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let router = router
        .layer(tower_http::timeout::RequestBodyTimeoutLayer::new(
            limits.body_timeout,
        ))
        .layer(tower_http::timeout::TimeoutLayer::with_status_code(
            axum::http::StatusCode::REQUEST_TIMEOUT,
            limits.request_timeout,
        ));
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    // Dropped at shutdown: every connection task sees it and finishes gracefully; each holds a
    // receiver of `done`, so the server knows when the last one is gone.
    let (stop, stopping) = watch::channel(());
    let (done, finished) = watch::channel(());
    let mut shutdown = pin!(shutdown);
    let mut turn = 0;
    loop {
        let permit = tokio::select! {
            permit = permits.clone().acquire_owned() => permit.expect("the semaphore is never closed"),
            () = &mut shutdown => break,
        };
        let accepted = tokio::select! {
            accepted = accept_any(&listeners, &mut turn) => accepted,
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
        let io = Counted::new(stream, permit, limits.write_timeout);
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
    if tokio::time::timeout(DRAIN_TIMEOUT, done.closed())
        .await
        .is_err()
    {
        tracing::warn!("some connections did not finish in time; the listener stops anyway");
    }
    Ok(())
}

/// The next connection any of `listeners` has waiting, looking at them in turn from `turn` (which
/// moves on past the one that answered), so that a flood on one port cannot starve the others.
async fn accept_any(
    listeners: &[TcpListener],
    turn: &mut usize,
) -> io::Result<(TcpStream, SocketAddr)> {
    std::future::poll_fn(|cx| {
        for offset in 0..listeners.len() {
            let at = (*turn + offset) % listeners.len();
            if let Poll::Ready(accepted) = listeners[at].poll_accept(cx) {
                *turn = at + 1;
                return Poll::Ready(accepted);
            }
        }
        Poll::Pending
    })
    .await
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
/// WebSocket it was upgraded to) is dropped, and a deadline on writes the client does not read.
struct Counted<S = TcpStream> {
    stream: S,
    _permit: OwnedSemaphorePermit,
    write_timeout: Duration,
    /// Set while a write waits for the client to read; fires after `write_timeout`.
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<S> Counted<S> {
    fn new(stream: S, permit: OwnedSemaphorePermit, write_timeout: Duration) -> Self {
        Self {
            stream,
            _permit: permit,
            write_timeout,
            stalled: None,
        }
    }

    /// What a write that made no progress answers: wait, unless the client has not read for
    /// the write timeout.
    fn stall<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        let limit = self.write_timeout;
        let timer = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client stopped reading",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn progressed<T>(
        &mut self,
        done: Poll<io::Result<T>>,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<T>> {
        match done {
            Poll::Pending => self.stall(cx),
            ready => {
                self.stalled = None;
                ready
            }
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Counted<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Counted<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let done = Pin::new(&mut self.stream).poll_write(cx, buf);
        self.progressed(done, cx)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let done = Pin::new(&mut self.stream).poll_flush(cx);
        self.progressed(done, cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let done = Pin::new(&mut self.stream).poll_write_vectored(cx, bufs);
        self.progressed(done, cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncWriteExt as _;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_client_that_stops_reading_is_cut_off_after_the_write_timeout() {
        let permits = Arc::new(Semaphore::new(1));
        let permit = permits.clone().acquire_owned().await.unwrap();
        // The client's end reads nothing; the pipe holds 64 bytes.
        let (server, _client) = tokio::io::duplex(64);
        let mut counted = Counted::new(server, permit, Duration::from_secs(30));
        let started = tokio::time::Instant::now();
        let written = counted.write_all(&[0; 4096]).await;
        assert_eq!(written.unwrap_err().kind(), io::ErrorKind::TimedOut);
        assert!(started.elapsed() >= Duration::from_secs(30));
        drop(counted);
        assert_eq!(permits.available_permits(), 1, "its slot came back");
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_that_reads_slowly_but_steadily_is_not() {
        let permits = Arc::new(Semaphore::new(1));
        let permit = permits.clone().acquire_owned().await.unwrap();
        let (server, mut client) = tokio::io::duplex(64);
        let mut counted = Counted::new(server, permit, Duration::from_secs(30));
        let reader = tokio::spawn(async move {
            let mut buf = [0; 64];
            let mut read = 0;
            while read < 4096 {
                tokio::time::sleep(Duration::from_secs(20)).await;
                read += tokio::io::AsyncReadExt::read(&mut client, &mut buf)
                    .await
                    .unwrap();
            }
        });
        counted
            .write_all(&[0; 4096])
            .await
            .expect("never stalled 30 s");
        reader.await.unwrap();
    }
}
