//! This instance's health for each sale it takes reservations for, as the admission autopilot
//! reads it: every reservation that reached the backend, its time and whether it failed (503 or
//! 5xx: the backend, not the buyer), goes into the sale's window, each pass counted once per
//! half-window (`floodgate_platform::autopilot::window`); a request refused before any Redis
//! work for the client's own mistake (a bad body, seats it may not take) or its rate is not the
//! backend's experience and is left out, and every second the window's reading is written to the
//! sale's health hash (`floodgate_platform::state::health`), where the sale's admission leader
//! reads it. Beside it go the p99 of the sale's pool scripts (the gatekeeper's own windows), the
//! broker's p99 acknowledgement time (the publisher's), and the consumer group's lag (the row the
//! consumers write in PostgreSQL): the consumer has no Redis of its own, so its figure reaches
//! the leader through here.
//!
//! Memory is bounded by the sales this instance serves: a window is made only for the sale of
//! an admission token whose signature verified (made by a gateway, for a real sale), and
//! dropped once it has been empty for two spans.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use floodgate_platform::autopilot::window::{SaleWindows, SPAN};
use floodgate_platform::autopilot::Health;
use floodgate_platform::service::Every;
use floodgate_platform::state::health;
use floodgate_protocol::now_millis;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use crate::gatekeeper::Gatekeeper;

/// How often the readings are written.
const EVERY: Duration = Duration::from_secs(1);
/// How long a sale's health hash outlives the last write to it.
const KEEP: Duration = Duration::from_secs(30);
/// How long the consumer group's lag may take to read. PostgreSQL's pool is the requests' too:
/// a read queued behind them (or behind a lock) must not hold up the summary, which the leader
/// judges stale after a few seconds and then stops steering by. A read that does not finish in
/// time keeps the lag last read, with the time it was measured: the leader sees it age.
const LAG_READ: Duration = Duration::from_millis(250);

/// How long a sale with no reservation keeps reporting that it has none: long enough for the
/// autopilot to climb back from the floor on a sale whose traffic it cut off.
const IDLE: Duration = Duration::from_secs(300);

/// The windows of the sales this instance serves: each reservation's whole answer.
pub struct SaleHealth {
    reservations: SaleWindows,
}

impl Default for SaleHealth {
    fn default() -> Self {
        Self {
            reservations: SaleWindows::new(SPAN, IDLE),
        }
    }
}

impl SaleHealth {
    /// Records one reservation request for `sale`, made with the pass `pass`
    /// (`window::pass_key`), that took `latency`: each pass counts once per half-window.
    pub fn record(&self, sale: &str, pass: u64, latency: Duration, failed: bool) {
        self.reservations
            .record(sale, pass, now_millis(), latency, failed);
    }

    /// Every sale's reading at `now_ms` (this process' clock, which the windows keep), as a
    /// health summary with the p99 of the pool scripts its reservations ran (`scripts`, the
    /// gatekeeper's windows) and what every sale shares (`shared`: the time stamp, the broker,
    /// the consumers); a sale idle for long is dropped.
    pub fn readings(
        &self,
        now_ms: i64,
        scripts: &SaleWindows,
        shared: Shared,
    ) -> Vec<(String, Health)> {
        let scripts: HashMap<String, f64> = scripts
            .readings(now_ms)
            .into_iter()
            .filter_map(|(sale, reading)| Some((sale, reading.p99_ms?)))
            .collect();
        self.reservations
            .readings(now_ms)
            .into_iter()
            .map(|(sale, reading)| {
                let health = Health {
                    at_ms: shared.at_ms,
                    requests: reading.count,
                    reservation_p99_ms: reading.p99_ms,
                    error_share: reading.error_share,
                    script_p99_ms: scripts.get(&sale).copied(),
                    produce_p99_ms: shared.produce_p99_ms,
                    consumer_lag: shared.consumer_lag.map(|(lag, _)| lag),
                    consumer_lag_at_ms: shared.consumer_lag.map(|(_, at)| at),
                };
                (sale, health)
            })
            .collect()
    }
}

/// What every sale's summary shares: when it was taken, by Redis' clock (the leader judges its
/// age by the same clock, so the services' own clocks need not agree); the broker's p99
/// acknowledgement time as this instance's producer sees it; and the consumer group's lag with
/// when it was measured, by Redis' clock too (`None`: no consumer measured it lately).
#[derive(Clone, Copy, Debug, Default)]
pub struct Shared {
    pub at_ms: i64,
    pub produce_p99_ms: Option<f64>,
    pub consumer_lag: Option<(u64, i64)>,
}

/// The consumer group's lag as its consumers last measured it (`consumer::lag` writes it every
/// second), and its age by PostgreSQL's clock (so no two clocks need agree). The largest of the
/// groups measured in the last 30 s (a deployment may run two groups while it moves from one to
/// the other); `None` if none was.
async fn consumer_lag(db: &PgPool) -> Result<Option<(u64, i64)>, sqlx::Error> {
    let (lag, age_ms): (Option<i64>, Option<i64>) = sqlx::query_as(
        "select max(lag), (extract(epoch from now() - max(measured_at)) * 1000)::bigint
         from consumer_lag where measured_at > now() - interval '30 seconds'",
    )
    .fetch_one(db)
    .await?;
    Ok(lag
        .zip(age_ms)
        .map(|(lag, age)| (lag.max(0) as u64, age.max(0))))
}

/// Writes every sale's reading each second as this instance's field (`booking:<instance>`)
/// until `shutdown`, with the broker's p99 acknowledgement time as `ack_p99_ms` tells it (the
/// publisher's: passed in, as the publisher itself reads this module's span). The sales are
/// written at once, not one after another, so a slow Redis delays them by one round trip. A
/// write that fails is logged and tried again the next second: the leader holds the rate
/// meanwhile (a stale summary never moves it).
pub async fn publish(
    health: Arc<SaleHealth>,
    gatekeeper: Gatekeeper,
    db: PgPool,
    ack_p99_ms: impl Fn(i64) -> Option<f64>,
    instance: Arc<str>,
    shutdown: CancellationToken,
) {
    let field = format!("booking:{instance}");
    let mut every = Every::new(EVERY, shutdown);
    // The lag last read, and when it was measured by Redis' clock.
    let mut lag: Option<(u64, i64)> = None;
    while every.tick().await {
        let now = now_millis();
        let at_ms = match gatekeeper.now_ms().await {
            Ok(at) => at,
            Err(e) => {
                tracing::warn!(error = %e, "Redis' clock could not be read; no health written");
                continue;
            }
        };
        match tokio::time::timeout(LAG_READ, consumer_lag(&db)).await {
            Ok(Ok(read)) => lag = read.map(|(lag, age)| (lag, at_ms - age)),
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "the consumer group's lag could not be read");
                lag = None;
            }
            Err(_) => tracing::warn!(
                "the consumer group's lag took over {LAG_READ:?} to read; the last one is sent"
            ),
        }
        let shared = Shared {
            at_ms,
            produce_p99_ms: ack_p99_ms(now),
            consumer_lag: lag,
        };
        let readings = health.readings(now, gatekeeper.script_times(), shared);
        let writes = readings.iter().map(|(sale, reading)| {
            let keys = gatekeeper.keys().sale(sale);
            let mut conn = gatekeeper.redis().clone();
            let field = field.as_str();
            async move {
                let written: redis::RedisResult<()> = health::publish(&keys, field, reading, KEEP)
                    .query_async(&mut conn)
                    .await;
                if let Err(e) = written {
                    tracing::warn!(error = %e, sale, "the sale's health could not be written");
                }
            }
        });
        futures::future::join_all(writes).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_sale_has_its_own_reading_and_an_idle_one_reads_empty_then_goes() {
        let health = SaleHealth::default();
        let scripts = SaleWindows::new(SPAN, SPAN);
        for pass in 0..9 {
            health.record("a", pass, Duration::from_millis(20), false);
        }
        health.record("a", 9, Duration::from_millis(20), true);
        health.record("b", 1, Duration::from_millis(400), false);
        let now = now_millis();
        scripts.record("b", 1, now, Duration::from_millis(70), false);
        let shared = Shared {
            at_ms: 123,
            produce_p99_ms: Some(12.0),
            consumer_lag: Some((7, 100)),
        };
        let mut readings = health.readings(now, &scripts, shared);
        readings.sort_by(|x, y| x.0.cmp(&y.0));
        assert_eq!(readings.len(), 2);
        assert_eq!(readings[0].1.requests, 10);
        assert_eq!(readings[0].1.error_share, Some(0.1));
        assert_eq!(readings[0].1.script_p99_ms, None, "a ran no pool script");
        assert!(readings[1].1.reservation_p99_ms.unwrap() >= 400.0);
        assert!(readings[1].1.script_p99_ms.unwrap() >= 70.0);
        assert!(readings.iter().all(|(_, h)| h.produce_p99_ms == Some(12.0)
            && (h.at_ms, h.consumer_lag, h.consumer_lag_at_ms) == (123, Some(7), Some(100))));
        // Two quiet spans later they read empty (no traffic, which the autopilot may climb
        // on), until the sale has been idle for IDLE: then they are gone with their windows.
        let later = now + 2 * SPAN.as_millis() as i64;
        let quiet = health.readings(later, &scripts, Shared::default());
        assert_eq!(quiet.len(), 2);
        assert!(quiet.iter().all(|(_, h)| h.requests == 0));
        let gone = now + IDLE.as_millis() as i64 + 1;
        assert!(health
            .readings(gone, &scripts, Shared::default())
            .is_empty());
        assert!(health.reservations.is_empty() && scripts.is_empty());
    }
}
