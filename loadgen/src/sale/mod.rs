//! `floodgate-loadgen sale`: the whole rush, end to end, and a check of its invariants.
//!
//! Each simulated person joins the waiting room on one of the gateways, waits, gets admitted,
//! tries the pools in a random order until a reservation is held (or every pool refuses), then
//! pays through the sandbox provider or walks away and lets the hold expire. When everyone is
//! done and every hold has settled, the run checks what must hold whatever the load:
//!
//! - no oversell: in Redis every pool's `avail + held + sold` equals its capacity, and in
//!   PostgreSQL the confirmed seats are those Redis sold, never more than the capacity;
//! - every 201 is durable: each reservation a client was told it holds is in PostgreSQL, with
//!   the outcome the client caused (paid: confirmed; walked away: expired);
//! - admission in order: sorted by place in line, admission batches never go backwards, and
//!   nobody still waiting was passed over;
//! - nobody was turned away while a seat was left.

mod checks;
mod person;
mod reads;

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use serde_json::{json, Value};

pub use checks::{check_counters, check_order, check_persisted, check_served, settled, Check};
pub use person::{Outcome, Person};

use person::{person, Progress};
pub use reads::PoolCounters;
use reads::{bookings, placed_order, pool_counters};

use crate::report::{Latencies, Table};

/// What to run: `floodgate-loadgen sale --help` documents each.
#[derive(Clone, Debug, clap::Args)]
pub struct SaleArgs {
    /// Gateways (loopback), comma-separated; clients are spread over them in turn.
    #[arg(long, value_delimiter = ',', default_value = "127.0.0.1:8080")]
    pub gateways: Vec<SocketAddr>,
    /// The booking API.
    #[arg(long, default_value = "127.0.0.1:8081")]
    pub booking: SocketAddr,
    /// The sandbox payment provider.
    #[arg(long, default_value = "127.0.0.1:8082")]
    pub sandbox: SocketAddr,
    /// The sale (created and armed beforehand, e.g. from deploy/sales/bench.toml).
    #[arg(long)]
    pub sale: String,
    /// People in the rush.
    #[arg(long, default_value_t = 2_000)]
    pub clients: u64,
    /// Local addresses to connect from, comma-separated.
    #[arg(long, default_value = "127.0.0.1", value_delimiter = ',')]
    pub from: Vec<IpAddr>,
    /// Joins in flight at once (the shape of the arrival burst).
    #[arg(long, default_value_t = 500)]
    pub concurrency: usize,
    /// Share of the people holding seats who pay; the others walk away and the hold expires.
    #[arg(long, default_value_t = 0.7)]
    pub pay_ratio: f64,
    /// The most seats one person asks for (each asks for 1 to this many, capped by the sale).
    #[arg(long, default_value_t = 2)]
    pub seats: u32,
    /// The sandbox's sign-in stand-in (`host:port`): every person signs in there first, as
    /// `<sale>-<n>`, and joins and books as that buyer (needed for a sale that requires
    /// identity). People solve the sale's proof of work whenever its door asks for one.
    #[arg(long)]
    pub signin: Option<SocketAddr>,
    /// PostgreSQL, where the consumer writes bookings (checked at the end).
    #[arg(long, env = "FLOODGATE_DATABASE_URL")]
    pub database_url: String,
    /// Redis, where the seats are decided (checked at the end), and the services' key prefix.
    #[command(flatten)]
    pub redis: floodgate_platform::runtime::RedisArgs,
    /// How long each person thinks between admission and their first reservation request, in
    /// milliseconds (each draws 0.5x to 1.5x of it): a change of the admission rate then reaches
    /// the booking service only that much later, as with people choosing seats.
    #[arg(long, default_value_t = 0)]
    pub think_ms: u64,
    /// How long the whole run may take before it gives up, in seconds.
    #[arg(long, default_value_t = 600)]
    pub timeout_secs: u64,
    /// Also write the report as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

pub async fn run(args: SaleArgs) -> anyhow::Result<bool> {
    if args.gateways.is_empty() || args.from.is_empty() {
        bail!("name at least one gateway and one source address");
    }
    let gateways = args.gateways.iter().map(SocketAddr::ip);
    crate::loopback_only(
        gateways
            .chain([args.booking.ip(), args.sandbox.ip()])
            .chain(args.from.iter().copied()),
    )?;
    crate::room_for(args.clients)?;
    let db = sqlx::PgPool::connect(&args.database_url)
        .await
        .context("PostgreSQL")?;
    let pools: Vec<(String, i32)> =
        sqlx::query_as("select id, capacity from pools where sale_id = $1 order by id")
            .bind(&args.sale)
            .fetch_all(&db)
            .await?;
    if pools.is_empty() {
        bail!("the catalog has no sale {} (or it has no pools)", args.sale);
    }
    // A person's requests leave from the address its socket does, as a real crowd's do.
    let clients = crate::clients_from(&args.from, Duration::from_secs(30))?;
    let http = clients[0].clone();
    let clients = Arc::new(clients);
    let progress = Arc::new(Progress::default());
    let pool_ids: Arc<Vec<String>> = Arc::new(pools.iter().map(|(id, _)| id.clone()).collect());
    let args = Arc::new(args);
    // When the sale opens, against the run's start: what the simulator's validation replays
    // (`floodgate-loadgen simulate`), since people who join early wait for it.
    let opens_at_ms: i64 = sqlx::query_scalar(
        "select (extract(epoch from opens_at) * 1000)::bigint from sales where id = $1",
    )
    .bind(&args.sale)
    .fetch_one(&db)
    .await?;
    let started = Instant::now();
    let started_ms = floodgate_protocol::now_millis();

    let reporter = tokio::spawn(report_progress(progress.clone(), args.clients, started));
    let deadline = Duration::from_secs(args.timeout_secs);
    let people = everyone(&args, &clients, &progress, &pool_ids, deadline).await;
    let all_done = started.elapsed();
    reporter.abort();

    // Let the last holds lapse (the reaper expires them) and the consumer catch up.
    let (counters, rows) = settle(&args, &db, &pools, &people, deadline).await?;
    let settled_after = started.elapsed();

    let order = placed_order(&http, &args.gateways, &args.sale, &people).await?;
    let checks = vec![
        check_counters(&counters),
        check_persisted(&counters, &rows, &people),
        check_order(&order),
        check_served(&counters, &people),
    ];
    let times = Times {
        started_ms,
        opens_at_ms,
        all_done,
        settled: settled_after,
    };
    let report = report(&args, &people, &checks, &times, &counters);
    print_report(&report, &checks, &people);
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_vec_pretty(&report)?)?;
    }
    Ok(checks.iter().all(|c| c.ok))
}

/// A progress line a second on stderr, until aborted.
async fn report_progress(progress: Arc<Progress>, total: u64, started: Instant) {
    let mut every = tokio::time::interval(Duration::from_secs(1));
    every.tick().await;
    loop {
        every.tick().await;
        let n = |c: &AtomicU64| c.load(Ordering::Relaxed);
        eprintln!(
            "[{:>4.0}s] joined {}/{total}  admitted {}  held {}  paid {}  sold out {}  failed {}",
            started.elapsed().as_secs_f64(),
            n(&progress.joined),
            n(&progress.admitted),
            n(&progress.held),
            n(&progress.paid),
            n(&progress.sold_out),
            n(&progress.failed),
        );
    }
}

/// Everyone's run. Everyone arrives at once; only so many joins are in flight at a time (the
/// shape of the burst), and each person then lives in a task of its own.
async fn everyone(
    args: &Arc<SaleArgs>,
    clients: &Arc<Vec<reqwest::Client>>,
    progress: &Arc<Progress>,
    pool_ids: &Arc<Vec<String>>,
    deadline: Duration,
) -> Vec<Person> {
    let joining = Arc::new(tokio::sync::Semaphore::new(args.concurrency.max(1)));
    let tasks: Vec<_> = (0..args.clients)
        .map(|i| {
            let from = i as usize % args.from.len();
            let (args, http, progress, pool_ids, joining) = (
                args.clone(),
                clients[from].clone(),
                progress.clone(),
                pool_ids.clone(),
                joining.clone(),
            );
            tokio::spawn(async move {
                let source = args.from[from];
                let gateway = i as usize % args.gateways.len();
                let run = person(
                    &args, &http, &progress, &pool_ids, &joining, source, gateway,
                );
                match tokio::time::timeout(deadline, run).await {
                    Ok(person) => person,
                    Err(_) => Person::failed(0, "timed out"),
                }
            })
        })
        .collect();
    let mut people = Vec::with_capacity(tasks.len());
    for task in tasks {
        people.push(
            task.await
                .unwrap_or_else(|e| Person::failed(0, &e.to_string())),
        );
    }
    people
}

/// Waits (at most `deadline`) until the sale has settled: the last holds lapsed and the
/// consumer caught up. The counters and rows as they then are.
async fn settle(
    args: &SaleArgs,
    db: &sqlx::PgPool,
    pools: &[(String, i32)],
    people: &[Person],
    deadline: Duration,
) -> anyhow::Result<(Vec<PoolCounters>, Vec<reads::Row>)> {
    let keys = args.redis.keys().map_err(anyhow::Error::msg)?;
    let mut redis = redis::Client::open(args.redis.redis_url.as_str())?
        .get_multiplexed_async_connection()
        .await
        .context("Redis")?;
    let expected: Vec<&Person> = people.iter().filter(|p| p.reservation.is_some()).collect();
    let settle_deadline = Instant::now() + deadline;
    loop {
        let counters = pool_counters(&mut redis, &keys, &args.sale, pools).await?;
        let rows = bookings(db, &args.sale).await?;
        if settled(&counters, &rows, &expected) || Instant::now() >= settle_deadline {
            return Ok((counters, rows));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// When the run started (Unix ms), and how long until everyone finished and until it settled.
struct Times {
    started_ms: i64,
    opens_at_ms: i64,
    all_done: Duration,
    settled: Duration,
}

fn report(
    args: &SaleArgs,
    people: &[Person],
    checks: &[Check],
    times: &Times,
    counters: &[PoolCounters],
) -> Value {
    // The last hold answered: the seats were gone (held or sold) by then.
    let last_hold_s = people
        .iter()
        .filter_map(|p| p.held_at_ms)
        .max()
        .map(|at| (at - times.started_ms) as f64 / 1_000.0);
    let count = |f: fn(&Outcome) -> bool| people.iter().filter(|p| f(&p.outcome)).count();
    let admitted = Latencies::of(people.iter().filter_map(|p| p.admitted_after));
    let reserve = Latencies::of(people.iter().filter_map(|p| p.reserve_latency));
    let failures: Vec<&str> = people
        .iter()
        .filter_map(|p| match &p.outcome {
            Outcome::Failed(why) => Some(why.as_str()),
            _ => None,
        })
        .take(5)
        .collect();
    let mut failures_by_kind = std::collections::BTreeMap::<&str, usize>::new();
    for p in people {
        if let Outcome::Failed(why) = &p.outcome {
            *failures_by_kind.entry(failure_kind(why)).or_default() += 1;
        }
    }
    json!({
        "scenario": "sale",
        "sale": args.sale,
        "clients": args.clients,
        "gateways": args.gateways.len(),
        "pay_ratio": args.pay_ratio,
        "outcomes": {
            "paid": count(|o| *o == Outcome::Paid),
            "walked_away": count(|o| *o == Outcome::WalkedAway),
            "sold_out_while_waiting": count(|o| *o == Outcome::SoldOut),
            "nothing_left_when_admitted": count(|o| *o == Outcome::NothingLeft),
            "failed": count(|o| matches!(o, Outcome::Failed(_))),
        },
        "first_failures": failures,
        "failures_by_kind": failures_by_kind,
        "think_ms": args.think_ms,
        "seconds_until_opening": (times.opens_at_ms - times.started_ms) as f64 / 1_000.0,
        "seconds_until_last_hold": last_hold_s,
        "seconds_until_everyone_finished": times.all_done.as_secs_f64(),
        "seconds_until_settled": times.settled.as_secs_f64(),
        "join_to_admission_ms": admitted,
        "reserve_ms": reserve,
        "pools": counters,
        "checks": checks,
    })
}

/// What a failure was, without its particulars: the step and the first words of the answer
/// (`pay: 503 payment_provider_unavailable`, `reserve: no usable answer`), so that a run's
/// failures can be counted by cause.
fn failure_kind(why: &str) -> &str {
    match why.match_indices(": ").nth(1) {
        Some((end, _)) => &why[..end],
        None => why,
    }
}

fn print_report(report: &Value, checks: &[Check], people: &[Person]) {
    let mut table = Table::new(&["figure", "value"]);
    table.row(&["clients".into(), people.len().to_string()]);
    for (name, value) in report["outcomes"].as_object().into_iter().flatten() {
        table.row(&[name.replace('_', " "), value.to_string()]);
    }
    table.row(&[
        "everyone finished after".into(),
        format!(
            "{:.1} s",
            report["seconds_until_everyone_finished"]
                .as_f64()
                .unwrap_or(0.0)
        ),
    ]);
    table.row(&[
        "join to admission p50 / p99 / max".into(),
        Latencies::describe(&report["join_to_admission_ms"]),
    ]);
    table.row(&[
        "reserve p50 / p99 / max".into(),
        Latencies::describe(&report["reserve_ms"]),
    ]);
    // Why people failed, by kind: what a failing run's reader needs first.
    for (kind, n) in report["failures_by_kind"].as_object().into_iter().flatten() {
        table.row(&[format!("failed: {kind}"), n.to_string()]);
    }
    println!("{table}");
    let mut verdicts = Table::new(&["invariant", "holds", "detail"]);
    for c in checks {
        verdicts.row(&[
            c.name.into(),
            if c.ok { "yes" } else { "NO" }.into(),
            c.detail.clone(),
        ]);
    }
    println!("{verdicts}");
}

#[cfg(test)]
mod tests {
    use super::failure_kind;

    #[test]
    fn a_failure_is_counted_by_its_step_and_answer_not_its_particulars() {
        assert_eq!(
            failure_kind("pay: 503 payment_provider_unavailable: retry shortly"),
            "pay: 503 payment_provider_unavailable"
        );
        assert_eq!(
            failure_kind("reserve: no usable answer: error sending request for url (http://x/)"),
            "reserve: no usable answer"
        );
        assert_eq!(failure_kind("door: timed out"), "door: timed out");
        assert_eq!(failure_kind("gave up"), "gave up");
    }
}
