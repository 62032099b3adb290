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
//! broker back. A fault of the broker is one that every booking instance shares, so it never
//! makes an instance unready (all of them unready would leave the edge only bare 502s to give).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often a booking instance probes a broker it knows is down: it notices the broker's
/// return within this (plus the probe's own round trip).
pub const PROBE_EVERY: Duration = Duration::from_secs(1);

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
    /// Why, the last time a send failed (for readiness and the log).
    cause: Mutex<String>,
}

/// A send under way: taken before it is handed to the producer.
#[derive(Clone, Copy, Debug)]
pub struct SendStarted(u64);

impl Default for BrokerHealth {
    fn default() -> Self {
        metrics::gauge!("floodgate_kafka_available").set(1.0);
        Self {
            inner: Arc::new(Inner {
                epoch: Instant::now(),
                last_ack_ms: AtomicU64::new(0),
                down: AtomicBool::new(false),
                cause: Mutex::new(String::new()),
            }),
        }
    }
}

impl BrokerHealth {
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
    /// send was acknowledged since this one began.
    pub fn failed(&self, started: SendStarted, cause: &str) {
        if self.inner.last_ack_ms.load(Ordering::Acquire) >= started.0 {
            return;
        }
        *self.inner.cause.lock().unwrap_or_else(|e| e.into_inner()) = cause.to_owned();
        if !self.inner.down.swap(true, Ordering::AcqRel) {
            metrics::gauge!("floodgate_kafka_available").set(0.0);
            metrics::counter!("floodgate_kafka_down_total").increment(1);
            tracing::error!(%cause, "the broker does not acknowledge events: reservations are refused at once until it does");
        }
    }

    /// Whether the broker is known to be down now.
    pub fn is_down(&self) -> bool {
        self.inner.down.load(Ordering::Acquire)
    }

    /// Why the broker is known down, if it is.
    pub fn down_because(&self) -> Option<String> {
        self.is_down().then(|| {
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
}
