//! `floodgate-loadgen idle`: many people waiting in line, then held idle (answering pings), the
//! measure of a gateway's memory per idle connection (BENCHMARKS.md, `deploy/bench-idle.sh`).
//! Each person is the client crate's whole wait in line ([`crate::waits`]); the process also
//! reports its own resident memory per session, so a load test can be sized (one loadgen
//! process holds at most the open-files limit of sessions). With `--freshness` it also measures
//! how stale each client's shown position ever is against the truth ([`crate::freshness`]).

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::freshness::Measure;
use crate::waits::{self, Plan, Seen};

#[derive(Clone, Debug, clap::Args)]
pub struct IdleArgs {
    /// Gateway address (loopback only).
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub gateway: SocketAddr,
    /// The sale to join.
    #[arg(long)]
    pub sale: String,
    /// Sessions to open.
    #[arg(long, default_value_t = 1_000)]
    pub connections: u64,
    /// Local addresses to connect from, comma-separated (several 127.0.0.x spread the
    /// ephemeral ports and the gateway's per-address limits).
    #[arg(long, default_value = "127.0.0.1", value_delimiter = ',')]
    pub from: Vec<IpAddr>,
    /// Connections being opened at once.
    #[arg(long, default_value_t = 200)]
    pub concurrency: usize,
    /// How long to hold the sessions once all are open.
    #[arg(long, default_value_t = 30)]
    pub hold_secs: u64,
    /// Also write the figures as JSON to this file.
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
    /// Measure how stale each client's shown position ever is against the frontier read from
    /// Redis (docs/protocol.md, the freshness contract). For a sale everyone here joined after
    /// its opening and nobody else did: a ticket's place is then its number.
    #[arg(long)]
    pub freshness: bool,
    /// With `--freshness`: the truth compared is the frontier as it was this long earlier (the
    /// gateway's tick, and the time a message takes to arrive on a busy machine).
    #[arg(long, default_value_t = 250)]
    pub lag_ms: u64,
    /// Redis (with `--freshness`), and the services' key prefix.
    #[command(flatten)]
    pub redis: floodgate_platform::runtime::RedisArgs,
}

/// How long the sessions sit before this process reads its own memory: the first pre-queue
/// messages and the allocator settle (the gateway's own figure waits as long, in bench-idle.sh).
const SETTLE: Duration = Duration::from_secs(5);

/// Opens the sessions and holds them; `false` when any did not get a ticket.
pub async fn run(args: IdleArgs) -> anyhow::Result<bool> {
    crate::loopback_only(std::iter::once(args.gateway.ip()).chain(args.from.iter().copied()))?;
    crate::room_for(args.connections)?;
    let rss_before = crate::report::rss(&[std::process::id()]);
    let started = Instant::now();
    let plan = Plan {
        gateways: &[args.gateway],
        from: &args.from,
        sale: &args.sale,
        people: args.connections,
        concurrency: args.concurrency,
    };
    let mut measure = if args.freshness {
        Some(Measure::start(&args.redis, &args.sale, args.lag_ms).await?)
    } else {
        None
    };
    // Only when measured: the idle figures include what a session costs this process.
    let people = waits::wait_many(&plan, |_| {
        let mut watch = measure.as_mut().map(Measure::watch);
        move |seen: Seen<'_>| {
            if let Some(watch) = &mut watch {
                watch(seen);
            }
        }
    })
    .await;
    let (open, failed) = (people.open, args.connections - people.open);
    let open_secs = started.elapsed().as_secs_f64();
    tokio::time::sleep(SETTLE).await;
    let rss_after = crate::report::rss(&[std::process::id()]);
    let per_session = match (rss_before, rss_after) {
        (Some(before), Some(after)) if open > 0 => {
            Some(after.saturating_sub(before) as f64 * 1024.0 / open as f64)
        }
        _ => None,
    };
    // The first line is what deploy/bench-idle.sh waits for.
    println!(
        "open={open} failed={failed} in {open_secs:.1} s; holding for {} s",
        args.hold_secs
    );
    if let Some(bytes) = per_session {
        println!(
            "loadgen memory per session: {:.2} KB ({bytes:.0} bytes)",
            bytes / 1000.0
        );
    }
    if let Some(path) = &args.json {
        let report = json!({
            "scenario": "idle",
            "connections": args.connections,
            "open": open,
            "failed": failed,
            "reconnects": people.reconnects(),
            "seconds_to_open": open_secs,
            "loadgen_rss_kib_before": rss_before,
            "loadgen_rss_kib_after": rss_after,
            "loadgen_bytes_per_session": per_session,
        });
        std::fs::write(path, serde_json::to_vec_pretty(&report)?)?;
    }
    tokio::time::sleep(Duration::from_secs(args.hold_secs)).await;
    if let Some(measure) = &measure {
        let summary = measure.finish();
        println!("freshness: {summary}");
        if let Some(path) = &args.json {
            let mut report: serde_json::Value = serde_json::from_slice(&std::fs::read(path)?)?;
            report["freshness"] = summary;
            std::fs::write(path, serde_json::to_vec_pretty(&report)?)?;
        }
    }
    Ok(failed == 0)
}
