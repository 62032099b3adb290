//! `floodgate-loadgen`: drives real gateways with many waiting-room clients, on loopback only.
//!
//! `idle` opens N WebSocket sessions, reads each ticket, then holds them open (answering pings)
//! for a while: the measure of a gateway's memory per idle connection (BENCHMARKS.md), and of
//! what a session costs the load generator itself.
//! `publish` writes synthetic reservation events straight to a topic: the load of the consumer's
//! throughput benchmark. `sale` runs the whole rush (join, wait, admitted, reserve, pay or walk
//! away, expire) and checks its invariants against Redis and PostgreSQL at the end. `queue`
//! holds many sessions and times a frontier change's fan-out; `burst` times joins at the opening.
//! Every client is `floodgate-client`'s: `sale/person.rs` waits in line and books through it,
//! the idle and fan-out scenarios watch its wait in line (`waits.rs`), and the burst times its
//! single connection to a ticket.
//!
//! # Layout
//! - `sale/`: the rush (`person.rs`, one simulated person; `reads.rs`, what a run reads back at
//!   its end; `checks.rs`, the invariants).
//! - `waits`: many people waiting in line through the client crate; `idle`: idle sessions (and
//!   `freshness`: how stale their shown positions ever are, against the truth);
//!   `queue`: a crowd held in line and the fan-out of one change; `burst`: joins at the opening;
//!   `poll`: waiting by polling, for comparison.
//! - `reserve`: the booking endpoint end to end; `publish`: synthetic events; `naive`: the
//!   PostgreSQL counter row, for comparison.
//! - `report`: tables and percentiles; `markdown`: the generated part of BENCHMARKS.md.
//! - `simulate`: a discrete-event model of a sale calibrated on a benchmark run: predictions,
//!   the fleet's plan, docs/capacity.md.
//! - `fault`: a saturated Redis (a proxy pacing its replies), the autopilot benchmark's fault.
//! - `hostile`: the stranger's attacks at fixed rates, beside a `sale` (the hostile benchmark).

mod burst;
mod fault;
mod freshness;
mod hostile;
mod idle;
mod markdown;
mod naive;
mod poll;
mod publish;
mod queue;
mod report;
mod reserve;
mod sale;
mod simulate;
mod waits;

use std::net::{IpAddr, SocketAddr};

use anyhow::bail;
use clap::{Parser, Subcommand};
use floodgate_client::room::{self, Dial};

#[derive(Parser)]
#[command(name = "floodgate-loadgen", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Open many sessions, then hold them idle: memory per connection, the gateway's and this
    /// process's own.
    Idle(idle::IdleArgs),
    /// Publish synthetic reservation events (a SeatReserved per reservation, and a
    /// PaymentConfirmed for every other one) to a topic on a loopback broker.
    Publish(publish::PublishArgs),
    /// Hold many sessions: join rate, gateway memory per connection, and the time one frontier
    /// change takes to reach every client.
    Queue(queue::QueueArgs),
    /// Many joins inside one window, as at the opening: how long each waits for its ticket.
    Burst(burst::BurstArgs),
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
    /// A sale on a virtual clock: what the machines will do for a crowd, and the fleet (and the
    /// kustomize patch) to run it, calibrated on a benchmark run.
    Simulate(simulate::SimulateArgs),
    /// Rewrite the generated part of docs/capacity.md: the plan for two million people and the
    /// simulator's validation, from the committed benchmark runs (or the two named).
    Capacity {
        #[arg(long, default_value = "docs/capacity.md")]
        into: std::path::PathBuf,
        /// The run that checks the model (a results folder or figures' JSON).
        #[arg(long)]
        a: Option<std::path::PathBuf>,
        /// The run that calibrates the plan.
        #[arg(long)]
        b: Option<std::path::PathBuf>,
    },
    /// The stranger's half of a hostile rush: each attack at a fixed rate, from addresses of its
    /// own, beside a `sale` run (deploy/bench.sh hostile).
    Hostile(hostile::HostileArgs),
    /// A saturated Redis for a benchmark's fault: a proxy letting through at most so many
    /// replies a second.
    Fault(fault::FaultArgs),
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // Secret settings may come from files (`<VAR>_FILE`), as container platforms mount them.
    let cli: Cli = floodgate_platform::secret_files::parse_with_secret_files();
    floodgate_platform::runtime::install_tls_provider();
    match cli.command {
        Command::Idle(args) => exit_on_failure(idle::run(args).await?),
        Command::Publish(args) => publish::publish(args).await,
        Command::Queue(args) => exit_on_failure(queue::queue(args).await?),
        Command::Burst(args) => exit_on_failure(burst::burst(args).await?),
        Command::Sale(args) => exit_on_failure(sale::run(args).await?),
        Command::Reserve(args) => exit_on_failure(reserve::run(args).await?),
        Command::Naive(args) => exit_on_failure(naive::run(args).await?),
        Command::Poll(args) => exit_on_failure(poll::run(args).await?),
        Command::Markdown { results, into } => markdown::run(&results, &into),
        Command::Fault(args) => fault::run(args).await,
        Command::Hostile(args) => exit_on_failure(hostile::run(args).await?),
        Command::Simulate(args) => simulate::run(args),
        Command::Capacity { into, a, b } => simulate::capacity::run(&into, a.as_ref(), b.as_ref()),
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
    let limit = floodgate_platform::runtime::raise_open_files_limit();
    if sockets + 256 > limit {
        bail!("{sockets} sockets need more than the open-files limit ({limit}): run several processes");
    }
    Ok(())
}

/// One HTTP client per source address, each sending from it: the services' per-address
/// allowances then see requests from the addresses they came from. Pooled connections idle at
/// most `floodgate_platform::outbound::POOL_IDLE`, under the services' idle cut.
fn clients_from(
    sources: &[IpAddr],
    timeout: std::time::Duration,
) -> anyhow::Result<Vec<reqwest::Client>> {
    let client = |ip: &IpAddr| {
        floodgate_platform::outbound::client()
            .local_address(*ip)
            .pool_max_idle_per_host(1024)
            .timeout(timeout)
            .build()
    };
    Ok(sources.iter().map(client).collect::<Result<Vec<_>, _>>()?)
}

/// A scenario that ran but found something wrong (an invariant broken, clients that could not
/// join) exits with status 2, after its report.
fn exit_on_failure(ok: bool) -> anyhow::Result<()> {
    if !ok {
        std::process::exit(2);
    }
    Ok(())
}

/// One connection from `source` to `sale`'s room on `gateway`, upgraded, its ticket read.
async fn session(
    source: IpAddr,
    gateway: SocketAddr,
    sale: &str,
) -> anyhow::Result<floodgate_client::room::Socket> {
    let dial = Dial {
        gateway,
        sale,
        resume: None,
        from: Some(source),
        headers: &[],
        challenge: None,
    };
    Ok(room::join(&dial).await?.0)
}
