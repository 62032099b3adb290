//! `floodgate-loadgen`: drives real gateways with many waiting-room clients, on loopback only.
//!
//! `idle` opens N WebSocket sessions, reads each ticket, then holds them open (answering pings)
//! for a while: the measure of a gateway's memory per idle connection (BENCHMARKS.md).
//! `publish` writes synthetic reservation events straight to a topic: the load of the consumer's
//! throughput benchmark. `sale` runs the whole rush (join, wait, admitted, reserve, pay or walk
//! away, expire) and checks its invariants against Redis and PostgreSQL at the end. `queue`
//! holds many sessions and times a frontier change's fan-out; `burst` times joins at the opening.
//! Every client is `floodgate-client`'s (`sale/person.rs` waits in line and books through it;
//! the idle and fan-out scenarios open its sockets and only listen).
//!
//! # Layout
//! - `sale/`: the rush (`person.rs`, one simulated person; `checks.rs`, the invariants).
//! - `queue`: `queue` and `burst`; `poll`: waiting by polling, for comparison.
//! - `reserve`: the booking endpoint end to end; `publish`: synthetic events; `naive`: the
//!   PostgreSQL counter row, for comparison.
//! - `report`: tables and percentiles; `markdown`: the generated part of BENCHMARKS.md.

mod markdown;
mod naive;
mod poll;
mod publish;
mod queue;
mod report;
mod reserve;
mod sale;

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::bail;
use clap::{Parser, Subcommand};
use floodgate_client::room::{self, Dial};
use futures::StreamExt;

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
    /// Publish synthetic reservation events (a SeatReserved per reservation, and a
    /// PaymentConfirmed for every other one) to a topic on a loopback broker.
    Publish {
        #[arg(long, default_value = "127.0.0.1:9092")]
        brokers: String,
        #[arg(long)]
        topic: String,
        /// Reservations; the events are 1.5 times as many.
        #[arg(long, default_value_t = 10_000)]
        reservations: u64,
        /// Pools the reservations spread over (the topic's partition keys).
        #[arg(long, default_value_t = 6)]
        pools: u64,
        /// Also write the figures as JSON to this file.
        #[arg(long)]
        json: Option<std::path::PathBuf>,
    },
    /// Hold many sessions: join rate, gateway memory per connection, and the time one frontier
    /// change takes to reach every client.
    Queue(queue::QueueArgs),
    /// Many joins inside one window, as at the opening: how long each waits for its ticket.
    Burst(queue::BurstArgs),
    /// The booking endpoint's end-to-end throughput, with tokens signed here.
    Reserve(reserve::ReserveArgs),
    /// The naive PostgreSQL counter (FOR UPDATE, or the read-then-write race), for comparison.
    Naive(naive::NaiveArgs),
    /// Wait by polling the sale's status, as polling waiting rooms do (for comparison).
    Poll(poll::PollArgs),
    /// Rewrite the generated part of BENCHMARKS.md from a results folder of deploy/bench.sh.
    Markdown {
        #[arg(long)]
        results: std::path::PathBuf,
        #[arg(long, default_value = "BENCHMARKS.md")]
        into: std::path::PathBuf,
    },
    /// The whole rush against running services, with its invariants checked at the end
    /// (exit status 2 if any fails).
    Sale(sale::SaleArgs),
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // Secret settings may come from files (`<VAR>_FILE`), as container platforms mount them.
    let cli: Cli = floodgate_contract::secret_files::parse_with_secret_files();
    floodgate_contract::runtime::install_tls_provider();
    match cli.command {
        Command::Idle {
            gateway,
            sale,
            connections,
            from,
            concurrency,
            hold_secs,
        } => idle(gateway, &sale, connections, &from, concurrency, hold_secs).await,
        Command::Publish {
            brokers,
            topic,
            reservations,
            pools,
            json,
        } => publish::publish(&brokers, &topic, reservations, pools.max(1), json).await,
        Command::Queue(args) => exit_on_failure(queue::queue(args).await?),
        Command::Burst(args) => exit_on_failure(queue::burst(args).await?),
        Command::Sale(args) => exit_on_failure(sale::run(args).await?),
        Command::Reserve(args) => exit_on_failure(reserve::run(args).await?),
        Command::Naive(args) => exit_on_failure(naive::run(args).await?),
        Command::Poll(args) => exit_on_failure(poll::run(args).await?),
        Command::Markdown { results, into } => markdown::run(&results, &into),
    }
}

/// Refuses any address that is not loopback: this tool never loads anything else.
fn loopback_only(addrs: impl IntoIterator<Item = IpAddr>) -> anyhow::Result<()> {
    if let Some(ip) = addrs.into_iter().find(|ip| !ip.is_loopback()) {
        bail!("floodgate-loadgen only generates load on loopback addresses, not {ip}");
    }
    Ok(())
}

/// Raises the open-files limit as far as allowed; refuses `sockets` beyond it (with a reserve).
fn room_for(sockets: u64) -> anyhow::Result<()> {
    let limit = floodgate_contract::runtime::raise_open_files_limit();
    if sockets + 256 > limit {
        bail!("{sockets} sockets need more than the open-files limit ({limit}): run several processes");
    }
    Ok(())
}

/// A scenario that ran but found something wrong (an invariant broken, clients that could not
/// join) exits with status 2, after its report.
fn exit_on_failure(ok: bool) -> anyhow::Result<()> {
    if !ok {
        std::process::exit(2);
    }
    Ok(())
}

async fn idle(
    gateway: SocketAddr,
    sale: &str,
    connections: u64,
    from: &[IpAddr],
    concurrency: usize,
    hold_secs: u64,
) -> anyhow::Result<()> {
    loopback_only(std::iter::once(gateway.ip()).chain(from.iter().copied()))?;
    room_for(connections)?;
    let open = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let sessions = futures::stream::iter(0..connections)
        .map(|i| {
            let source = from[i as usize % from.len()];
            let (open, failed) = (open.clone(), failed.clone());
            async move {
                match session(source, gateway, sale).await {
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

type Socket = floodgate_client::room::Socket;

fn dial(source: IpAddr, gateway: SocketAddr, sale: &str) -> Dial<'_> {
    Dial {
        gateway,
        sale,
        resume: None,
        from: Some(source),
        headers: &[],
        challenge: None,
    }
}

/// A WebSocket to `sale`'s room on `gateway`, from the local address `source`.
async fn connect(source: IpAddr, gateway: SocketAddr, sale: &str) -> anyhow::Result<Socket> {
    Ok(room::connect(&dial(source, gateway, sale)).await?)
}

/// One session from `source`: connected, upgraded, its ticket read.
async fn session(source: IpAddr, gateway: SocketAddr, sale: &str) -> anyhow::Result<Socket> {
    Ok(room::join(&dial(source, gateway, sale)).await?.0)
}
