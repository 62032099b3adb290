//! What the autopilot reads: the services' health summary, the targets each signal is judged
//! against, and which signal is worst.

use serde::{Deserialize, Serialize};

use super::window::BUCKET_WIDTH;

/// What the services publish of their health, merged for one sale: the reservation endpoint's
/// (every booking instance's), the pool scripts', the broker's as the producers see it, and the
/// consumer's lag. Any field may be missing (a service that does not publish it); a missing
/// signal is not judged.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
// Named apart from the probes' `Health` in the ops document.
#[schema(as = SaleHealth)]
pub struct Health {
    /// When the oldest part of this summary was measured (Unix milliseconds).
    pub at_ms: i64,
    /// Reservations answered in the summary's window: fewer than [`MIN_REQUESTS`] and the
    /// latencies they measure (the reservation's, its pool script's) and the error share are not
    /// judged (too few to mean anything: one slow call is not a strained backend).
    pub requests: u64,
    /// The reservation endpoint's p99 latency.
    pub reservation_p99_ms: Option<f64>,
    /// The share of reservations answered 503 or 5xx.
    pub error_share: Option<f64>,
    /// The p99 time of the pool scripts the reservations ran (`reserve.lua` on the pool's
    /// primary, the round trip included), the slowest instance's.
    pub script_p99_ms: Option<f64>,
    /// The broker's p99 acknowledgement time, as the booking service's producer sees it.
    pub produce_p99_ms: Option<f64>,
    /// Events written to the topic and not yet applied by the consumer group.
    pub consumer_lag: Option<u64>,
    /// When the lag was measured (Unix ms; `at_ms` if absent). The consumers measure it apart
    /// from the booking services that carry it, so it goes stale on its own: a stale lag is not
    /// judged, and without a fresh one the rate is never raised.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumer_lag_at_ms: Option<i64>,
}

impl Health {
    /// The consumer lag if it was measured within `stale_ms` of `now_ms`.
    pub fn fresh_lag(&self, now_ms: i64, stale_ms: i64) -> Option<u64> {
        let at = self.consumer_lag_at_ms.unwrap_or(self.at_ms);
        self.consumer_lag.filter(|_| now_ms - at <= stale_ms)
    }
}

/// Fewer reservations than this in a summary's window, and its latency and error share are not
/// judged.
pub const MIN_REQUESTS: u64 = 20;

/// The level of each signal past which the backend counts as strained.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Targets {
    pub reservation_p99_ms: f64,
    pub error_share: f64,
    pub script_p99_ms: f64,
    pub produce_p99_ms: f64,
    pub consumer_lag: u64,
}

impl Default for Targets {
    fn default() -> Self {
        Self {
            reservation_p99_ms: 500.0,
            error_share: 0.01,
            script_p99_ms: 50.0,
            produce_p99_ms: 500.0,
            consumer_lag: 50_000,
        }
    }
}

/// Which signal drove a decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Signal {
    ReservationLatency,
    Errors,
    ScriptLatency,
    ProduceLatency,
    ConsumerLag,
}

/// The signal furthest past (or nearest to) its target, as a multiple of it; `None` when the
/// summary judges nothing.
pub(super) fn worst(health: &Health, targets: &Targets) -> Option<(Signal, f64)> {
    // What the reservations measured is judged only when there were enough of them.
    let enough = health.requests >= MIN_REQUESTS;
    let measured = |value: Option<f64>, target: f64| value.filter(|_| enough).map(|v| v / target);
    [
        (
            Signal::ReservationLatency,
            measured(health.reservation_p99_ms, targets.reservation_p99_ms),
        ),
        (
            Signal::Errors,
            measured(health.error_share, targets.error_share),
        ),
        (
            Signal::ScriptLatency,
            measured(health.script_p99_ms, targets.script_p99_ms),
        ),
        (
            Signal::ProduceLatency,
            health.produce_p99_ms.map(|v| v / targets.produce_p99_ms),
        ),
        (
            Signal::ConsumerLag,
            health
                .consumer_lag
                .map(|v| v as f64 / targets.consumer_lag as f64),
        ),
    ]
    .into_iter()
    .filter_map(|(signal, pressure)| Some((signal, pressure.filter(|p| p.is_finite())?)))
    .max_by(|a, b| a.1.total_cmp(&b.1))
}

/// The signal furthest past (or nearest to) its target by what the summary proves. A latency
/// is known to its bucket (`window`: its p99 is the bucket's top, never under the truth and up to
/// [`BUCKET_WIDTH`] over it), so what it proves is its bucket's bottom: a p99 read as 51.2 ms
/// against a target of 50 ms may be 43 ms. An error share proves one failure fewer than it
/// counts: one failure among the 20 a window may be judged by reads as 5 % (five times the
/// default target), and one request that failed for its own sake (a client's copies racing,
/// a pass's own network) would halve the rate for everyone. The lag is proven as it is.
pub(super) fn proven(health: &Health, targets: &Targets) -> Option<(Signal, f64)> {
    let at_least = |p99: Option<f64>| p99.map(|p99| p99 / BUCKET_WIDTH);
    let one_fewer = health.error_share.map(|share| {
        let requests = health.requests.max(1) as f64;
        (share - 1.0 / requests).max(0.0)
    });
    let bottoms = Health {
        reservation_p99_ms: at_least(health.reservation_p99_ms),
        error_share: one_fewer,
        script_p99_ms: at_least(health.script_p99_ms),
        produce_p99_ms: at_least(health.produce_p99_ms),
        ..health.clone()
    };
    worst(&bottoms, targets)
}

/// The sale's health as its leader sees it: every instance's fresh summary merged into one.
/// Summaries older than `stale_ms` at `now_ms` are left out (their writer may be gone); the rest
/// are merged as the worst case the autopilot must answer: requests summed, the error share
/// over all of them, each latency the slowest instance's (among those with enough requests to
/// judge one by, when any has), the largest of the lags still fresh (with the oldest of their
/// times), and `at_ms` the oldest summary's. `None` when nothing is fresh: the autopilot then
/// holds the rate.
pub fn merge(summaries: &[Health], now_ms: i64, stale_ms: i64) -> Option<Health> {
    let fresh: Vec<&Health> = summaries
        .iter()
        .filter(|h| now_ms - h.at_ms <= stale_ms)
        .collect();
    let at_ms = fresh.iter().map(|h| h.at_ms).min()?;
    let busy: Vec<&Health> = fresh
        .iter()
        .copied()
        .filter(|h| h.requests >= MIN_REQUESTS)
        .collect();
    let judged = if busy.is_empty() { &fresh } else { &busy };
    let slowest = |of: &[&Health], read: fn(&Health) -> Option<f64>| {
        of.iter().filter_map(|h| read(h)).reduce(f64::max)
    };
    let counted: u64 = fresh
        .iter()
        .filter(|h| h.error_share.is_some())
        .map(|h| h.requests)
        .sum();
    let lags: Vec<(u64, i64)> = fresh
        .iter()
        .filter_map(|h| {
            let lag = h.fresh_lag(now_ms, stale_ms)?;
            Some((lag, h.consumer_lag_at_ms.unwrap_or(h.at_ms)))
        })
        .collect();
    let failed: f64 = fresh
        .iter()
        .filter_map(|h| Some(h.error_share? * h.requests as f64))
        .sum();
    Some(Health {
        at_ms,
        requests: fresh.iter().map(|h| h.requests).sum(),
        reservation_p99_ms: slowest(judged, |h| h.reservation_p99_ms),
        error_share: (counted > 0).then(|| failed / counted as f64),
        script_p99_ms: slowest(judged, |h| h.script_p99_ms),
        produce_p99_ms: slowest(&fresh, |h| h.produce_p99_ms),
        consumer_lag: lags.iter().map(|(lag, _)| *lag).max(),
        consumer_lag_at_ms: lags.iter().map(|(_, at)| *at).min(),
    })
}
