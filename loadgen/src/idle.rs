//! `floodgate-loadgen idle`: many sessions opened, then held idle (answering pings), the measure
//! of a gateway's memory per idle connection (BENCHMARKS.md, `deploy/bench-idle.sh`).
//!
//! Two kinds of client, so what the lean one saves is a measured figure, not a claim:
//! - `lean` (the default, and what `queue` and `burst` use): each session is the client crate's
//!   connection and ticket ([`room::join`]) and then a task that only reads frames. No resume,
//!   no back-off: a benchmark wants a lost session counted, not quietly replaced.
//! - `full`: each session is the whole well-behaved client, [`room::wait_in_line_with`], with
//!   its resume token, back-off and close-code handling, as a person's app runs it.
//!
//! Either way the process reports its own resident memory per session, so a load test can be
//! sized (one loadgen process holds at most the open-files limit of sessions).

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use floodgate_client::room::{self, Line, RoomEvent};
use futures::StreamExt;
use serde_json::json;
use tokio::sync::Semaphore;

/// Which client holds each session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ClientKind {
    /// The connection and its ticket, then a reader of frames.
    Lean,
    /// The client crate's whole wait in line (resume, back-off, close codes).
    Full,
}

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
    /// The client that holds each session.
    #[arg(long, value_enum, default_value = "lean")]
    pub client: ClientKind,
    /// Also write the figures as JSON to this file.
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
}

/// How long the sessions sit before this process reads its own memory: the first pre-queue
/// messages and the allocator settle (the gateway's own figure waits as long, in bench-idle.sh).
const SETTLE: Duration = Duration::from_secs(5);

/// How long opening may take before the sessions still joining are counted as failed.
const OPEN_TIMEOUT: Duration = Duration::from_secs(180);

/// Opens the sessions and holds them; `false` when any failed to get a ticket.
pub async fn run(args: IdleArgs) -> anyhow::Result<bool> {
    crate::loopback_only(std::iter::once(args.gateway.ip()).chain(args.from.iter().copied()))?;
    crate::room_for(args.connections)?;
    let rss_before = crate::queue::rss(&[std::process::id()]);
    let started = Instant::now();
    let (holders, open, failed) = match args.client {
        ClientKind::Lean => open_lean(&args).await,
        ClientKind::Full => open_full(&args).await,
    };
    let open_secs = started.elapsed().as_secs_f64();
    tokio::time::sleep(SETTLE).await;
    let rss_after = crate::queue::rss(&[std::process::id()]);
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
            "loadgen memory per session ({:?} client): {:.2} KB ({bytes:.0} bytes)",
            args.client,
            bytes / 1000.0
        );
    }
    if let Some(path) = &args.json {
        let report = json!({
            "scenario": "idle",
            "client": format!("{:?}", args.client).to_lowercase(),
            "connections": args.connections,
            "open": open,
            "failed": failed,
            "seconds_to_open": open_secs,
            "loadgen_rss_kib_before": rss_before,
            "loadgen_rss_kib_after": rss_after,
            "loadgen_bytes_per_session": per_session,
        });
        std::fs::write(path, serde_json::to_vec_pretty(&report)?)?;
    }
    tokio::time::sleep(Duration::from_secs(args.hold_secs)).await;
    for holder in holders {
        holder.abort();
    }
    Ok(failed == 0)
}

type Opened = (Vec<tokio::task::JoinHandle<()>>, u64, u64);

/// Lean sessions: joined `concurrency` at a time, each then read by a task that only keeps the
/// connection alive (the library answers pings while frames are read).
async fn open_lean(args: &IdleArgs) -> Opened {
    let failed = AtomicU64::new(0);
    let sessions = futures::stream::iter(0..args.connections)
        .map(|i| {
            let source = args.from[i as usize % args.from.len()];
            let failed = &failed;
            async move {
                match crate::session(source, args.gateway, &args.sale).await {
                    Ok(ws) => Some(ws),
                    Err(e) => {
                        if failed.fetch_add(1, Ordering::Relaxed) < 5 {
                            eprintln!("connection failed: {e:#}");
                        }
                        None
                    }
                }
            }
        })
        .buffer_unordered(args.concurrency.max(1))
        .filter_map(|ws| async move { ws })
        .collect::<Vec<_>>()
        .await;
    let open = sessions.len() as u64;
    let readers = sessions
        .into_iter()
        .map(|mut ws| tokio::spawn(async move { while let Some(Ok(_)) = ws.next().await {} }))
        .collect();
    (readers, open, failed.into_inner())
}

/// Full clients: each a task waiting in line; at most `concurrency` of them between starting
/// and holding their first ticket.
async fn open_full(args: &IdleArgs) -> Opened {
    /// Sessions holding a ticket now, and waits that ended (a failure, or a turn or sold-out
    /// that an idle room should not see); both move as they happen.
    #[derive(Default)]
    struct Count {
        open: AtomicU64,
        ended: AtomicU64,
    }
    let count = Arc::new(Count::default());
    let joining = Arc::new(Semaphore::new(args.concurrency.max(1)));
    let sale: Arc<str> = args.sale.as_str().into();
    let mut waits = Vec::with_capacity(args.connections as usize);
    for i in 0..args.connections {
        let Ok(permit) = joining.clone().acquire_owned().await else {
            break;
        };
        let (gateways, from) = ([args.gateway], args.from[i as usize % args.from.len()]);
        let (count, sale) = (count.clone(), sale.clone());
        waits.push(tokio::spawn(async move {
            let mut line = Line::new(&gateways, &sale);
            line.from = Some(from);
            let mut permit = Some(permit);
            let waited = room::wait_in_line_with(&mut line, |event| {
                if matches!(event, RoomEvent::Ticket(_)) && permit.take().is_some() {
                    count.open.fetch_add(1, Ordering::Relaxed);
                }
            })
            .await;
            // A wait that ends before the hold does is not a held session: the figure must not
            // count it.
            if permit.is_none() {
                count.open.fetch_sub(1, Ordering::Relaxed);
            }
            if count.ended.fetch_add(1, Ordering::Relaxed) < 5 {
                eprintln!("session ended: {waited:?}");
            }
        }));
    }
    let deadline = Instant::now() + OPEN_TIMEOUT;
    loop {
        let (open, ended) = (
            count.open.load(Ordering::Relaxed),
            count.ended.load(Ordering::Relaxed),
        );
        if open + ended >= args.connections || Instant::now() >= deadline {
            return (waits, open, args.connections - open);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
