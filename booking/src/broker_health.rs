//! Whether the broker is known to be down, so a reservation is refused at once instead of each
//! one claiming its pass, taking seats, waiting out its delivery timeout and taking them back.
//!
//! The broker is **known down** once a send fails (an error, or no acknowledgement within the
//! delivery timeout) and no other send was acknowledged since that one began: with a broker that
//! answers, acknowledgements keep coming, and a failure of one partition's leader does not trip
//! everyone (a send started before the latest acknowledgement proves nothing about the whole
//! broker). While it is down, requests are answered 503 `broker_unavailable` with `Retry-After`
//! before anything is written to Redis, the relay waits, and a **probe** produces a small record
//! to the probe topic every [`PROBE_EVERY`]: its acknowledgement, or any other, brings the
//! broker back. Should nothing bring it back (a probe topic nobody made, say), one request every
//! [`HALF_OPEN_AFTER`] is let through to try the broker itself: the breaker never stays open by
//! itself. A fault of the broker is one that every booking instance
//! shares, so it never makes an instance unready (all of them unready would leave the edge only
//! bare 502s to give).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often a booking instance probes a broker it knows is down: it notices the broker's
/// return within this (plus the probe's own round trip).
pub const PROBE_EVERY: Duration = Duration::from_secs(1);

/// How long requests are refused at once without an acknowledgement before they are let
/// through again to try the broker themselves (each then waits for its delivery timeout).
pub const HALF_OPEN_AFTER: Duration = Duration::from_secs(30);

/// The broker's health as this instance has seen it. Cheap to share.
#[derive(Clone)]
pub struct BrokerHealth {
    inner: Arc<Inner>,
}

struct Inner {
    /// When this instance started: times below are milliseconds since then.
    epoch: Instant,
    /// The start of the latest send that was acknowledged, in ms since `epoch` (+1, so 0 means
    /// none yet).
    last_ack_ms: AtomicU64,
    down: AtomicBool,
    /// When the broker was last found down, in ms since `epoch`.
    down_at_ms: AtomicU64,
    half_open_after: Duration,
    /// Why, the last time a send failed (for readiness and the log).
    cause: Mutex<String>,
}

/// A send under way: taken before it is handed to the producer.
#[derive(Clone, Copy, Debug)]
pub struct SendStarted(u64);

impl Default for BrokerHealth {
    fn default() -> Self {
        Self::new(HALF_OPEN_AFTER)
    }
}

impl BrokerHealth {
    /// Health that lets requests through again `half_open_after` a trip (see the module).
    pub fn new(half_open_after: Duration) -> Self {
        metrics::gauge!("floodgate_kafka_available").set(1.0);
        Self {
            inner: Arc::new(Inner {
                epoch: Instant::now(),
                last_ack_ms: AtomicU64::new(0),
                down: AtomicBool::new(false),
                down_at_ms: AtomicU64::new(0),
                half_open_after,
                cause: Mutex::new(String::new()),
            }),
        }
    }

    fn now_ms(&self) -> u64 {
        self.inner.epoch.elapsed().as_millis() as u64 + 1
    }

    /// Marks the start of a send.
    pub fn started(&self) -> SendStarted {
        SendStarted(self.now_ms())
    }

    /// A send begun at `started` was acknowledged: the broker takes events.
    pub fn acked(&self, started: SendStarted) {
        self.inner
            .last_ack_ms
            .fetch_max(started.0, Ordering::AcqRel);
        if self.inner.down.swap(false, Ordering::AcqRel) {
            metrics::gauge!("floodgate_kafka_available").set(1.0);
            tracing::info!("the broker acknowledges events again");
        }
    }

    /// A send begun at `started` failed with `cause`. The broker is known down unless another
    /// send was acknowledged since this one began. True if this failure found it down (it was
    /// not known down before).
    pub fn failed(&self, started: SendStarted, cause: &str) -> bool {
        if self.inner.last_ack_ms.load(Ordering::Acquire) >= started.0 {
            return false;
        }
        *self.inner.cause.lock().unwrap_or_else(|e| e.into_inner()) = cause.to_owned();
        // Stored before `down` is raised, so a request that sees it down sees when.
        let now = self.now_ms();
        if self.inner.down.load(Ordering::Acquire) {
            return false;
        }
        self.inner.down_at_ms.store(now, Ordering::Release);
        if self.inner.down.swap(true, Ordering::AcqRel) {
            return false;
        }
        metrics::gauge!("floodgate_kafka_available").set(0.0);
        metrics::counter!("floodgate_kafka_down_total").increment(1);
        tracing::error!(%cause, "the broker does not acknowledge events: reservations are refused at once until it does");
        true
    }

    /// Whether the broker is known to be down now: the relay waits and the probe runs.
    pub fn is_down(&self) -> bool {
        self.inner.down.load(Ordering::Acquire)
    }

    /// Whether a request may try the broker now: yes while it is not known down; while it is,
    /// one request every [`HALF_OPEN_AFTER`] goes through as a trial (the others are refused at
    /// once), so the breaker never stays open by itself even if no probe gets through.
    pub fn admit(&self) -> bool {
        if !self.is_down() {
            return true;
        }
        let at = self.inner.down_at_ms.load(Ordering::Acquire);
        let now = self.now_ms();
        now.saturating_sub(at) >= self.inner.half_open_after.as_millis() as u64
            && self
                .inner
                .down_at_ms
                .compare_exchange(at, now, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
    }

    /// Why the broker was found down, until it acknowledges again.
    pub fn down_because(&self) -> Option<String> {
        self.inner.down.load(Ordering::Acquire).then(|| {
            self.inner
                .cause
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_trips_it_only_with_no_ack_since_its_send_began() {
        let health = BrokerHealth::default();
        assert!(!health.is_down());
        let early = health.started();
        std::thread::sleep(Duration::from_millis(2));
        let later = health.started();
        // Another send, begun after the failed one, was acknowledged: a partition's trouble,
        // not the broker's.
        health.acked(later);
        health.failed(early, "timed out");
        assert!(!health.is_down());

        std::thread::sleep(Duration::from_millis(2));
        let failing = health.started();
        health.failed(failing, "broker transport failure");
        assert_eq!(
            health.down_because().as_deref(),
            Some("broker transport failure")
        );
        // Any acknowledgement, a probe's or a request's, brings it back.
        let probe = health.started();
        health.acked(probe);
        assert!(!health.is_down());
        assert_eq!(health.down_because(), None);
    }

    #[test]
    fn one_request_at_a_time_tries_again_after_a_while() {
        let health = BrokerHealth::new(Duration::from_millis(20));
        assert!(health.admit());
        assert!(health.failed(health.started(), "probe topic missing"));
        assert!(!health.admit(), "refused at once");
        // Probes keep failing meanwhile; they do not hold the trial back.
        assert!(!health.failed(health.started(), "probe failed"));
        std::thread::sleep(Duration::from_millis(30));
        assert!(health.admit(), "one request tries the broker");
        assert!(!health.admit(), "and only one");
        assert!(health.is_down() && health.down_because().is_some());
        health.acked(health.started());
        assert!(health.admit() && !health.is_down());
    }
}
