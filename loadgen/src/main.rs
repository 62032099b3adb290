//! `floodgate-loadgen`: drives real gateways with many waiting-room clients, on loopback only.
//!
//! `idle` opens N WebSocket sessions, reads each ticket, then holds them open (answering pings)
//! for a while: the measure of a gateway's memory per idle connection (BENCHMARKS.md). The sale
//! simulator of the rush comes with the benchmark suite.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use clap::{Parser, Subcommand};
use futures::StreamExt;
use tokio::net::TcpSocket;

#[derive(Parser)]
#[command(name = "floodgate-loadgen", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Open many sessions, then hold them idle.
    Idle {
        /// Gateway address (loopback only).
        #[arg(long, default_value = "127.0.0.1:8080")]
        gateway: SocketAddr,
        /// The sale to join.
        #[arg(long)]
        sale: String,
        /// Sessions to open.
        #[arg(long, default_value_t = 1_000)]
        connections: u64,
        /// Local addresses to connect from, comma-separated (several 127.0.0.x spread the
        /// ephemeral ports and the gateway's per-address limits).
        #[arg(long, default_value = "127.0.0.1", value_delimiter = ',')]
        from: Vec<IpAddr>,
        /// Connections being opened at once.
        #[arg(long, default_value_t = 200)]
        concurrency: usize,
        /// How long to hold the sessions once all are open.
        #[arg(long, default_value_t = 30)]
        hold_secs: u64,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Idle {
            gateway,
            sale,
            connections,
            from,
            concurrency,
            hold_secs,
        } => idle(gateway, &sale, connections, &from, concurrency, hold_secs).await,
    }
}

async fn idle(
    gateway: SocketAddr,
    sale: &str,
    connections: u64,
    from: &[IpAddr],
    concurrency: usize,
    hold_secs: u64,
) -> anyhow::Result<()> {
    if !gateway.ip().is_loopback() || from.iter().any(|ip| !ip.is_loopback()) {
        bail!("floodgate-loadgen only generates load on loopback addresses");
    }
    let limit = rlimit::increase_nofile_limit(u64::MAX).unwrap_or(1024);
    if connections + 64 > limit {
        bail!("{connections} connections need more than the open-files limit ({limit})");
    }
    let url = format!("ws://{gateway}/ws?sale={sale}");
    let open = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let sessions = futures::stream::iter(0..connections)
        .map(|i| {
            let source = from[i as usize % from.len()];
            let url = url.clone();
            let (open, failed) = (open.clone(), failed.clone());
            async move {
                match session(source, gateway, &url).await {
                    Ok(ws) => {
                        open.fetch_add(1, Ordering::Relaxed);
                        Some(ws)
                    }
                    Err(e) => {
                        if failed.fetch_add(1, Ordering::Relaxed) < 5 {
                            eprintln!("connection failed: {e:#}");
                        }
                        None
                    }
                }
            }
        })
        .buffer_unordered(concurrency.max(1))
        .filter_map(|ws| async move { ws })
        .collect::<Vec<_>>()
        .await;
    println!(
        "open={} failed={} in {:.1} s; holding for {hold_secs} s",
        open.load(Ordering::Relaxed),
        failed.load(Ordering::Relaxed),
        started.elapsed().as_secs_f64()
    );
    // Keep reading, so pings are answered and the sessions stay alive and idle.
    let readers: Vec<_> = sessions
        .into_iter()
        .map(|mut ws| tokio::spawn(async move { while let Some(Ok(_)) = ws.next().await {} }))
        .collect();
    tokio::time::sleep(Duration::from_secs(hold_secs)).await;
    for reader in readers {
        reader.abort();
    }
    Ok(())
}

type Socket = tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>;

/// One session from `source`: connected, upgraded, its ticket read.
async fn session(source: IpAddr, gateway: SocketAddr, url: &str) -> anyhow::Result<Socket> {
    let socket = if source.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.bind(SocketAddr::new(source, 0))?;
    let stream = socket.connect(gateway).await.context("connect")?;
    let (mut ws, _) = tokio_tungstenite::client_async(url, stream)
        .await
        .context("upgrade")?;
    match tokio::time::timeout(Duration::from_secs(30), ws.next()).await {
        Ok(Some(Ok(_ticket))) => Ok(ws),
        other => bail!("no ticket: {other:?}"),
    }
}
