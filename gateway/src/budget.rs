//! How many sessions a gateway takes before it sheds joins (503 `gateway_full`, with
//! `Retry-After`): as many as its open-files limit allows and its memory limit holds, whichever
//! is fewer. A gateway that ran past its container's memory limit would be killed with every
//! session it holds; one that sheds joins sends them to the others.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The memory a session is counted at: the gateway's own part (2.6 KB idle, up to 8.7 KB in a
/// join ramp before freed pages are given back: BENCHMARKS.md) and the kernel's socket buffers,
/// which the container's memory limit counts too, with room to spare.
pub const BYTES_PER_SESSION: u64 = 16 * 1024;

/// Memory kept back from the limit for all that is not a session: the runtime, Redis
/// connections, the page, the buffers of a join ramp.
pub const RESERVE_BYTES: u64 = 256 * 1024 * 1024;

/// Descriptors kept back from the open-files limit for Redis, the listener, logs and the HTTP
/// requests that are not sessions.
const RESERVE_FILES: u64 = 256;

/// The session budget with `open_files` descriptors and, if the container has one, a memory
/// limit of `memory_limit` bytes.
pub fn sessions(open_files: u64, memory_limit: Option<u64>) -> u64 {
    let by_files = open_files.saturating_sub(RESERVE_FILES);
    let by_memory = memory_limit.map_or(u64::MAX, |limit| {
        limit.saturating_sub(RESERVE_BYTES) / BYTES_PER_SESSION
    });
    by_files.min(by_memory).max(1)
}

/// This process's memory limit, from its cgroup: `memory.max` (cgroup v2) or
/// `memory/memory.limit_in_bytes` (v1), as a container sees its own. `None` without a limit.
pub fn memory_limit() -> Option<u64> {
    [
        "/sys/fs/cgroup/memory.max",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    ]
    .iter()
    .find_map(|path| parse_limit(&std::fs::read_to_string(path).ok()?))
}

/// A cgroup's limit as written: bytes, or `max` for none (v1 writes a number near 2^63).
fn parse_limit(text: &str) -> Option<u64> {
    let bytes: u64 = text.trim().parse().ok()?;
    (bytes < 1 << 60).then_some(bytes)
}

/// The gateway's connection budget: past it, new sessions are shed before the upgrade (503 with
/// `Retry-After`) instead of failing later for want of file descriptors or memory.
pub struct Budget {
    max: u64,
    open: AtomicU64,
    /// Sessions opened and closed since the start, each counted once: what the memory trimmer
    /// watches for the end of a ramp.
    churn: AtomicU64,
}

impl Budget {
    pub fn new(max: u64) -> Arc<Self> {
        Arc::new(Self {
            max: max.max(1),
            open: AtomicU64::new(0),
            churn: AtomicU64::new(0),
        })
    }

    /// A slot for one more session, or `None` if the gateway is full.
    pub fn take(self: &Arc<Self>) -> Option<BudgetSlot> {
        let taken = self
            .open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |open| {
                (open < self.max).then_some(open + 1)
            })
            .is_ok();
        if !taken {
            metrics::counter!("floodgate_joins_refused_total", "reason" => "gateway_full")
                .increment(1);
            return None;
        }
        self.churn.fetch_add(1, Ordering::Relaxed);
        Some(BudgetSlot {
            budget: self.clone(),
        })
    }

    pub fn max(&self) -> u64 {
        self.max
    }

    /// Sessions opened plus sessions closed so far.
    pub fn churn(&self) -> u64 {
        self.churn.load(Ordering::Relaxed)
    }
}

/// One session's share of the connection budget, given back on drop.
pub struct BudgetSlot {
    budget: Arc<Budget>,
}

impl Drop for BudgetSlot {
    fn drop(&mut self) {
        self.budget.open.fetch_sub(1, Ordering::AcqRel);
        self.budget.churn.fetch_add(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_sheds_past_its_size_and_refills() {
        let budget = Budget::new(2);
        let a = budget.take().unwrap();
        let _b = budget.take().unwrap();
        assert!(budget.take().is_none());
        drop(a);
        assert!(budget.take().is_some());
    }

    #[test]
    fn the_budget_is_what_both_limits_allow() {
        assert_eq!(sessions(20_000, None), 19_744);
        assert_eq!(sessions(100, None), 1, "never zero");
        // 4 GiB (the manifests' limit): about 245,000 sessions, fewer than a million files.
        assert_eq!(sessions(1_048_576, Some(4 << 30)), 245_760);
        // 384 MiB: 128 MiB for sessions.
        assert_eq!(sessions(20_000, Some(384 << 20)), 8_192);
        assert_eq!(
            sessions(20_000, Some(100 << 20)),
            1,
            "a limit under the reserve"
        );
    }

    #[test]
    fn a_cgroup_limit_is_read_as_written() {
        assert_eq!(parse_limit("402653184\n"), Some(402_653_184));
        assert_eq!(parse_limit("max\n"), None);
        assert_eq!(parse_limit("9223372036854771712\n"), None, "v1's no limit");
        assert_eq!(parse_limit(""), None);
    }
}
