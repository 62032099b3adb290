//! `floodgate-loadgen hostile`: the stranger's half of a hostile rush (`deploy/bench.sh
//! hostile`). It runs beside `floodgate-loadgen sale`, from addresses of its own, and sends each
//! attack issue 48 found at a fixed rate, whatever the answers, until it is stopped (SIGTERM) or
//! its time is up:
//!
//! - `replay`: one reservation's request, its `Idempotency-Key` and body, sent again and again
//!   with the stranger's own pass (the reservation it made and paid for, as a buyer would: an
//!   unpaid hold would keep its seat from the crowd for the hold's life, which any walk-away
//!   does, and is not what is measured here);
//! - `zero`: well-formed reservations refused before any Redis work (`seats: 0`), each with a
//!   new key;
//! - `place`: `GET /place` with the stranger's resume token;
//! - `dead-place`: `GET /place` with the token of a place the stranger left at once (dead once
//!   its grace is over);
//! - `challenges`: bot-check puzzles asked for and never solved;
//! - `webhook`: unsigned webhooks whose signature header is stuffed with `v1=` entries;
//! - `joins`: new places in line, each connection dropped once its ticket is read;
//! - `foreign-joins`: joins from another site's page (a foreign `Origin`).
//!
//! The stranger waits in line like anyone for its pass (it joins before the opening, so it is
//! admitted among the first). It reports, per attack, what was sent and how it was answered:
//! what the services' CPU per hostile request and the honest people's figures are read against.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use floodgate_client::room::{wait_in_line, Line, Waited};
use serde_json::json;

use crate::report::Latencies;

/// What to run: `floodgate-loadgen hostile --help` documents each.
#[derive(Clone, Debug, clap::Args)]
pub struct HostileArgs {
    /// Gateways (loopback), comma-separated: the line, `/place` and the joins.
    #[arg(long, value_delimiter = ',', default_value = "127.0.0.1:8080")]
    pub gateways: Vec<SocketAddr>,
    /// The booking API.
    #[arg(long, default_value = "127.0.0.1:8081")]
    pub booking: SocketAddr,
    /// The sandbox payment provider, where the stranger pays for its one seat.
    #[arg(long, default_value = "127.0.0.1:8082")]
    pub sandbox: SocketAddr,
    /// The sale (created and armed, not yet open: the stranger joins before the opening).
    #[arg(long)]
    pub sale: String,
    /// The pool the stranger reserves in.
    #[arg(long)]
    pub pool: String,
    /// The stranger's addresses (loopback), comma-separated; requests go out from each in turn.
    #[arg(long, value_delimiter = ',')]
    pub from: Vec<IpAddr>,
    /// Requests a second, of each attack.
    #[arg(long, default_value_t = 100)]
    pub rate: u32,
    /// The attacks, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "replay,zero,place,dead-place,challenges,webhook,joins,foreign-joins"
    )]
    pub attacks: Vec<Attack>,
    /// The longest the attack runs, in seconds (it stops earlier on SIGTERM).
    #[arg(long, default_value_t = 600)]
    pub secs: u64,
    /// Also write the report as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum Attack {
    Replay,
    Zero,
    Place,
    DeadPlace,
    Challenges,
    Webhook,
    Joins,
    ForeignJoins,
}

impl Attack {
    fn name(self) -> &'static str {
        match self {
            Attack::Replay => "replay",
            Attack::Zero => "zero",
            Attack::Place => "place",
            Attack::DeadPlace => "dead-place",
            Attack::Challenges => "challenges",
            Attack::Webhook => "webhook",
            Attack::Joins => "joins",
            Attack::ForeignJoins => "foreign-joins",
        }
    }
}

/// Requests of one attack in flight at most: past it a tick is counted as not sent, so a
/// stalled service cannot make this process grow.
const IN_FLIGHT: usize = 512;

/// What one attack saw: answers by status (`error` for no answer) and their latency.
#[derive(Default)]
struct Tally {
    answers: BTreeMap<String, u64>,
    not_sent: u64,
    latencies: Vec<Duration>,
}

/// The stranger's credentials: a pass, its reservation's replayable request (the key), the
/// resume token, and the token of a place it left.
struct Credentials {
    pass: String,
    resume: String,
    dead_resume: String,
    pool: String,
    replay_key: String,
}

pub async fn run(args: HostileArgs) -> anyhow::Result<bool> {
    if args.gateways.is_empty() || args.from.is_empty() || args.rate == 0 {
        bail!("name at least one gateway and one source address, and a rate above 0");
    }
    let gateways = args.gateways.iter().map(SocketAddr::ip);
    crate::loopback_only(
        gateways
            .chain([args.booking.ip(), args.sandbox.ip()])
            .chain(args.from.iter().copied()),
    )?;
    crate::room_for(IN_FLIGHT as u64 * args.attacks.len() as u64)?;
    // One client per address, so each request leaves from the address it is counted against.
    let clients = crate::clients_from(&args.from, Duration::from_secs(10))?;
    let credentials = Arc::new(credentials(&args, &clients[0]).await?);
    eprintln!(
        "hostile: admitted; attacking at {} requests/s each",
        args.rate
    );

    let started = Instant::now();
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut tasks = Vec::new();
    for attack in args.attacks.iter().copied() {
        let tally = Arc::new(Mutex::new(Tally::default()));
        let task = tokio::spawn(attack_at_rate(
            attack,
            Arc::new(args.clone()),
            clients.clone(),
            credentials.clone(),
            tally.clone(),
            stopped.clone(),
        ));
        tasks.push((attack, tally, task));
    }
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::time::sleep(Duration::from_secs(args.secs)) => {}
    }
    stop.send_replace(true);
    let secs = started.elapsed().as_secs_f64();
    let mut attacks = serde_json::Map::new();
    for (attack, tally, task) in tasks {
        let _ = task.await;
        let tally = std::mem::take(&mut *tally.lock().expect("never poisoned"));
        let sent: u64 = tally.answers.values().sum();
        attacks.insert(
            attack.name().into(),
            json!({
                "sent": sent,
                "not_sent": tally.not_sent,
                "per_sec": sent as f64 / secs,
                "answers": tally.answers,
                "latency_ms": Latencies::of(tally.latencies.into_iter()),
            }),
        );
    }
    let report = json!({
        "scenario": "hostile",
        "sale": args.sale,
        "per_attack_per_sec": args.rate,
        "addresses": args.from.len(),
        "secs": secs,
        "attacks": attacks,
    });
    println!("{}", serde_json::to_string_pretty(&report)?);
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_vec_pretty(&report)?)?;
    }
    Ok(true)
}

/// Waits in line for a pass, reserves one seat with it (the request `replay` sends again) and
/// pays for it.
async fn credentials(args: &HostileArgs, http: &reqwest::Client) -> anyhow::Result<Credentials> {
    let rules = floodgate_client::door::door(http, args.gateways[0], &args.sale)
        .await
        .map_err(anyhow::Error::msg)?;
    let answer = floodgate_client::door::answer(http, args.gateways[0], &args.sale, &rules)
        .await
        .map_err(anyhow::Error::msg)?;
    let mut line = Line::new(&args.gateways, &args.sale);
    line.from = Some(args.from[0]);
    line.challenge = answer;
    let pass = match wait_in_line(&mut line, || {}).await {
        Waited::Admitted(token) => token,
        other => bail!("the stranger was not admitted: {other:?}"),
    };
    let resume = line
        .ticket
        .context("a ticket before the pass")?
        .resume_token;
    // A place taken and left at once: its token is a dead place's once the grace is over. (A
    // puzzle of its own, if the sale asks for one: an answer is used once.)
    let again = floodgate_client::door::answer(http, args.gateways[0], &args.sale, &rules)
        .await
        .map_err(anyhow::Error::msg)?;
    let left = floodgate_client::room::join(&floodgate_client::dial::Dial {
        gateway: args.gateways[0],
        sale: &args.sale,
        resume: None,
        from: Some(args.from[args.from.len() - 1]),
        headers: &[],
        challenge: again.as_deref(),
    })
    .await
    .context("the place the stranger leaves")?;
    let dead_resume = left.1.resume_token;
    drop(left.0);
    let replay_key = uuid::Uuid::new_v4().to_string();
    let booking = floodgate_client::booking::BookingClient::new(http.clone(), args.booking);
    let held = booking
        .reserve(&args.sale, &pass, &replay_key, &args.pool, 1)
        .await
        .context("the stranger's own reservation")?;
    let started = booking
        .start_payment(&args.sale, &held.reservation_id, &held.secret)
        .await
        .context("paying for the stranger's seat")?;
    let checkout = json!({ "outcome": "succeed" });
    floodgate_client::booking::sandbox_checkout(http, args.sandbox, &started.payment_id, &checkout)
        .await
        .context("the stranger's checkout")?;
    Ok(Credentials {
        pass,
        resume,
        dead_resume,
        pool: args.pool.clone(),
        replay_key,
    })
}

/// Sends `attack` at `args.rate` a second until `stop`, each request in a task of its own.
async fn attack_at_rate(
    attack: Attack,
    args: Arc<HostileArgs>,
    clients: Vec<reqwest::Client>,
    credentials: Arc<Credentials>,
    tally: Arc<Mutex<Tally>>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut every = tokio::time::interval(Duration::from_secs_f64(1.0 / f64::from(args.rate)));
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let in_flight = Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT));
    let mut n = 0usize;
    loop {
        tokio::select! {
            _ = stop.wait_for(|stopped| *stopped) => break,
            _ = every.tick() => {}
        }
        let Ok(permit) = in_flight.clone().try_acquire_owned() else {
            tally.lock().expect("never poisoned").not_sent += 1;
            continue;
        };
        n += 1;
        let (args, credentials, tally) = (args.clone(), credentials.clone(), tally.clone());
        let source = n % clients.len();
        let http = clients[source].clone();
        tokio::spawn(async move {
            let sent = Instant::now();
            let answer = match attack {
                Attack::Joins => join(&args, args.from[source], n, &[]).await,
                Attack::ForeignJoins => {
                    let foreign = [("origin", "https://elsewhere.example")];
                    join(&args, args.from[source], n, &foreign).await
                }
                _ => one(attack, &args, &http, &credentials).await,
            };
            let mut tally = tally.lock().expect("never poisoned");
            *tally.answers.entry(answer).or_default() += 1;
            tally.latencies.push(sent.elapsed());
            drop(permit);
        });
    }
}

/// One HTTP attack request: its status, or `error`.
async fn one(
    attack: Attack,
    args: &HostileArgs,
    http: &reqwest::Client,
    credentials: &Credentials,
) -> String {
    let reservations = format!(
        "http://{}/v1/sales/{}/reservations",
        args.booking, args.sale
    );
    let request = match attack {
        Attack::Replay => http
            .post(&reservations)
            .bearer_auth(&credentials.pass)
            .header("Idempotency-Key", &credentials.replay_key)
            .json(&json!({ "pool": credentials.pool, "seats": 1 })),
        Attack::Zero => http
            .post(&reservations)
            .bearer_auth(&credentials.pass)
            .header("Idempotency-Key", uuid::Uuid::new_v4().to_string())
            .json(&json!({ "pool": credentials.pool, "seats": 0 })),
        Attack::Place => http
            .get(format!(
                "http://{}/v1/sales/{}/place",
                args.gateways[0], args.sale
            ))
            .header("Floodgate-Resume", &credentials.resume),
        Attack::DeadPlace => http
            .get(format!(
                "http://{}/v1/sales/{}/place",
                args.gateways[0], args.sale
            ))
            .header("Floodgate-Resume", &credentials.dead_resume),
        Attack::Challenges => http.get(format!(
            "http://{}/v1/sales/{}/challenge",
            args.gateways[0], args.sale
        )),
        Attack::Webhook => http
            .post(format!("http://{}/v1/payments/webhook", args.booking))
            .header("Floodgate-Signature", stuffed_signature())
            .header("Content-Type", "application/json")
            .body(r#"{"type":"payment.succeeded","payment_id":"pay_x"}"#),
        Attack::Joins | Attack::ForeignJoins => {
            unreachable!("joins are WebSocket connections")
        }
    };
    match request.send().await {
        Ok(response) => response.status().as_u16().to_string(),
        Err(_) => "error".into(),
    }
}

/// A new place in line from `source`, with extra `headers`: `ticket` once its ticket is read
/// (then dropped), else the refusal.
async fn join(args: &HostileArgs, source: IpAddr, n: usize, headers: &[(&str, &str)]) -> String {
    let dial = floodgate_client::dial::Dial {
        gateway: args.gateways[n % args.gateways.len()],
        sale: &args.sale,
        resume: None,
        from: Some(source),
        headers,
        challenge: None,
    };
    match floodgate_client::room::join(&dial).await {
        Ok(_) => "ticket".into(),
        Err(floodgate_client::room::JoinError::Refused { status, .. }) => status.to_string(),
        Err(_) => "error".into(),
    }
}

/// A header of about 8 KB: the current time and as many well-formed `v1=` entries as fit.
fn stuffed_signature() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut header = format!("t={now}");
    while header.len() < 8_000 {
        header.push_str(",v1=");
        header.push_str(&"ab".repeat(32));
    }
    header
}
