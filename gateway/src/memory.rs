//! Giving freed memory back to the system once a join ramp is over.
//!
//! Each join allocates and frees more than its session keeps (hyper's 8 KiB request buffer, the
//! upgrade's response, the Redis round trip). The gateway's allocator, jemalloc (`main.rs` says
//! why), keeps freed pages for its decay time (10 s) and hands them back as the process goes on
//! allocating; a gateway whose ramp is over allocates little, so they would stay. A purge hands
//! every freed page back at once (BENCHMARKS.md, "Gateway memory per idle WebSocket"). It walks
//! the allocator's arenas holding their locks, so it runs only when a ramp has ended (many
//! sessions opened or closed since the last purge, few in the last period), on a blocking
//! thread, never during a rush, when the freed pages are reused anyway.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::budget::Budget;

/// How often the trimmer looks at the churn.
const PERIOD: Duration = Duration::from_secs(2);
/// Sessions opened or closed since the last trim that make one worth it.
const AFTER: u64 = 1_000;
/// Fewer than this many in the last period: the ramp is over.
const QUIET: u64 = 100;

/// Whether to trim now: `since` sessions opened or closed since the last trim, `lately` of them
/// in the last period.
fn due(since: u64, lately: u64) -> bool {
    since >= AFTER && lately < QUIET
}

/// Watches the gateway's session churn and trims after each ramp, until `shutdown`.
pub fn trim_after_ramps(budget: Arc<Budget>, shutdown: CancellationToken) {
    tokio::spawn(async move {
        let mut every = floodgate_platform::service::Every::new(PERIOD, shutdown);
        let (mut trimmed_at, mut last) = (budget.churn(), budget.churn());
        while every.tick().await {
            let churn = budget.churn();
            if due(churn - trimmed_at, churn - last) {
                trimmed_at = churn;
                let _ = tokio::task::spawn_blocking(trim).await;
            }
            last = churn;
        }
    });
}

/// Gives every whole free page of the allocator's back to the system; logs what it took.
fn trim() {
    let before = floodgate_platform::telemetry::resident_memory_bytes();
    let started = Instant::now();
    release();
    let after = floodgate_platform::telemetry::resident_memory_bytes();
    metrics::counter!("floodgate_memory_trims_total").increment(1);
    tracing::debug!(
        took_ms = started.elapsed().as_secs_f64() * 1e3,
        resident_before = before,
        resident_after = after,
        "freed memory given back"
    );
}

#[allow(unsafe_code)] // the one exception to the workspace's rule (Cargo.toml says why)
fn release() {
    // SAFETY: the name is a NUL-terminated string, and purging is a control that reads and
    // writes no value, so every pointer is null and the length 0, as jemalloc's manual gives.
    // 4096 (MALLCTL_ARENAS_ALL) names every arena.
    let failed = unsafe {
        tikv_jemalloc_sys::mallctl(
            c"arena.4096.purge".as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        )
    };
    if failed != 0 {
        tracing::warn!(error = failed, "jemalloc refused to purge its arenas");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trim_waits_for_a_ramp_to_end() {
        assert!(!due(0, 0), "nothing happened");
        assert!(!due(999, 0), "too few sessions to be worth a trim");
        assert!(!due(20_000, 5_000), "the ramp is still going");
        assert!(!due(20_000, QUIET), "still joining at the quiet threshold");
        assert!(due(20_000, 99), "the ramp is over");
        assert!(due(AFTER, 0));
    }

    #[cfg(target_os = "linux")] // the resident memory is read from /proc
    #[test]
    fn a_purge_gives_freed_pages_back() {
        // Many small blocks, nearly all freed: jemalloc keeps the emptied runs of their size
        // for its decay time (10 s), unless purged. This test binary runs on jemalloc too
        // (lib.rs), as the gateway does.
        let mut blocks: Vec<Vec<u8>> = (0..40_000).map(|i| vec![i as u8; 2048]).collect();
        let kept: Vec<Vec<u8>> = blocks
            .iter_mut()
            .enumerate()
            .filter(|(i, _)| i % 64 == 0)
            .map(|(_, b)| std::mem::take(b))
            .collect();
        drop(blocks);
        let before = floodgate_platform::telemetry::resident_memory_bytes().unwrap();
        release();
        let after = floodgate_platform::telemetry::resident_memory_bytes().unwrap();
        assert!(
            after + 32 * 1024 * 1024 < before,
            "about 80 MiB freed, under 32 MiB given back: {before} to {after} bytes"
        );
        assert_eq!(kept.len(), 625);
    }
}
