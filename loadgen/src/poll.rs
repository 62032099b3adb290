//! `floodgate-loadgen poll`: waiting the way polling waiting rooms do, for comparison with the
//! WebSocket push: each client has a connection of its own and asks for the sale's status every
//! few seconds (starting at a random moment in the first interval, so the requests spread out).
//! `deploy/bench.sh poll` reads the gateway's CPU time while these run, and while as many
//! WebSocket clients wait.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
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
    let interval = Duration::from_secs(args.interval_secs.max(1));
    let until = Instant::now() + Duration::from_secs(args.secs);
    let tasks: Vec<_> = (0..args.crowd.clients)
        .map(|i| {
            let (source, gateway) = args.crowd.target(i);
            let url = format!("http://{gateway}/v1/sales/{}", args.crowd.sale);
            let (done, failed) = (done.clone(), failed.clone());
            tokio::spawn(async move {
                // One client, one kept-alive connection, as a browser polling the page.
                let http = reqwest::Client::builder()
                    .local_address(source)
                    .pool_max_idle_per_host(1)
                    .timeout(Duration::from_secs(10))
                    .build()?;
                let offset = rand::thread_rng().gen_range(0..interval.as_millis() as u64);
                tokio::time::sleep(Duration::from_millis(offset)).await;
                let mut next = tokio::time::Instant::now();
                while Instant::now() < until {
                    let ok = match http.get(&url).send().await {
                        Ok(r) => r.status().is_success() && r.bytes().await.is_ok(),
                        Err(_) => false,
                    };
                    if ok { &done } else { &failed }.fetch_add(1, Ordering::Relaxed);
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
    let report = json!({
        "scenario": "poll",
        "clients": args.crowd.clients,
        "interval_secs": args.interval_secs,
        "secs": args.secs,
        "requests": done,
        "failed": failed,
        "requests_per_second": done as f64 / args.secs.max(1) as f64,
    });
    let mut table = Table::new(&["figure", "value"]);
    table.row(&[
        "clients polling".into(),
        format!("{} every {} s", args.crowd.clients, args.interval_secs),
    ]);
    table.row(&["requests / failed".into(), format!("{done} / {failed}")]);
    println!("{table}");
    if let Some(path) = &args.crowd.json {
        std::fs::write(path, serde_json::to_vec_pretty(&report)?)?;
    }
    Ok(failed == 0)
}
