//! `floodgate-loadgen queue`: the waiting room's own figures (`burst` is beside it, in
//! `burst.rs`).
//!
//! `queue` opens N sessions and holds them, reporting the join rate, the gateways' memory per
//! connection (given their process ids) and, given the ops API, the fan-out: the time for one
//! admission change to reach every client. For the fan-out the sale must be open and paused, so
//! nothing moves until the change: at the agreed instant one process resumes admission and
//! every client notes when the change reaches it (its position with an ETA again: a resume is
//! never delayed, by the freshness contract; or its admission). Several processes measure one change together when given the same
//! `--change-at-unix-ms` (only one of them with `--trigger`): the wall clock is the shared one.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context as _};
use floodgate_client::room::{RoomEvent, Waited};
use serde_json::{json, Value};

use crate::report::{rss, Cpu, Latencies, Table};
use crate::waits::{self, Plan, Seen, Waits};

/// Where the clients go and come from.
#[derive(Clone, Debug, clap::Args)]
pub struct Crowd {
    /// Gateways (loopback), comma-separated; clients are spread over them in turn.
    #[arg(long, value_delimiter = ',', default_value = "127.0.0.1:8080")]
    pub gateways: Vec<SocketAddr>,
    /// The sale to join.
    #[arg(long)]
    pub sale: String,
    /// Clients (sessions) in this process.
    #[arg(long, default_value_t = 1_000)]
    pub clients: u64,
    /// Local addresses to connect from, comma-separated.
    #[arg(long, default_value = "127.0.0.1", value_delimiter = ',')]
    pub from: Vec<IpAddr>,
    /// Also write the report as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

impl Crowd {
    pub fn check(&self) -> anyhow::Result<()> {
        if self.gateways.is_empty() || self.from.is_empty() {
            bail!("name at least one gateway and one source address");
        }
        let gateways = self.gateways.iter().map(SocketAddr::ip);
        crate::loopback_only(gateways.chain(self.from.iter().copied()))?;
        crate::room_for(self.clients)
    }

    /// Client `i`'s local address and gateway.
    pub fn target(&self, i: u64) -> (IpAddr, SocketAddr) {
        (
            self.from[i as usize % self.from.len()],
            self.gateways[i as usize % self.gateways.len()],
        )
    }
}

#[derive(Clone, Debug, clap::Args)]
pub struct QueueArgs {
    #[command(flatten)]
    pub crowd: Crowd,
    /// Joins in flight at once.
    #[arg(long, default_value_t = 200)]
    pub concurrency: usize,
    /// Gateway process ids (comma-separated) whose resident memory to measure.
    #[arg(long, value_delimiter = ',')]
    pub gateway_pids: Vec<u32>,
    /// The ops API (admin listener); with it, measure the fan-out of one frontier change.
    #[arg(long)]
    pub ops: Option<SocketAddr>,
    #[arg(long, env = "FLOODGATE_OPS_TOKEN", hide_env_values = true)]
    pub ops_token: Option<String>,
    /// The instant of the change (Unix ms), shared by every process of one measurement;
    /// default: as soon as this process's clients are all in place.
    #[arg(long)]
    pub change_at_unix_ms: Option<u64>,
    /// This process makes the change (resumes admission) at that instant. On by default when
    /// no instant is given.
    #[arg(long)]
    pub trigger: bool,
    /// How long to hold the sessions after the measurements, in seconds.
    #[arg(long, default_value_t = 0)]
    pub hold_secs: u64,
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// One client waiting in line: when it first heard something at or after the change (Unix ms;
/// `UNSET` until then).
struct Listener {
    reached: Arc<AtomicU64>,
}

/// How many listeners have been placed and have heard the change: counted as they happen, so
/// waiting for everyone reads two numbers, not every client's slots (that scan would compete
/// for the CPU with the very messages being timed).
#[derive(Default)]
struct Tally {
    placed: AtomicU64,
    reached: AtomicU64,
}

const UNSET: u64 = 0;

pub async fn queue(args: QueueArgs) -> anyhow::Result<bool> {
    args.crowd.check()?;
    let rss_before = rss(&args.gateway_pids);
    // The instant of the change, once known (0: not yet). Set before any message can be late.
    let change_at = Arc::new(AtomicU64::new(args.change_at_unix_ms.unwrap_or(UNSET)));
    let tally = Arc::new(Tally::default());
    let (started, cpu) = (Instant::now(), Cpu::now());
    let (people, listeners, failed) = open_listeners(&args, &change_at, &tally).await;
    let open_secs = started.elapsed().as_secs_f64();
    let open = people.open;
    eprintln!("open {open} (failed {failed}) in {open_secs:.1} s");

    // Everyone in place: each has heard its ticket and a position (or the pre-queue size).
    let placed = wait_for(&tally.placed, open, Duration::from_secs(60)).await;
    let opening_cpu = cpu.since();
    eprintln!("placed {placed}/{open}");
    // Let the allocator and the first position messages settle before reading memory.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss_after = rss(&args.gateway_pids);
    let fan_out = match args.ops {
        Some(ops) => Some(fan_out(&args, ops, (&change_at, &tally), &listeners, open).await?),
        None => None,
    };
    let per_connection = match (rss_before, rss_after) {
        (Some(before), Some(after)) if open > 0 => {
            Some((after.saturating_sub(before)) as f64 * 1024.0 / open as f64)
        }
        _ => None,
    };
    let report = json!({
        "scenario": "queue",
        "sale": args.crowd.sale,
        "clients": args.crowd.clients,
        "open": open,
        "failed": failed,
        "placed": placed,
        "seconds_to_open": open_secs,
        "joins_per_second": open as f64 / open_secs.max(1e-9),
        "gateway_rss_kib_before": rss_before,
        "gateway_rss_kib_after": rss_after,
        "gateway_bytes_per_connection": per_connection,
        "fan_out": fan_out,
        "reconnects": people.reconnects(),
        "loadgen_cpu_opening": opening_cpu,
    });
    print_queue_report(&args, &report, per_connection)?;
    if args.hold_secs > 0 {
        tokio::time::sleep(Duration::from_secs(args.hold_secs)).await;
    }
    drop(people);
    Ok(failed == 0)
}

/// Starts every client's wait in line, at most `concurrency` joins at a time, each watched by a
/// listener: the people, their listeners, and how many did not get a ticket.
async fn open_listeners(
    args: &QueueArgs,
    change_at: &Arc<AtomicU64>,
    tally: &Arc<Tally>,
) -> (Waits, Vec<Listener>, u64) {
    let plan = Plan {
        gateways: &args.crowd.gateways,
        from: &args.crowd.from,
        sale: &args.crowd.sale,
        people: args.crowd.clients,
        concurrency: args.concurrency,
    };
    let mut listeners = Vec::with_capacity(args.crowd.clients as usize);
    let people = waits::wait_many(&plan, |_| {
        let listener = Listener {
            reached: Arc::new(AtomicU64::new(UNSET)),
        };
        let watch = listen(listener.reached.clone(), change_at.clone(), tally.clone());
        listeners.push(listener);
        watch
    })
    .await;
    let failed = args.crowd.clients - people.open;
    (people, listeners, failed)
}

/// Waits for the agreed instant, makes the change (if this process triggers it), and times
/// how long it takes to reach every listener.
async fn fan_out(
    args: &QueueArgs,
    ops: SocketAddr,
    (change_at, tally): (&AtomicU64, &Tally),
    listeners: &[Listener],
    open: u64,
) -> anyhow::Result<Value> {
    let at = match args.change_at_unix_ms {
        Some(at) => at,
        None => {
            let at = unix_ms();
            change_at.store(at, Ordering::SeqCst);
            at
        }
    };
    let trigger = args.trigger || args.change_at_unix_ms.is_none();
    // Placed after the agreed instant: the figure would include this process's own lateness.
    let missed = unix_ms() > at + 50;
    if let Some(wait) = at.checked_sub(unix_ms()) {
        tokio::time::sleep(Duration::from_millis(wait)).await;
    }
    let cpu = Cpu::now();
    if trigger {
        resume(
            ops,
            args.ops_token.as_deref().unwrap_or_default(),
            &args.crowd.sale,
        )
        .await?;
    }
    let reached = wait_for(&tally.reached, open, Duration::from_secs(30)).await;
    let reading_cpu = cpu.since();
    // What deploy/bench.sh waits for before it reads the servers' CPU (the sessions are still
    // open: their closing is not part of the change).
    eprintln!("fan-out measured: {reached} of {open} reached");
    // Every client's delay, so several processes' figures can be merged into one.
    let samples: Vec<u64> = listeners
        .iter()
        .map(|l| l.reached.load(Ordering::Relaxed))
        .filter(|t| *t != UNSET)
        .map(|t| t.saturating_sub(at))
        .collect();
    Ok(json!({
        "reached": reached,
        "missed_the_instant": missed,
        "ms": Latencies::of(samples.iter().map(|ms| Duration::from_millis(*ms))),
        "samples_ms": samples,
        "loadgen_cpu": reading_cpu,
    }))
}

fn print_queue_report(
    args: &QueueArgs,
    report: &Value,
    per_connection: Option<f64>,
) -> anyhow::Result<()> {
    let open = report["open"].as_u64().unwrap_or(0);
    let mut table = Table::new(&["figure", "value"]);
    table.row(&[
        "sessions open".into(),
        format!("{open} of {}", args.crowd.clients),
    ]);
    table.row(&[
        "join rate".into(),
        format!(
            "{:.0} joins/s",
            report["joins_per_second"].as_f64().unwrap_or(0.0)
        ),
    ]);
    if let Some(bytes) = per_connection {
        table.row(&[
            "gateway memory per connection".into(),
            format!("{:.2} KB", bytes / 1000.0),
        ]);
    }
    if let Some(f) = report["fan_out"].as_object() {
        table.row(&[
            "clients reached by the change".into(),
            f["reached"].to_string(),
        ]);
        table.row(&[
            "change to client p50 / p99 / max".into(),
            Latencies::describe(&f["ms"]),
        ]);
    }
    println!("{table}");
    if let Some(path) = &args.crowd.json {
        std::fs::write(path, serde_json::to_vec_pretty(&report)?)?;
    }
    Ok(())
}

/// One client's watcher: notes when it was placed and when it first heard the change at or after
/// its instant: the resume of a paused room, which every client hears at once (a position whose
/// ETA is known again, or its admission). A heartbeat in between (a position still without an
/// ETA) is not the change.
fn listen(
    reached: Arc<AtomicU64>,
    change_at: Arc<AtomicU64>,
    tally: Arc<Tally>,
) -> impl FnMut(Seen<'_>) + Send + 'static {
    let mut placed = false;
    move |seen| {
        let (heard, resumed) = match seen {
            Seen::Event(RoomEvent::Position { eta_secs, .. }) => (true, eta_secs.is_some()),
            Seen::Event(RoomEvent::PreQueue { .. }) => (true, false),
            Seen::Ended(Waited::Admitted(_)) => (true, true),
            _ => (false, false),
        };
        if !heard {
            return;
        }
        let now = unix_ms();
        if !placed {
            placed = true;
            tally.placed.fetch_add(1, Ordering::Relaxed);
        }
        let at = change_at.load(Ordering::SeqCst);
        if resumed && at != UNSET && now >= at && reached.load(Ordering::Relaxed) == UNSET {
            reached.store(now, Ordering::Relaxed);
            tally.reached.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Waits until `count` reaches `total`, or `timeout`; the count then.
async fn wait_for(count: &AtomicU64, total: u64, timeout: Duration) -> u64 {
    let deadline = Instant::now() + timeout;
    loop {
        let done = count.load(Ordering::Relaxed);
        if done >= total || Instant::now() >= deadline {
            return done;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn resume(ops: SocketAddr, token: &str, sale: &str) -> anyhow::Result<()> {
    crate::loopback_only([ops.ip()])?;
    let response = floodgate_platform::outbound::client()
        .build()?
        .post(format!("http://{ops}/admin/v1/sales/{sale}/resume"))
        .bearer_auth(token)
        .send()
        .await
        .context("the ops API")?;
    if !response.status().is_success() {
        bail!(
            "resume refused: {} {}",
            response.status(),
            response.text().await?
        );
    }
    Ok(())
}
