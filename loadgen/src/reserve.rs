//! `floodgate-loadgen reserve`: the booking endpoint's end-to-end throughput. Every request is a
//! new admitted person (a token signed here with the gateways' key, as a gateway would) asking
//! for one seat: the claim, the pool script, the `SeatReserved` event acknowledged by the broker,
//! then the 201. The tokens are signed before the clock starts, so only the service is timed.
//! For the raw limit, `deploy/bench.sh` runs `redis-benchmark` on the same scripts
//! (`deploy/bench-scripts.sh`). The report carries this process's own CPU over the timed part.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use floodgate_client::{BookingClient, Failure};
use floodgate_protocol::token::{AdmissionClaims, TokenSigner};
use futures::StreamExt;
use serde_json::json;

use crate::report::{Cpu, Latencies, Table};

#[derive(Clone, Debug, clap::Args)]
pub struct ReserveArgs {
    /// The booking API.
    #[arg(long, default_value = "127.0.0.1:8081")]
    pub booking: SocketAddr,
    /// An armed, open sale, and the pool to reserve in (with enough seats for every request).
    #[arg(long)]
    pub sale: String,
    #[arg(long)]
    pub pool: String,
    /// Reservations to make.
    #[arg(long, default_value_t = 20_000)]
    pub requests: u64,
    /// Requests in flight at once.
    #[arg(long, default_value_t = 64)]
    pub concurrency: usize,
    /// The first made-up ticket number (a token can reserve once: runs against one sale need
    /// ranges of their own).
    #[arg(long, default_value_t = 1_000_000_000)]
    pub first_ticket: u64,
    /// The gateways' token key (bench only: whoever holds it can admit anyone).
    #[arg(long, env = "FLOODGATE_TOKEN_KEY_ID")]
    pub token_key_id: String,
    #[arg(long, env = "FLOODGATE_TOKEN_SIGNING_KEY", hide_env_values = true)]
    pub token_signing_key: String,
    /// Also write the report as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

pub async fn run(args: ReserveArgs) -> anyhow::Result<bool> {
    crate::loopback_only([args.booking.ip()])?;
    let tokens = tokens(&args)?;
    let http = floodgate_platform::outbound::client()
        .pool_max_idle_per_host(args.concurrency)
        .timeout(Duration::from_secs(30))
        .build()?;
    let booking = BookingClient::new(http, args.booking);
    let cpu = Cpu::now();
    let started = Instant::now();
    let answers: Vec<(Result<u16, String>, Duration)> = futures::stream::iter(tokens)
        .map(|token| {
            let (booking, args) = (booking.clone(), &args);
            async move {
                let asked = Instant::now();
                let key = uuid::Uuid::new_v4().to_string();
                let status = match booking
                    .reserve(&args.sale, &token, &key, &args.pool, 1)
                    .await
                {
                    Ok(_) => Ok(201),
                    Err(Failure::Refused { status, .. }) => Ok(status),
                    Err(e) => Err(e.to_string()),
                };
                (status, asked.elapsed())
            }
        })
        .buffer_unordered(args.concurrency.max(1))
        .collect()
        .await;
    let seconds = started.elapsed().as_secs_f64();
    let mut statuses: BTreeMap<String, u64> = BTreeMap::new();
    for (status, _) in &answers {
        let key = match status {
            Ok(code) => code.to_string(),
            Err(_) => "error".into(),
        };
        *statuses.entry(key).or_default() += 1;
    }
    let latencies = Latencies::of(
        answers
            .iter()
            .filter(|(s, _)| *s == Ok(201))
            .map(|(_, took)| *took),
    );
    report(&args, &statuses, (seconds, cpu.since()), &latencies)
}

/// One token per request, signed before the clock starts. Tickets far beyond any real queue,
/// so they never meet a real person's token id.
fn tokens(args: &ReserveArgs) -> anyhow::Result<Vec<String>> {
    let signer = TokenSigner::from_base64(&args.token_key_id, &args.token_signing_key)
        .map_err(|e| anyhow::anyhow!("the token signing key: {e}"))?;
    let now = floodgate_protocol::now_millis();
    Ok((0..args.requests)
        .map(|i| {
            let ticket = args.first_ticket + i;
            signer.sign(&AdmissionClaims {
                sale: args.sale.clone(),
                ticket,
                jti: format!("t{ticket}"),
                max_seats: 1,
                iat_ms: now,
                exp_ms: now + 3_600_000,
                buyer: None,
            })
        })
        .collect())
}

/// Prints (and writes, if asked) the report; whether the run passed. A refusal (sold out) is an
/// answer; transport errors and 5xx are failures.
fn report(
    args: &ReserveArgs,
    statuses: &BTreeMap<String, u64>,
    (seconds, cpu): (f64, serde_json::Value),
    latencies: &Latencies,
) -> anyhow::Result<bool> {
    let created = statuses.get("201").copied().unwrap_or(0);
    let report = json!({
        "scenario": "reserve",
        "sale": args.sale,
        "pool": args.pool,
        "requests": args.requests,
        "concurrency": args.concurrency,
        "statuses": statuses,
        "seconds": seconds,
        "reservations_per_second": created as f64 / seconds.max(1e-9),
        "latency_ms": latencies,
        "loadgen_cpu": cpu,
    });
    let mut table = Table::new(&["figure", "value"]);
    table.row(&[
        "requests".into(),
        format!("{} ({} at once)", args.requests, args.concurrency),
    ]);
    table.row(&["answers".into(), format!("{statuses:?}")]);
    table.row(&[
        "reservations (201) per second".into(),
        format!(
            "{:.0}",
            report["reservations_per_second"].as_f64().unwrap_or(0.0)
        ),
    ]);
    table.row(&[
        "201 latency p50 / p99 / max".into(),
        Latencies::describe(&report["latency_ms"]),
    ]);
    println!("{table}");
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_vec_pretty(&report)?)?;
    }
    let failed = statuses
        .iter()
        .filter(|(code, _)| code.as_str() == "error" || code.starts_with('5'))
        .count();
    Ok(created > 0 && failed == 0)
}
