//! This instance's health for each sale it takes reservations for, as the admission autopilot
//! reads it: every reservation's time and whether it failed (503 or 5xx: the backend, not the
//! buyer) go into the sale's window, and every second the window's reading is written to the
//! sale's health hash (`floodgate_platform::state::health`), where the sale's admission leader
//! reads it.
//!
//! Memory is bounded by the sales this instance serves: a window is made only for the sale of
//! an admission token whose signature verified (made by a gateway, for a real sale), and
//! dropped once it has been empty for two spans.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use floodgate_platform::autopilot::window::Window;
use floodgate_platform::autopilot::Health;
use floodgate_platform::state::health;
use floodgate_protocol::now_millis;
use tokio_util::sync::CancellationToken;

use crate::gatekeeper::Gatekeeper;

/// Each half of a sale's window: a reading covers the last 5 to 10 s.
pub(crate) const SPAN: Duration = Duration::from_secs(5);
/// How often the readings are written.
const EVERY: Duration = Duration::from_secs(1);
/// How long a sale's health hash outlives the last write to it.
const KEEP: Duration = Duration::from_secs(30);

/// The windows of the sales this instance serves.
#[derive(Default)]
pub struct SaleHealth {
    windows: Mutex<HashMap<String, Window>>,
}

impl SaleHealth {
    /// Records one reservation request for `sale` that took `latency`.
    pub fn record(&self, sale: &str, latency: Duration, failed: bool) {
        let now = now_millis();
        let mut windows = self.windows.lock().expect("lock");
        let window = match windows.get_mut(sale) {
            Some(window) => window,
            None => windows
                .entry(sale.to_owned())
                .or_insert_with(|| Window::new(SPAN, now)),
        };
        window.record(now, latency, failed);
    }

    /// Every sale's reading now, as a health summary with the broker's p99 acknowledgement
    /// time as this instance sees it (`ack_p99_ms`, the same for every sale: they share the
    /// broker); windows left empty are dropped.
    pub fn readings(&self, now_ms: i64, ack_p99_ms: Option<f64>) -> Vec<(String, Health)> {
        let mut windows = self.windows.lock().expect("lock");
        let mut readings = Vec::with_capacity(windows.len());
        windows.retain(|sale, window| {
            let reading = window.read(now_ms);
            if reading.count == 0 {
                return false;
            }
            readings.push((
                sale.clone(),
                Health {
                    at_ms: now_ms,
                    requests: reading.count,
                    reservation_p99_ms: reading.p99_ms,
                    error_share: reading.error_share,
                    produce_p99_ms: ack_p99_ms,
                    ..Health::default()
                },
            ));
            true
        });
        readings
    }
}

/// Writes every sale's reading each second as this instance's field (`booking:<instance>`)
/// until `shutdown`, with the broker's p99 acknowledgement time as `ack_p99_ms` tells it (the
/// publisher's: passed in, as the publisher itself reads this module's span). A write that
/// fails is logged and tried again the next second: the leader holds the rate meanwhile (a
/// stale summary never moves it).
pub async fn publish(
    health: Arc<SaleHealth>,
    gatekeeper: Gatekeeper,
    ack_p99_ms: impl Fn(i64) -> Option<f64>,
    instance: Arc<str>,
    shutdown: CancellationToken,
) {
    let field = format!("booking:{instance}");
    let mut every = tokio::time::interval(EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = every.tick() => {}
            _ = shutdown.cancelled() => return,
        }
        let now = now_millis();
        for (sale, reading) in health.readings(now, ack_p99_ms(now)) {
            let keys = gatekeeper.keys().sale(&sale);
            let written: redis::RedisResult<()> = health::publish(&keys, &field, &reading, KEEP)
                .query_async(&mut gatekeeper.redis().clone())
                .await;
            if let Err(e) = written {
                tracing::warn!(error = %e, sale, "the sale's health could not be written");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_sale_has_its_own_reading_and_an_idle_one_is_dropped() {
        let health = SaleHealth::default();
        for _ in 0..9 {
            health.record("a", Duration::from_millis(20), false);
        }
        health.record("a", Duration::from_millis(20), true);
        health.record("b", Duration::from_millis(400), false);
        let now = now_millis();
        let mut readings = health.readings(now, Some(12.0));
        readings.sort_by(|x, y| x.0.cmp(&y.0));
        assert_eq!(readings.len(), 2);
        assert_eq!(readings[0].1.requests, 10);
        assert_eq!(readings[0].1.error_share, Some(0.1));
        assert!(readings[1].1.reservation_p99_ms.unwrap() >= 400.0);
        assert!(readings.iter().all(|(_, h)| h.produce_p99_ms == Some(12.0)));
        // Two quiet spans later both are gone, and so are their windows.
        assert!(health
            .readings(now + 2 * SPAN.as_millis() as i64, None)
            .is_empty());
        assert!(health.windows.lock().unwrap().is_empty());
    }
}
