//! What the draw's public record costs a stranger's requests (issue 29): a page of nonces reads
//! up to 10,000 of them from the sale's slot, the primary every join hits, and a varied `from`
//! always misses a CDN's cache. So, on each gateway:
//!
//! - a page or proof of a **closed** draw is final: once read it is kept in memory (up to
//!   [`CACHE_BYTES`], the oldest dropped first) and served from there, so each is read from
//!   Redis about once per gateway however many ask;
//! - every read that does reach Redis takes a token from the gateway's own budget
//!   (`FLOODGATE_DRAW_READS_PER_SEC`, bursts of twice that): past it, 503 `draw_busy` with
//!   `Retry-After`, so the Redis work of the whole record is bounded per gateway, whoever asks;
//! - each client address may ask `FLOODGATE_DRAW_REQUESTS_PER_SEC_PER_IP` times a second (bursts of
//!   twice that): past it, 429 `draw_rate_limited`, so one address cannot spend the budget alone.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::Mutex;

use axum::body::Bytes;
use floodgate_protocol::api::code;

use crate::error::ApiError;
use crate::guards::{Guard, Refusals};

/// Most bytes of final pages kept per gateway: a 2-million-ticket pre-queue's whole record is
/// about 80 MB, and a CDN in front keeps the rest.
pub const CACHE_BYTES: usize = 32 * 1024 * 1024;

/// The gateway's guard of the draw's record.
pub struct DrawGuard {
    guard: Guard,
    finals: Mutex<Finals>,
}

/// Final answers by request, oldest first out.
#[derive(Default)]
struct Finals {
    by_key: HashMap<String, Bytes>,
    order: VecDeque<String>,
    bytes: usize,
}

const REFUSALS: Refusals = Refusals {
    limited: code::DRAW_RATE_LIMITED,
    limited_message: "asking for the draw's record too fast from this address; retry in a second",
    busy: code::DRAW_BUSY,
    busy_message: "the draw's record is much asked for right now; retry in a second",
};

impl DrawGuard {
    pub fn new(reads_per_sec: u32, requests_per_sec_per_client: u32) -> Self {
        Self {
            guard: Guard::new(requests_per_sec_per_client, Some(reads_per_sec), REFUSALS),
            finals: Mutex::default(),
        }
    }

    /// Lets one request of `client` in, or says why not.
    pub fn admit(&self, client: IpAddr) -> Result<(), ApiError> {
        self.guard.admit(client)
    }

    /// Forgets the addresses that have not asked lately (called every minute), so the per-address
    /// limiter does not grow with every address that ever asked.
    pub fn prune(&self) {
        self.guard.prune();
    }

    /// The final answer to `key`, if one was kept.
    pub fn kept(&self, key: &str) -> Option<Bytes> {
        self.finals.lock().expect("lock").by_key.get(key).cloned()
    }

    /// Takes a token of the gateway's read budget for one read of the record from Redis, within
    /// `client`'s share of it.
    pub fn read(&self, client: IpAddr) -> Result<(), ApiError> {
        self.guard.read(client)
    }

    /// Keeps `body`, the final answer to `key`, dropping the oldest past [`CACHE_BYTES`].
    pub fn keep(&self, key: String, body: Bytes) {
        if body.len() > CACHE_BYTES {
            return;
        }
        let mut finals = self.finals.lock().expect("lock");
        if finals.by_key.contains_key(&key) {
            return;
        }
        finals.bytes += body.len();
        finals.order.push_back(key.clone());
        finals.by_key.insert(key, body);
        while finals.bytes > CACHE_BYTES {
            let Some(oldest) = finals.order.pop_front() else {
                break;
            };
            if let Some(dropped) = finals.by_key.remove(&oldest) {
                finals.bytes -= dropped.len();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn final_answers_are_kept_within_the_budget_oldest_out_first() {
        let guard = DrawGuard::new(1, 1);
        let big = Bytes::from(vec![b'x'; CACHE_BYTES / 2]);
        guard.keep("a".into(), big.clone());
        guard.keep("b".into(), big.clone());
        assert!(guard.kept("a").is_some() && guard.kept("b").is_some());
        guard.keep("c".into(), Bytes::from_static(b"{}"));
        assert!(guard.kept("a").is_none(), "the oldest went first");
        assert!(guard.kept("b").is_some() && guard.kept("c").is_some());
        guard.keep("huge".into(), Bytes::from(vec![0; CACHE_BYTES + 1]));
        assert!(guard.kept("huge").is_none());
    }
}
