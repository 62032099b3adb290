//! `floodgate-loadgen poll`: waiting the way polling waiting rooms do, for comparison with the
//! WebSocket push: each client has a connection of its own and asks for the sale's status every
//! few seconds (starting at a random moment in the first interval, so the requests spread out).
//! `deploy/bench.sh poll` reads the gateway's CPU time while these run, and while as many
//! WebSocket clients wait.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::Rng;
use serde_json::json;

use crate::queue::Crowd;
use crate::report::Table;

#[derive(Clone, Debug, clap::Args)]
pub struct PollArgs {
    #[command(flatten)]
    pub crowd: Crowd,
    /// Seconds between one client's requests.
    #[arg(long, default_value_t = 5)]
    pub interval_secs: u64,
    /// How long to poll.
    #[arg(long, default_value_t = 60)]
    pub secs: u64,
}

pub async fn run(args: PollArgs) -> anyhow::Result<bool> {
    args.crowd.check()?;
    let (done, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    // Why requests failed, by kind: what a failure count alone cannot tell.
    let reasons: Arc<Mutex<BTreeMap<String, u64>>> = Arc::default();
    let interval = Duration::from_secs(args.interval_secs.max(1));
    let clients = make_clients(&args)?;
    let until = Instant::now() + Duration::from_secs(args.secs);
    let tasks: Vec<_> = clients
        .into_iter()
        .map(|(http, url)| {
            let (done, failed, reasons) = (done.clone(), failed.clone(), reasons.clone());
            tokio::spawn(async move {
                let offset = rand::thread_rng().gen_range(0..interval.as_millis() as u64);
                tokio::time::sleep(Duration::from_millis(offset)).await;
                let mut next = tokio::time::Instant::now();
                let mut first = true;
                while Instant::now() < until {
                    let polled = poll_once(&http, &url).await;
                    // The first request opens the client's connection; the later ones reuse it.
                    let which = if std::mem::take(&mut first) {
                        "first request"
                    } else {
                        "later request"
                    };
                    match polled {
                        Ok(()) => done.fetch_add(1, Ordering::Relaxed),
                        Err(reason) => {
                            *reasons
                                .lock()
                                .unwrap()
                                .entry(format!("{which}, {reason}"))
                                .or_default() += 1;
                            failed.fetch_add(1, Ordering::Relaxed)
                        }
                    };
                    next += interval;
                    tokio::time::sleep_until(next).await;
                }
                anyhow::Ok(())
            })
        })
        .collect();
    for task in tasks {
        task.await??;
    }
    let (done, failed) = (done.load(Ordering::Relaxed), failed.load(Ordering::Relaxed));
    let reasons = reasons.lock().unwrap().clone();
    report(&args, done, failed, &reasons)?;
    Ok(failed == 0)
}

/// Every client, made before any polls: making one (its connector, its TLS settings) costs about
/// 2 ms of CPU, and 10,000 of them made inside the polling tasks held the runtime long enough
/// that early polls timed out here, not at the gateway.
fn make_clients(args: &PollArgs) -> anyhow::Result<Vec<(reqwest::Client, String)>> {
    let made = Instant::now();
    let clients = (0..args.crowd.clients)
        .map(|i| {
            let (source, gateway) = args.crowd.target(i);
            // One client, one kept-alive connection, as a browser polling the page.
            let http = floodgate_platform::outbound::client()
                .local_address(source)
                .pool_max_idle_per_host(1)
                .timeout(Duration::from_secs(10))
                .build()?;
            anyhow::Ok((
                http,
                format!("http://{gateway}/v1/sales/{}", args.crowd.sale),
            ))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    // deploy/bench.sh waits for this line before it starts the gateway's measured minute.
    eprintln!(
        "made {} clients in {:.1} s",
        clients.len(),
        made.elapsed().as_secs_f64()
    );
    Ok(clients)
}

/// Prints the table and writes the JSON, if asked.
fn report(
    args: &PollArgs,
    done: u64,
    failed: u64,
    reasons: &BTreeMap<String, u64>,
) -> anyhow::Result<()> {
    let report = json!({
        "scenario": "poll",
        "clients": args.crowd.clients,
        "interval_secs": args.interval_secs,
        "secs": args.secs,
        "requests": done,
        "failed": failed,
        "failures": reasons,
        "requests_per_second": done as f64 / args.secs.max(1) as f64,
    });
    let mut table = Table::new(&["figure", "value"]);
    table.row(&[
        "clients polling".into(),
        format!("{} every {} s", args.crowd.clients, args.interval_secs),
    ]);
    table.row(&["requests / failed".into(), format!("{done} / {failed}")]);
    for (reason, n) in reasons {
        table.row(&[format!("failed: {reason}"), n.to_string()]);
    }
    println!("{table}");
    if let Some(path) = &args.crowd.json {
        std::fs::write(path, serde_json::to_vec_pretty(&report)?)?;
    }
    Ok(())
}

/// One poll: `Err` says why it failed (the status, or the kind of error and its innermost cause).
async fn poll_once(http: &reqwest::Client, url: &str) -> Result<(), String> {
    let kind = |e: &reqwest::Error| {
        let what = if e.is_timeout() {
            "timeout"
        } else if e.is_connect() {
            "connect"
        } else if e.is_body() || e.is_decode() {
            "body"
        } else {
            "request"
        };
        let mut cause: &dyn std::error::Error = e;
        while let Some(inner) = cause.source() {
            cause = inner;
        }
        format!("{what}: {cause}")
    };
    let response = http.get(url).send().await.map_err(|e| kind(&e))?;
    let status = response.status();
    response.bytes().await.map_err(|e| kind(&e))?;
    if status.is_success() {
        Ok(())
    } else {
        Err(format!("status {}", status.as_u16()))
    }
}
