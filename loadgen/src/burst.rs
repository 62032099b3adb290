//! `floodgate-loadgen burst`: N joins inside a window (one second by default), as at the
//! opening, and how long each took to get its ticket.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::queue::Crowd;
use crate::report::{Cpu, Latencies, Table};

#[derive(Clone, Debug, clap::Args)]
pub struct BurstArgs {
    #[command(flatten)]
    pub crowd: Crowd,
    /// The window the joins are spread over, in milliseconds.
    #[arg(long, default_value_t = 1_000)]
    pub within_ms: u64,
}

pub async fn burst(args: BurstArgs) -> anyhow::Result<bool> {
    args.crowd.check()?;
    let n = args.crowd.clients;
    let (started, cpu) = (Instant::now(), Cpu::now());
    let spacing = Duration::from_micros(args.within_ms * 1000 / n.max(1));
    let tasks: Vec<_> = (0..n)
        .map(|i| {
            let (source, gateway) = args.crowd.target(i);
            let start = started + spacing * i as u32;
            let sale = args.crowd.sale.clone();
            tokio::spawn(async move {
                tokio::time::sleep_until(start.into()).await;
                let asked = Instant::now();
                // One connection, as at the opening: the time to its ticket is the figure, so a
                // failure is counted, not retried.
                match crate::session(source, gateway, &sale).await {
                    Ok(ws) => Ok((asked.elapsed(), ws)),
                    Err(e) => Err(format!("{e:#}")),
                }
            })
        })
        .collect();
    let mut times = Vec::with_capacity(tasks.len());
    let mut sockets = Vec::with_capacity(tasks.len());
    let mut errors: Vec<String> = Vec::new();
    for task in tasks {
        match task.await {
            Ok(Ok((took, ws))) => {
                times.push(took);
                sockets.push(ws);
            }
            Ok(Err(e)) => errors.push(e),
            Err(e) => errors.push(e.to_string()),
        }
    }
    let all_in = started.elapsed().as_secs_f64();
    let cpu = cpu.since();
    drop(sockets);
    let latencies = Latencies::of(times.iter().copied());
    let samples: Vec<u64> = times.iter().map(|t| t.as_millis() as u64).collect();
    let report: Value = json!({
        "scenario": "burst",
        "sale": args.crowd.sale,
        "clients": n,
        "within_ms": args.within_ms,
        "ticketed": times.len(),
        "failed": errors.len(),
        "first_errors": errors.iter().take(5).collect::<Vec<_>>(),
        "seconds_until_all_ticketed": all_in,
        "join_to_ticket_ms": latencies,
        "samples_ms": samples,
        "loadgen_cpu": cpu,
    });
    let mut table = Table::new(&["figure", "value"]);
    table.row(&[
        "joins".into(),
        format!("{} within {} ms", n, args.within_ms),
    ]);
    table.row(&["ticketed".into(), times.len().to_string()]);
    table.row(&["failed".into(), errors.len().to_string()]);
    table.row(&["all ticketed after".into(), format!("{all_in:.2} s")]);
    table.row(&[
        "join to ticket p50 / p99 / max".into(),
        Latencies::describe(&report["join_to_ticket_ms"]),
    ]);
    println!("{table}");
    if let Some(path) = &args.crowd.json {
        std::fs::write(path, serde_json::to_vec_pretty(&report)?)?;
    }
    Ok(errors.is_empty())
}
