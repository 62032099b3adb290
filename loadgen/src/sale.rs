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

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use base64::Engine as _;
use floodgate_contract::api::room::DrawRecord;
use floodgate_contract::keys::Keys;
use floodgate_contract::state::PoolCounts;
use floodgate_contract::token::AdmissionClaims;
use floodgate_contract::ws::ServerMessage;
use futures::StreamExt;
use rand::seq::SliceRandom;
use rand::Rng;
use serde::Serialize;
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

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
    /// PostgreSQL, where the consumer writes bookings (checked at the end).
    #[arg(long, env = "FLOODGATE_DATABASE_URL")]
    pub database_url: String,
    /// Redis, where the seats are decided (checked at the end), and the services' key prefix.
    #[command(flatten)]
    pub redis: floodgate_contract::runtime::RedisArgs,
    /// How long the whole run may take before it gives up, in seconds.
    #[arg(long, default_value_t = 600)]
    pub timeout_secs: u64,
    /// Also write the report as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// What became of one person.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Told the sale was sold out while waiting.
    SoldOut,
    /// Admitted, but every pool refused (sold out) before a hold was taken.
    NothingLeft,
    /// Held seats and paid.
    Paid,
    /// Held seats and walked away.
    WalkedAway,
    /// Something went wrong (connection, an unexpected answer): counted, never hidden.
    Failed(String),
}

/// One person's run.
#[derive(Clone, Debug, Serialize)]
pub struct Person {
    pub ticket: u64,
    pub prequeue: bool,
    /// The admission batch's expiry (`exp_ms` of the token): equal within a batch, rising
    /// from one batch to the next.
    pub batch: Option<i64>,
    pub outcome: Outcome,
    /// The reservation the booking API answered 201 for: id, pool, seats.
    pub reservation: Option<(String, String, u32)>,
    #[serde(skip)]
    admitted_after: Option<Duration>,
    #[serde(skip)]
    reserve_latency: Option<Duration>,
}

/// Live counts for the progress line.
#[derive(Default)]
struct Progress {
    joined: AtomicU64,
    admitted: AtomicU64,
    held: AtomicU64,
    paid: AtomicU64,
    sold_out: AtomicU64,
    failed: AtomicU64,
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
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(1024)
        .timeout(Duration::from_secs(30))
        .build()?;
    let progress = Arc::new(Progress::default());
    let pool_ids: Arc<Vec<String>> = Arc::new(pools.iter().map(|(id, _)| id.clone()).collect());
    let args = Arc::new(args);
    let started = Instant::now();

    let reporter = {
        let (progress, total) = (progress.clone(), args.clients);
        tokio::spawn(async move {
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
        })
    };

    let deadline = Duration::from_secs(args.timeout_secs);
    // Everyone arrives at once; only so many joins are in flight at a time (the shape of the
    // burst), and each person then lives in a task of its own.
    let joining = Arc::new(tokio::sync::Semaphore::new(args.concurrency.max(1)));
    let tasks: Vec<_> = (0..args.clients)
        .map(|i| {
            let (args, http, progress, pool_ids, joining) = (
                args.clone(),
                http.clone(),
                progress.clone(),
                pool_ids.clone(),
                joining.clone(),
            );
            tokio::spawn(async move {
                let source = args.from[i as usize % args.from.len()];
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
    let all_done = started.elapsed();
    reporter.abort();

    // Let the last holds lapse (the reaper expires them) and the consumer catch up.
    let keys = args.redis.keys().map_err(anyhow::Error::msg)?;
    let mut redis = redis::Client::open(args.redis.redis_url.as_str())?
        .get_multiplexed_async_connection()
        .await
        .context("Redis")?;
    let expected: Vec<&Person> = people.iter().filter(|p| p.reservation.is_some()).collect();
    let settle_deadline = Instant::now() + deadline;
    let (counters, rows) = loop {
        let counters = pool_counters(&mut redis, &keys, &args.sale, &pools).await?;
        let rows = bookings(&db, &args.sale).await?;
        if settled(&counters, &rows, &expected) || Instant::now() >= settle_deadline {
            break (counters, rows);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let settled_after = started.elapsed();

    let order = placed_order(&http, &args.gateways, &args.sale, &people).await?;
    let checks = vec![
        check_counters(&counters),
        check_persisted(&counters, &rows, &people),
        check_order(&order),
        check_served(&counters, &people),
    ];
    let report = report(&args, &people, &checks, all_done, settled_after, &counters);
    print_report(&report, &checks, &people);
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_vec_pretty(&report)?)?;
    }
    Ok(checks.iter().all(|c| c.ok))
}

impl Person {
    fn failed(ticket: u64, why: &str) -> Self {
        Person {
            ticket,
            prequeue: false,
            batch: None,
            outcome: Outcome::Failed(why.to_owned()),
            reservation: None,
            admitted_after: None,
            reserve_latency: None,
        }
    }
}

/// One person's whole run.
async fn person(
    args: &SaleArgs,
    http: &reqwest::Client,
    progress: &Progress,
    pools: &[String],
    joining: &tokio::sync::Semaphore,
    source: IpAddr,
    gateway: usize,
) -> Person {
    let permit = joining.acquire().await.expect("never closed");
    let joined = Instant::now();
    let mut me = Person::failed(0, "no ticket");
    let token = match wait_in_line(args, progress, source, gateway, &mut me, Some(permit)).await {
        Waited::Admitted(token) => token,
        Waited::SoldOut => {
            me.outcome = Outcome::SoldOut;
            progress.sold_out.fetch_add(1, Ordering::Relaxed);
            return me;
        }
        Waited::Failed(why) => {
            me.outcome = Outcome::Failed(why);
            progress.failed.fetch_add(1, Ordering::Relaxed);
            return me;
        }
    };
    progress.admitted.fetch_add(1, Ordering::Relaxed);
    me.admitted_after = Some(joined.elapsed());
    let claims = claims(&token);
    me.batch = claims.as_ref().map(|c| c.exp_ms);
    let max_seats = claims.map_or(1, |c| c.max_seats).min(args.seats).max(1);
    let seats = rand::thread_rng().gen_range(1..=max_seats);

    // Try the pools in a random order until one holds the seats.
    let mut order = pools.to_vec();
    order.shuffle(&mut rand::thread_rng());
    let reservations = format!(
        "http://{}/v1/sales/{}/reservations",
        args.booking, args.sale
    );
    let asked = Instant::now();
    let mut held = None;
    for pool in &order {
        match reserve(http, &reservations, &token, pool, seats).await {
            Ok(Some(body)) => {
                held = Some(body);
                break;
            }
            Ok(None) => continue,
            Err(e) => {
                progress.failed.fetch_add(1, Ordering::Relaxed);
                me.outcome = Outcome::Failed(format!("reserve: {e:#}"));
                return me;
            }
        }
    }
    me.reserve_latency = Some(asked.elapsed());
    let Some(body) = held else {
        me.outcome = Outcome::NothingLeft;
        progress.sold_out.fetch_add(1, Ordering::Relaxed);
        return me;
    };
    progress.held.fetch_add(1, Ordering::Relaxed);
    let id = body["reservation_id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let pool = body["pool"].as_str().unwrap_or_default().to_owned();
    me.reservation = Some((id.clone(), pool, seats));
    if rand::thread_rng().gen_bool(args.pay_ratio.clamp(0.0, 1.0)) {
        let secret = body["secret"].as_str().unwrap_or_default();
        match pay(http, args, &id, secret).await {
            Ok(()) => {
                progress.paid.fetch_add(1, Ordering::Relaxed);
                me.outcome = Outcome::Paid;
            }
            Err(e) => {
                progress.failed.fetch_add(1, Ordering::Relaxed);
                me.outcome = Outcome::Failed(format!("pay: {e:#}"));
            }
        }
    } else {
        me.outcome = Outcome::WalkedAway;
    }
    me
}

/// How a wait in line ended.
enum Waited {
    Admitted(String),
    SoldOut,
    Failed(String),
}

/// Reconnections a person makes before giving up: the protocol's back-off makes about six in a
/// grace period of 30 s.
const RECONNECTS: u32 = 8;

/// Waits in line the way docs/protocol.md tells a client to (and the page does): when the
/// connection drops, or the gateway closes it for anything but the end of the sale, reconnect
/// to the next gateway with the resume token, after the prescribed back-off (at once plus up to
/// 2 s after a drain, else 0.5 s x 2^attempt, capped at 30 s, times a random 0.5 to 1), and
/// keep the place. `joining` is released once the first connection is up.
async fn wait_in_line(
    args: &SaleArgs,
    progress: &Progress,
    source: IpAddr,
    first_gateway: usize,
    me: &mut Person,
    mut joining: Option<tokio::sync::SemaphorePermit<'_>>,
) -> Waited {
    let mut resume: Option<String> = None;
    let mut why = String::from("no connection");
    for attempt in 0..=RECONNECTS {
        let gateway = args.gateways[(first_gateway + attempt as usize) % args.gateways.len()];
        let mut url = format!("ws://{gateway}/ws?sale={}", args.sale);
        if let Some(token) = &resume {
            url.push_str("&resume=");
            url.push_str(token);
        }
        let drained = match crate::connect(source, gateway, &url).await {
            Ok(mut ws) => {
                if joining.take().is_some() {
                    progress.joined.fetch_add(1, Ordering::Relaxed);
                }
                match hear(&mut ws, me, &mut resume).await {
                    Heard::Done(waited) => return waited,
                    Heard::Lost { why: lost, drained } => {
                        why = lost;
                        drained
                    }
                }
            }
            Err(e) => {
                // A ticket whose grace ran out (410) or that the sale never had (404) is over.
                let text = format!("{e:#}");
                if resume.is_some() && (text.contains("410") || text.contains("404")) {
                    return Waited::Failed(format!("resume refused: {text}"));
                }
                why = format!("join: {text}");
                false
            }
        };
        if attempt == RECONNECTS || (resume.is_none() && me.ticket == 0 && attempt > 0) {
            break;
        }
        let jitter = rand::thread_rng().gen_range(0.5..=1.0);
        let delay = if drained {
            Duration::from_millis(rand::thread_rng().gen_range(0..=2_000))
        } else {
            Duration::from_secs_f64((0.5 * 2f64.powi(attempt as i32)).min(30.0) * jitter)
        };
        tokio::time::sleep(delay).await;
    }
    Waited::Failed(why)
}

/// What one connection's messages came to.
enum Heard {
    Done(Waited),
    /// The connection ended mid-wait; `drained` if the gateway said it was draining (1012).
    Lost {
        why: String,
        drained: bool,
    },
}

/// Reads one connection until admission, the end of the sale, or the connection's loss;
/// keeps the ticket and the resume token in `me` and `resume`.
async fn hear(ws: &mut crate::Socket, me: &mut Person, resume: &mut Option<String>) -> Heard {
    loop {
        let Some(frame) = ws.next().await else {
            return Heard::Lost {
                why: "the room closed without a word".into(),
                drained: false,
            };
        };
        let text = match frame {
            Ok(Message::Text(text)) => text,
            Ok(Message::Close(close)) => {
                let code = close.as_ref().map(|c| u16::from(c.code));
                if code == Some(floodgate_contract::ws::close::SALE_OVER) {
                    return Heard::Done(Waited::SoldOut);
                }
                if code == Some(floodgate_contract::ws::close::SERVICE_RESTART) {
                    // The drain's reason is the resume token.
                    if let Some(reason) = close.as_ref().map(|c| c.reason.to_string()) {
                        if !reason.is_empty() {
                            *resume = Some(reason);
                        }
                    }
                }
                return Heard::Lost {
                    why: format!("closed: {close:?}"),
                    drained: code == Some(floodgate_contract::ws::close::SERVICE_RESTART),
                };
            }
            Ok(_) => continue,
            Err(e) => {
                return Heard::Lost {
                    why: format!("socket: {e}"),
                    drained: false,
                }
            }
        };
        match serde_json::from_str::<ServerMessage>(&text) {
            Ok(ServerMessage::Ticket {
                ticket,
                draw_nonce,
                resume_token,
                resumed,
                ..
            }) => {
                me.ticket = ticket;
                if !resumed {
                    me.prequeue = draw_nonce.is_some();
                }
                *resume = Some(resume_token);
            }
            Ok(ServerMessage::Admitted { token, .. }) => {
                return Heard::Done(Waited::Admitted(token))
            }
            Ok(ServerMessage::SoldOut) => return Heard::Done(Waited::SoldOut),
            Ok(_) => {}
            Err(e) => {
                return Heard::Done(Waited::Failed(format!("unreadable message: {e}")));
            }
        }
    }
}

/// The token's claims, read without checking the signature (the booking API checks it).
fn claims(token: &str) -> Option<AdmissionClaims> {
    let payload = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// One reservation attempt: the 201 body, `None` if the pool is sold out. 503s are retried with
/// the same key, as the protocol prescribes.
async fn reserve(
    http: &reqwest::Client,
    url: &str,
    token: &str,
    pool: &str,
    seats: u32,
) -> anyhow::Result<Option<Value>> {
    let key = uuid::Uuid::new_v4().to_string();
    for _ in 0..20 {
        let response = http
            .post(url)
            .bearer_auth(token)
            .header("Idempotency-Key", &key)
            .json(&json!({ "pool": pool, "seats": seats }))
            .send()
            .await?;
        let status = response.status().as_u16();
        let retry = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
            .unwrap_or(1);
        let body: Value = response.json().await.unwrap_or(Value::Null);
        match (status, body["error"].as_str()) {
            (201, _) => return Ok(Some(body)),
            (409, Some("sold_out")) => return Ok(None),
            (503, _) => tokio::time::sleep(Duration::from_secs(retry.min(5))).await,
            _ => bail!("{status} {body}"),
        }
    }
    bail!("still 503 after 20 attempts")
}

/// Starts the payment and completes it at the sandbox provider.
async fn pay(
    http: &reqwest::Client,
    args: &SaleArgs,
    reservation: &str,
    secret: &str,
) -> anyhow::Result<()> {
    let url = format!(
        "http://{}/v1/sales/{}/reservations/{reservation}/payment",
        args.booking, args.sale
    );
    let started = http.post(&url).bearer_auth(secret).send().await?;
    if started.status().as_u16() != 202 {
        bail!("{} {}", started.status(), started.text().await?);
    }
    let payment: Value = started.json().await?;
    let id = payment["payment_id"].as_str().unwrap_or_default();
    let done = http
        .post(format!("http://{}/v1/payments/{id}/checkout", args.sandbox))
        .json(&json!({ "outcome": "succeed" }))
        .send()
        .await?;
    if !done.status().is_success() {
        bail!("checkout: {} {}", done.status(), done.text().await?);
    }
    Ok(())
}

/// One pool's counters in Redis (`None`: missing).
#[derive(Clone, Debug, Serialize)]
pub struct PoolCounters {
    pub pool: String,
    pub capacity: i64,
    pub available: Option<i64>,
    pub held: i64,
    pub sold: Option<i64>,
}

async fn pool_counters(
    redis: &mut redis::aio::MultiplexedConnection,
    keys: &Keys,
    sale: &str,
    pools: &[(String, i32)],
) -> anyhow::Result<Vec<PoolCounters>> {
    let mut counters = Vec::with_capacity(pools.len());
    for (pool, capacity) in pools {
        let counts = PoolCounts::read(redis, &keys.pool(sale, pool)).await?;
        counters.push(PoolCounters {
            pool: pool.clone(),
            capacity: i64::from(*capacity),
            available: counts.available,
            held: counts.held.unwrap_or(0),
            sold: counts.sold,
        });
    }
    Ok(counters)
}

/// A booking row as the consumer wrote it.
#[derive(Clone, Debug)]
pub struct Row {
    pub id: String,
    pub pool: String,
    pub seats: i64,
    pub status: String,
}

async fn bookings(db: &sqlx::PgPool, sale: &str) -> anyhow::Result<Vec<Row>> {
    let rows: Vec<(String, String, i32, String)> = sqlx::query_as(
        "select reservation_id, pool_id, seats, status from bookings where sale_id = $1",
    )
    .bind(sale)
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(id, pool, seats, status)| Row {
            id,
            pool,
            seats: i64::from(seats),
            status,
        })
        .collect())
}

/// Whether the sale has settled, so its checks mean something: no hold is left in Redis, every
/// reservation this run was told it holds is in PostgreSQL with a final status, and the
/// consumer has applied everything else too (anyone's): per pool, PostgreSQL confirms exactly
/// the seats Redis sold and keeps none pending.
pub fn settled(counters: &[PoolCounters], rows: &[Row], expected: &[&Person]) -> bool {
    let pools_agree = counters.iter().all(|c| {
        let in_pool = rows.iter().filter(|r| r.pool == c.pool);
        let confirmed: i64 = in_pool
            .clone()
            .filter(|r| r.status == "CONFIRMED")
            .map(|r| r.seats)
            .sum();
        let pending = in_pool.clone().any(|r| r.status == "PENDING_PAYMENT");
        c.held == 0 && !pending && Some(confirmed) == c.sold
    });
    pools_agree
        && expected.iter().all(|p| {
            let (id, _, _) = p.reservation.as_ref().expect("people with a reservation");
            rows.iter()
                .any(|r| &r.id == id && r.status != "PENDING_PAYMENT")
        })
}

/// Each admitted or refused person's place in line (the lottery's for pre-queue tickets), with
/// their admission batch. The draw is read from the first gateway that answers.
async fn placed_order(
    http: &reqwest::Client,
    gateways: &[SocketAddr],
    sale: &str,
    people: &[Person],
) -> anyhow::Result<Vec<(u64, Option<i64>)>> {
    let draw = if people.iter().any(|p| p.prequeue) {
        let mut record = None;
        for gateway in gateways {
            let answer = http
                .get(format!("http://{gateway}/v1/sales/{sale}/draw"))
                .send()
                .await;
            if let Ok(answer) = answer {
                record = Some(answer.json::<DrawRecord>().await?);
                break;
            }
        }
        let record = record.context("no gateway answers for the draw")?;
        let DrawRecord::Drawn {
            draw_seed,
            prequeue_size,
            ..
        } = record
        else {
            anyhow::bail!("the pre-queue was not drawn: {record:?}");
        };
        let seed: [u8; 32] = hex::decode(&draw_seed)?
            .try_into()
            .map_err(|_| anyhow::anyhow!("the draw seed is not 32 bytes: {draw_seed}"))?;
        Some(floodgate_contract::lottery::Draw::new(seed, prequeue_size))
    } else {
        None
    };
    Ok(people
        .iter()
        .filter(|p| !matches!(p.outcome, Outcome::Failed(_)) && p.ticket > 0)
        .map(|p| {
            let place = draw.as_ref().map_or(p.ticket, |d| d.place(p.ticket));
            (place, p.batch)
        })
        .collect())
}

/// The outcome of one invariant.
#[derive(Clone, Debug, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub ok: bool,
    pub detail: String,
}

/// No oversell in Redis: every pool's counters present, none negative, adding up to capacity.
pub fn check_counters(counters: &[PoolCounters]) -> Check {
    let wrong: Vec<String> = counters
        .iter()
        .filter(|c| match (c.available, c.sold) {
            (Some(a), Some(s)) => a < 0 || s < 0 || c.held < 0 || a + c.held + s != c.capacity,
            _ => true,
        })
        .map(|c| format!("{c:?}"))
        .collect();
    let sold: i64 = counters.iter().filter_map(|c| c.sold).sum();
    let capacity: i64 = counters.iter().map(|c| c.capacity).sum();
    Check {
        name: "no oversell (Redis counters add up to capacity)",
        ok: wrong.is_empty() && sold <= capacity,
        detail: if wrong.is_empty() {
            format!("{sold} of {capacity} seats sold")
        } else {
            wrong.join("; ")
        },
    }
}

/// Every 201 is in PostgreSQL with the outcome its holder caused, and PostgreSQL's confirmed
/// seats per pool are exactly what Redis sold.
pub fn check_persisted(counters: &[PoolCounters], rows: &[Row], people: &[Person]) -> Check {
    let mut problems = Vec::new();
    for p in people {
        let Some((id, _, seats)) = &p.reservation else {
            continue;
        };
        let Some(row) = rows.iter().find(|r| &r.id == id) else {
            problems.push(format!("{id}: answered 201, missing in PostgreSQL"));
            continue;
        };
        let expected = match p.outcome {
            Outcome::Paid => "CONFIRMED",
            Outcome::WalkedAway => "EXPIRED",
            _ => continue,
        };
        if row.status != expected || row.seats != i64::from(*seats) {
            problems.push(format!(
                "{id}: {} seats {}, expected {expected} seats {seats}",
                row.status, row.seats
            ));
        }
    }
    for c in counters {
        let confirmed: i64 = rows
            .iter()
            .filter(|r| r.pool == c.pool && r.status == "CONFIRMED")
            .map(|r| r.seats)
            .sum();
        if Some(confirmed) != c.sold || confirmed > c.capacity {
            problems.push(format!(
                "{}: PostgreSQL confirms {confirmed} seats, Redis sold {:?} of {}",
                c.pool, c.sold, c.capacity
            ));
        }
    }
    let held = people.iter().filter(|p| p.reservation.is_some()).count();
    Check {
        name: "every 201 persisted with its outcome",
        ok: problems.is_empty(),
        detail: if problems.is_empty() {
            format!("{held} reservations, {} rows", rows.len())
        } else {
            format!("{} problems: {}", problems.len(), first(&problems))
        },
    }
}

/// Admission follows the line: sorted by place, the admission batches never go backwards, and
/// nobody refused (sold out while waiting) stood ahead of someone admitted.
pub fn check_order(order: &[(u64, Option<i64>)]) -> Check {
    let mut sorted = order.to_vec();
    sorted.sort_by_key(|(place, _)| *place);
    let mut problems = Vec::new();
    let mut last: Option<(u64, i64)> = None;
    let mut first_refused: Option<u64> = None;
    for (place, batch) in &sorted {
        match batch {
            Some(batch) => {
                if let Some(refused) = first_refused {
                    problems.push(format!(
                        "place {place} admitted after place {refused} was refused"
                    ));
                }
                if let Some((before, earlier)) = last {
                    if *batch < earlier {
                        problems.push(format!(
                            "place {place} admitted in an earlier batch than place {before}"
                        ));
                    }
                }
                last = Some((*place, *batch));
            }
            None => {
                first_refused.get_or_insert(*place);
            }
        }
    }
    let admitted = sorted.iter().filter(|(_, b)| b.is_some()).count();
    Check {
        name: "admissions in the order of the line",
        ok: problems.is_empty(),
        detail: if problems.is_empty() {
            format!("{admitted} admitted in order")
        } else {
            format!("{} out of order: {}", problems.len(), first(&problems))
        },
    }
}

/// Nobody was sent away while a seat was left: the room says "sold out" only when nothing is
/// available and nothing held (so no seat can come back), hence every seat must be sold. (An
/// admitted person finding nothing left is not a refusal: the seats were in holds then.)
pub fn check_served(counters: &[PoolCounters], people: &[Person]) -> Check {
    let sold: i64 = counters.iter().filter_map(|c| c.sold).sum();
    let capacity: i64 = counters.iter().map(|c| c.capacity).sum();
    let refused = people
        .iter()
        .filter(|p| p.outcome == Outcome::SoldOut)
        .count();
    Check {
        name: "nobody refused while seats were left",
        ok: refused == 0 || sold == capacity,
        detail: format!("{refused} refused; {sold} of {capacity} seats sold"),
    }
}

fn first(problems: &[String]) -> String {
    problems
        .iter()
        .take(3)
        .cloned()
        .collect::<Vec<_>>()
        .join("; ")
}

fn report(
    args: &SaleArgs,
    people: &[Person],
    checks: &[Check],
    all_done: Duration,
    settled: Duration,
    counters: &[PoolCounters],
) -> Value {
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
        "seconds_until_everyone_finished": all_done.as_secs_f64(),
        "seconds_until_settled": settled.as_secs_f64(),
        "join_to_admission_ms": admitted,
        "reserve_ms": reserve,
        "pools": counters,
        "checks": checks,
    })
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
    use super::*;

    fn pool(capacity: i64, available: i64, held: i64, sold: i64) -> PoolCounters {
        PoolCounters {
            pool: "p".into(),
            capacity,
            available: Some(available),
            held,
            sold: Some(sold),
        }
    }

    #[test]
    fn counters_that_do_not_add_up_or_are_missing_fail_the_oversell_check() {
        assert!(check_counters(&[pool(10, 2, 0, 8)]).ok);
        assert!(
            !check_counters(&[pool(10, 0, 0, 11)]).ok,
            "sold past capacity"
        );
        assert!(!check_counters(&[pool(10, -1, 0, 11)]).ok);
        assert!(
            !check_counters(&[pool(10, 3, 0, 8)]).ok,
            "one seat too many"
        );
        let mut lost = pool(10, 2, 0, 8);
        lost.available = None;
        assert!(
            !check_counters(&[lost]).ok,
            "a missing counter is never zero"
        );
    }

    fn holder(id: &str, outcome: Outcome, seats: u32) -> Person {
        Person {
            ticket: 1,
            prequeue: false,
            batch: Some(1),
            outcome,
            reservation: Some((id.into(), "p".into(), seats)),
            admitted_after: None,
            reserve_latency: None,
        }
    }

    fn row(id: &str, seats: i64, status: &str) -> Row {
        Row {
            id: id.into(),
            pool: "p".into(),
            seats,
            status: status.into(),
        }
    }

    #[test]
    fn a_201_missing_or_with_the_wrong_outcome_in_postgres_fails_the_durability_check() {
        let counters = [pool(10, 8, 0, 2)];
        let people = [
            holder("a", Outcome::Paid, 2),
            holder("b", Outcome::WalkedAway, 1),
        ];
        let good = [row("a", 2, "CONFIRMED"), row("b", 1, "EXPIRED")];
        assert!(check_persisted(&counters, &good, &people).ok);
        assert!(
            !check_persisted(&counters, &good[..1], &people).ok,
            "b is missing"
        );
        let wrong = [row("a", 2, "CONFIRMED"), row("b", 1, "CONFIRMED")];
        assert!(
            !check_persisted(&counters, &wrong, &people).ok,
            "b walked away"
        );
        let more_sold = [pool(10, 7, 0, 3)];
        assert!(
            !check_persisted(&more_sold, &good, &people).ok,
            "Redis sold more"
        );
    }

    #[test]
    fn a_sale_has_settled_only_once_postgres_agrees_with_redis() {
        let me = holder("r1", Outcome::Paid, 1);
        let expected = [&me];
        let mine = row("r1", 1, "CONFIRMED");
        // Someone else's sale is in Redis but not yet in PostgreSQL.
        assert!(!settled(
            &[pool(10, 8, 0, 2)],
            std::slice::from_ref(&mine),
            &expected
        ));
        let theirs = row("r2", 1, "CONFIRMED");
        assert!(settled(
            &[pool(10, 8, 0, 2)],
            &[mine.clone(), theirs.clone()],
            &expected
        ));
        assert!(
            !settled(
                &[pool(10, 7, 1, 2)],
                &[mine.clone(), theirs.clone()],
                &expected
            ),
            "a hold is left"
        );
        let pending = row("r3", 1, "PENDING_PAYMENT");
        assert!(
            !settled(&[pool(10, 8, 0, 2)], &[mine, theirs, pending], &expected),
            "a booking is not final yet"
        );
    }

    #[test]
    fn admission_out_of_line_order_fails_the_order_check() {
        assert!(check_order(&[(1, Some(5)), (2, Some(5)), (3, Some(6)), (4, None)]).ok);
        assert!(
            !check_order(&[(1, Some(6)), (2, Some(5))]).ok,
            "a later place first"
        );
        assert!(!check_order(&[(1, None), (2, Some(5))]).ok, "passed over");
        // The input order does not matter: the check sorts by place.
        assert!(check_order(&[(3, Some(6)), (1, Some(5)), (2, Some(5))]).ok);
    }

    #[test]
    fn refusing_anyone_while_seats_are_left_fails_the_service_check() {
        let mut refused = holder("a", Outcome::SoldOut, 1);
        refused.reservation = None;
        assert!(check_served(&[pool(10, 0, 0, 10)], std::slice::from_ref(&refused)).ok);
        assert!(!check_served(&[pool(10, 1, 0, 9)], &[refused]).ok);
    }

    #[test]
    fn the_token_claims_are_read_from_the_payload() {
        let signer = floodgate_contract::token::TokenSigner::from_seed("k", &[7; 32]);
        let token = signer.sign(&AdmissionClaims {
            sale: "s".into(),
            ticket: 4,
            jti: "t4".into(),
            max_seats: 2,
            iat_ms: 1,
            exp_ms: 99,
        });
        let read = claims(&token).expect("claims");
        assert_eq!((read.ticket, read.exp_ms, read.max_seats), (4, 99, 2));
        assert!(claims("not a token").is_none());
    }
}
