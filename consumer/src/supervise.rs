//! The consumer's work in a child process of its own, started again when a crash kills it.
//!
//! Why: the Kafka client librdkafka (2.12.1, bundled) dereferences a null topic name, and the
//! process dies of SIGSEGV, when a Fetch reply tells of a partition's new leader for a topic it
//! names only by an all-zero id. Tansu 0.6 answers exactly so for a topic it momentarily cannot
//! find, which happens while other topics are created and deleted on it (docs/runbook.md, "The
//! consumer's worker restarted"; the reports for both projects are in docs/upstream.md). No
//! client setting avoids that code. A crash loses nothing here: a batch's rows and its
//! partitions' offsets are committed together in PostgreSQL, and a worker that starts again under
//! the same instance id takes its partitions straight back. So the process that runs the
//! consumer supervises: it runs the worker (this binary again, with [`WORKER_ENV`] set), passes
//! SIGTERM and SIGINT on to it, and starts it again after a crash within a second at first,
//! where an orchestrator backs off for minutes (Kubernetes' CrashLoopBackOff). A worker that
//! ends by itself (stopped, or refusing a bad setting) ends the supervisor with its exit code.
//! The worker dies with its supervisor (the kernel kills it), so neither is ever left alone.
//!
//! Set `FLOODGATE_CONSUMER_WORKER=1` to run the worker in the foreground process itself (under a
//! debugger, say).

use std::os::unix::process::ExitStatusExt as _;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use tokio_util::sync::CancellationToken;

/// Set in the worker's environment: run the consumer itself, not a supervisor.
pub const WORKER_ENV: &str = "FLOODGATE_CONSUMER_WORKER";
/// Set in the worker's environment: how many times the supervisor started it again (the
/// `floodgate_consumer_worker_restarts` gauge).
pub const RESTARTS_ENV: &str = "FLOODGATE_CONSUMER_WORKER_RESTARTS";
/// Set in the worker's environment: the supervisor's process id.
const SUPERVISOR_ENV: &str = "FLOODGATE_CONSUMER_SUPERVISOR";

/// The first pause before a crashed worker starts again; each crash within [`STEADY`] of its
/// start doubles it, up to [`MOST_BACKOFF`], so a worker that crashes at once does not spin.
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
const MOST_BACKOFF: Duration = Duration::from_secs(30);
/// A worker that ran this long crashed by bad luck, not at start: the pause starts over.
const STEADY: Duration = Duration::from_secs(60);

/// Whether this process is the worker (else it supervises one).
pub fn is_worker() -> bool {
    std::env::var_os(WORKER_ENV).is_some()
}

/// In the worker: the kernel kills it if its supervisor dies (by `kill -9`, say), so a worker is
/// never left running on its own. Returns how many times the supervisor started it again.
pub fn become_worker() -> anyhow::Result<u64> {
    if let Some(supervisor) = std::env::var(SUPERVISOR_ENV)
        .ok()
        .and_then(|pid| pid.parse::<u32>().ok())
    {
        nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)
            .context("asking to die with the supervisor")?;
        // The supervisor may have gone before the request was made.
        anyhow::ensure!(
            std::os::unix::process::parent_id() == supervisor,
            "the supervisor is gone"
        );
    }
    Ok(std::env::var(RESTARTS_ENV)
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0))
}

/// Runs the worker until it ends by itself or `shutdown` (SIGTERM, SIGINT) ends it; starts it
/// again after every crash. Returns the worker's last exit code.
pub async fn supervise(shutdown: CancellationToken) -> anyhow::Result<i32> {
    let exe = std::env::current_exe().context("finding this program")?;
    let args: Vec<_> = std::env::args_os().skip(1).collect();
    let mut restarts = 0u64;
    let mut backoff = FIRST_BACKOFF;
    loop {
        let mut worker = tokio::process::Command::new(&exe)
            .args(&args)
            .env(WORKER_ENV, "1")
            .env(RESTARTS_ENV, restarts.to_string())
            .env(SUPERVISOR_ENV, std::process::id().to_string())
            .spawn()
            .context("starting the consumer's worker")?;
        let started = Instant::now();
        let status = tokio::select! {
            status = worker.wait() => status.context("waiting for the worker")?,
            () = shutdown.cancelled() => {
                if let Some(pid) = worker.id() {
                    let _ = kill(Pid::from_raw(pid as i32), Signal::SIGTERM);
                }
                return Ok(code(worker.wait().await.context("waiting for the worker")?));
            }
        };
        let Some(signal) = status.signal() else {
            return Ok(code(status));
        };
        restarts += 1;
        if started.elapsed() >= STEADY {
            backoff = FIRST_BACKOFF;
        }
        tracing::error!(
            signal,
            restarts,
            after_secs = started.elapsed().as_secs(),
            "the consumer's worker was killed by a signal (a crash in the Kafka client, see docs/runbook.md); starting it again"
        );
        tokio::select! {
            () = tokio::time::sleep(backoff) => {}
            () = shutdown.cancelled() => return Ok(0),
        }
        backoff = (backoff * 2).min(MOST_BACKOFF);
    }
}

/// The exit code a worker's status stands for (128 + the signal, as shells say it).
fn code(status: ExitStatus) -> i32 {
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1)
}
