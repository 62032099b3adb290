//! Many people waiting in line at once, each the client crate's whole wait
//! ([`room::wait_in_line_with`]: resume, back-off with jitter, the close codes), in a task of
//! its own. The idle and fan-out scenarios watch their people through it.
//!
//! There is no leaner reader of frames beside it: measured side by side at 15,000 idle
//! sessions, such a reader saved 140 bytes of the load generator's 8.7 KB a session (1.6 %,
//! BENCHMARKS.md), not worth a second client of the protocol.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use floodgate_client::room::{self, Line, RoomEvent, Waited};
use tokio::sync::Semaphore;

/// Who waits, where.
pub struct Plan<'a> {
    /// Person `i` connects to gateway `i % n` first, and reconnects to the next ones in turn.
    pub gateways: &'a [SocketAddr],
    /// Person `i` connects from address `i % n`.
    pub from: &'a [IpAddr],
    pub sale: &'a str,
    pub people: u64,
    /// People between starting and holding their first ticket, at most.
    pub concurrency: usize,
}

/// What one person's watcher is told.
pub enum Seen<'a> {
    /// Something happened on the way (a ticket, a place, a reconnection).
    Event(&'a RoomEvent),
    /// The wait is over: admitted, sold out, or failed.
    Ended(&'a Waited),
}

/// Counted as it happens, so a caller waiting for everyone reads a few numbers, not every
/// person's state (that scan would compete for the CPU with the very messages being timed).
#[derive(Default)]
pub struct Count {
    /// People holding a ticket now.
    pub open: AtomicU64,
    /// Waits that are over (a failure, a turn, or sold out).
    pub ended: AtomicU64,
    /// Connections lost and made again with the resume token.
    pub reconnects: AtomicU64,
}

/// The people, once every one holds a ticket or has given up.
pub struct Waits {
    pub tasks: Vec<tokio::task::JoinHandle<()>>,
    pub count: Arc<Count>,
    /// People holding a ticket when opening ended.
    pub open: u64,
}

impl Waits {
    pub fn reconnects(&self) -> u64 {
        self.count.reconnects.load(Ordering::Relaxed)
    }
}

impl Drop for Waits {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// How long opening may take before the people still joining are left out of `open`.
const OPEN_TIMEOUT: Duration = Duration::from_secs(180);

/// Starts every person's wait and returns once each holds a ticket or has given up;
/// `watcher(i)` makes person `i`'s watcher.
pub async fn wait_many<W>(plan: &Plan<'_>, mut watcher: impl FnMut(u64) -> W) -> Waits
where
    W: FnMut(Seen<'_>) + Send + 'static,
{
    let count = Arc::new(Count::default());
    let joining = Arc::new(Semaphore::new(plan.concurrency.max(1)));
    let sale: Arc<str> = plan.sale.into();
    let started = Instant::now();
    let mut progress = Instant::now();
    let mut tasks = Vec::with_capacity(plan.people as usize);
    for i in 0..plan.people {
        let Ok(permit) = joining.clone().acquire_owned().await else {
            break;
        };
        if progress.elapsed() >= Duration::from_secs(1) {
            progress = Instant::now();
            report_progress(started, &count, plan.people);
        }
        let first = i as usize % plan.gateways.len();
        let gateways: Box<[SocketAddr]> = plan.gateways[first..]
            .iter()
            .chain(&plan.gateways[..first])
            .copied()
            .collect();
        let from = plan.from[i as usize % plan.from.len()];
        let (count, sale, mut watch) = (count.clone(), sale.clone(), watcher(i));
        tasks.push(tokio::spawn(async move {
            let mut line = Line::new(&gateways, &sale);
            line.from = Some(from);
            let mut permit = Some(permit);
            let waited = room::wait_in_line_with(&mut line, |event| {
                match &event {
                    RoomEvent::Ticket(_) if permit.take().is_some() => {
                        count.open.fetch_add(1, Ordering::Relaxed);
                    }
                    RoomEvent::Reconnecting { .. } => {
                        count.reconnects.fetch_add(1, Ordering::Relaxed);
                    }
                    _ => {}
                }
                watch(Seen::Event(&event));
            })
            .await;
            watch(Seen::Ended(&waited));
            // A wait over before the scenario is is no longer a held session.
            if permit.is_none() {
                count.open.fetch_sub(1, Ordering::Relaxed);
            }
            let ended = count.ended.fetch_add(1, Ordering::Relaxed);
            match &waited {
                Waited::Failed(why) if ended < 5 => eprintln!("a wait failed: {why}"),
                _ => {}
            }
        }));
    }
    let deadline = Instant::now() + OPEN_TIMEOUT;
    loop {
        let open = count.open.load(Ordering::Relaxed);
        if open + count.ended.load(Ordering::Relaxed) >= plan.people || Instant::now() >= deadline {
            return Waits { tasks, count, open };
        }
        if progress.elapsed() >= Duration::from_secs(1) {
            progress = Instant::now();
            report_progress(started, &count, plan.people);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn report_progress(started: Instant, count: &Count, people: u64) {
    eprintln!(
        "[{:>4.0}s] holding a ticket {}/{people}  ended {}",
        started.elapsed().as_secs_f64(),
        count.open.load(Ordering::Relaxed),
        count.ended.load(Ordering::Relaxed)
    );
}
