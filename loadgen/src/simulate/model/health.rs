//! The health summary the services would publish at a moment of the run, from what the model
//! measured in the seconds before it: what the autopilot judges, as it judges the real one.

use floodgate_platform::autopilot::Health;

use super::{Second, HEALTH_WINDOW_S};
use crate::simulate::costs::Costs;

/// The summary at `now` over the last of the `complete` seconds (`None` before the first one),
/// with the consumers' `lag` as it stands.
pub(super) fn health(complete: &[Second], now: i64, lag: f64, costs: &Costs) -> Option<Health> {
    if complete.is_empty() {
        return None;
    }
    let window = &complete[complete.len().saturating_sub(HEALTH_WINDOW_S)..];
    let requests: u64 = window.iter().map(|s| s.requests).sum();
    let refused: u64 = window.iter().map(|s| s.refused_503).sum();
    let worst = |f: fn(&Second) -> f64| window.iter().map(f).fold(0.0, f64::max);
    Some(Health {
        at_ms: now,
        requests: requests + refused,
        reservation_p99_ms: Some(costs.reservation_base_ms + worst(|s| s.worst_wait_ms)),
        error_share: Some(refused as f64 / (requests + refused).max(1) as f64),
        script_p99_ms: Some(costs.reserve_script_us / 1e3 + worst(|s| s.worst_pool_wait_ms)),
        produce_p99_ms: Some(costs.reservation_base_ms),
        consumer_lag: Some(lag as u64),
        consumer_lag_at_ms: Some(now),
    })
}
