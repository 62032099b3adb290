//! A sale's waiting room as one gateway sees it: the shared view every session watches, and the
//! task that refreshes it and, while this instance holds the lease, runs the admission controller.
//!
//! Per tick and per sale this gateway makes one pipelined Redis round trip to read the view,
//! whatever the number of clients; sessions compute their own positions from it. The controller
//! adds at most two more (lease, advance) and only on the leader, only while someone waits.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use floodgate_contract::keys::{Keys, SaleKeys};
use floodgate_contract::now_millis;
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use redis::aio::ConnectionManager;
use redis::Script;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// What every session of a sale needs to know, refreshed once per tick.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RoomView {
    /// Highest ticket admitted so far.
    pub frontier: u64,
    /// Highest ticket handed out so far.
    pub issued: u64,
    pub opens_at_ms: i64,
    /// Admissions per second, as armed.
    pub rate: f64,
    pub token_ttl_ms: i64,
    pub max_seats: u32,
    /// An operator paused admission: nobody is let in, and no ETA can be given.
    pub paused: bool,
}

impl RoomView {
    /// 1-based place in line of `ticket` (1 = next to be admitted), or `None` once admitted.
    pub fn position(&self, ticket: u64) -> Option<u64> {
        ticket.checked_sub(self.frontier).filter(|p| *p > 0)
    }

    /// Seconds until `position` is admitted at the armed rate; unknown before the opening.
    pub fn eta_secs(&self, position: u64, now_ms: i64) -> Option<u64> {
        if now_ms < self.opens_at_ms || self.rate <= 0.0 || self.paused {
            return None;
        }
        Some((position as f64 / self.rate).ceil() as u64)
    }
}

/// The Lua scripts the gateway runs, loaded once from `lua/`.
#[derive(Clone)]
pub struct Scripts {
    pub join: Script,
    lease: Script,
    advance: Script,
}

impl Default for Scripts {
    fn default() -> Self {
        Self {
            join: Script::new(include_str!("../../lua/join.lua")),
            lease: Script::new(include_str!("../../lua/lease.lua")),
            advance: Script::new(include_str!("../../lua/advance.lua")),
        }
    }
}

/// One sale's room on this gateway; sessions subscribe to its view.
pub struct Room {
    view: watch::Receiver<RoomView>,
}

impl Room {
    pub fn subscribe(&self) -> watch::Receiver<RoomView> {
        self.view.clone()
    }
}

/// Everything the room's task needs; built by the gateway state.
pub struct RoomDriver {
    pub sale: String,
    pub keys: Keys,
    pub redis: ConnectionManager,
    pub scripts: Scripts,
    pub instance_id: Arc<str>,
    pub tick: Duration,
    pub lease: Duration,
}

impl RoomDriver {
    /// Starts the room's task; it runs until `shutdown`.
    pub fn start(
        self,
        initial: RoomView,
        shutdown: CancellationToken,
    ) -> (Arc<Room>, impl std::future::Future<Output = ()>) {
        let (tx, rx) = watch::channel(initial);
        (Arc::new(Room { view: rx }), self.drive(tx, shutdown))
    }

    async fn drive(self, tx: watch::Sender<RoomView>, shutdown: CancellationToken) {
        let keys = self.keys.sale(&self.sale);
        let mut ticker = tokio::time::interval(self.tick);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        let mut controller = Controller::default();
        let mut failing = false;
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = ticker.tick() => {}
            }
            match self.tick_once(&keys, &mut controller).await {
                Ok(view) => {
                    if failing {
                        tracing::info!(sale = %self.sale, "waiting room reads recovered");
                        failing = false;
                    }
                    tx.send_if_modified(|current| {
                        let changed = *current != view;
                        *current = view;
                        changed
                    });
                }
                // Sessions keep the last view; they are told nothing wrong, only nothing new.
                Err(e) if !failing => {
                    tracing::warn!(sale = %self.sale, error = %e, "waiting room read failed");
                    failing = true;
                }
                Err(_) => {}
            }
        }
    }

    #[tracing::instrument(skip_all, level = "debug", fields(sale = %self.sale))]
    async fn tick_once(
        &self,
        keys: &SaleKeys,
        controller: &mut Controller,
    ) -> redis::RedisResult<RoomView> {
        let mut conn = self.redis.clone();
        let mut view = read_view(&mut conn, keys).await?;
        let waiting = view.issued.saturating_sub(view.frontier);
        if waiting > 0 && !view.paused && now_millis() >= view.opens_at_ms {
            if let Some(frontier) = controller
                .admit(self, &mut conn, keys, &view, waiting)
                .await?
            {
                view.frontier = frontier;
            }
        }
        Ok(view)
    }
}

/// Reads a sale's view in one round trip (all keys share the sale's slot).
pub async fn read_view(
    conn: &mut ConnectionManager,
    keys: &SaleKeys,
) -> redis::RedisResult<RoomView> {
    type Meta = (
        Option<i64>,
        Option<f64>,
        Option<i64>,
        Option<u32>,
        Option<String>,
    );
    let (meta, frontier, issued): (Meta, Option<u64>, Option<u64>) = redis::pipe()
        .hget(
            keys.meta(),
            &["opens_at_ms", "rate", "token_ttl_ms", "max_seats", "paused"],
        )
        .get(keys.frontier())
        .get(keys.seq())
        .query_async(conn)
        .await?;
    Ok(RoomView {
        frontier: frontier.unwrap_or(0),
        issued: issued.unwrap_or(0),
        opens_at_ms: meta.0.unwrap_or(i64::MAX),
        rate: meta.1.unwrap_or(0.0),
        token_ttl_ms: meta.2.unwrap_or(0),
        max_seats: meta.3.unwrap_or(1),
        paused: meta.4.as_deref() == Some("1"),
    })
}

/// The admission controller's local half: the rate limiter, rebuilt when the rate changes.
///
/// Only the instance holding the sale's lease advances the frontier, so the limiter of one
/// process governs the whole fleet. A limiter starts with a full burst, so a change of leader
/// can admit at most one extra burst (a tick's worth of admissions).
#[derive(Default)]
struct Controller {
    limiter: Option<(f64, DefaultDirectRateLimiter)>,
}

impl Controller {
    async fn admit(
        &mut self,
        driver: &RoomDriver,
        conn: &mut ConnectionManager,
        keys: &SaleKeys,
        view: &RoomView,
        waiting: u64,
    ) -> redis::RedisResult<Option<u64>> {
        let leased: i64 = driver
            .scripts
            .lease
            .key(keys.leader())
            .arg(&*driver.instance_id)
            .arg(driver.lease.as_millis() as u64)
            .invoke_async(conn)
            .await?;
        if leased != 1 {
            return Ok(None);
        }
        let Some(limiter) = self.limiter_for(view.rate, driver.tick) else {
            return Ok(None);
        };
        let mut permits = 0u64;
        while permits < waiting && limiter.check().is_ok() {
            permits += 1;
        }
        if permits == 0 {
            return Ok(None);
        }
        let (admitted, frontier): (i64, u64) = driver
            .scripts
            .advance
            .key(keys.meta())
            .key(keys.seq())
            .key(keys.frontier())
            .key(keys.leader())
            .arg(&*driver.instance_id)
            .arg(permits)
            .invoke_async(conn)
            .await?;
        if admitted > 0 {
            tracing::debug!(admitted, frontier, "frontier advanced");
        }
        Ok((admitted >= 0).then_some(frontier))
    }

    fn limiter_for(&mut self, rate: f64, tick: Duration) -> Option<&DefaultDirectRateLimiter> {
        if !(rate.is_finite() && rate > 0.0) {
            return None;
        }
        if self.limiter.as_ref().map(|(r, _)| *r) != Some(rate) {
            self.limiter = Some((rate, limiter(rate, tick)));
        }
        self.limiter.as_ref().map(|(_, l)| l)
    }
}

/// A limiter admitting `rate` per second, with a burst of one tick's worth so a batch per tick
/// is possible (a burst of 1 would cap admissions at one per tick).
fn limiter(rate: f64, tick: Duration) -> DefaultDirectRateLimiter {
    let burst = (rate * tick.as_secs_f64())
        .ceil()
        .clamp(1.0, f64::from(u32::MAX)) as u32;
    let period = Duration::from_secs_f64(1.0 / rate).max(Duration::from_nanos(1));
    let quota = Quota::with_period(period)
        .expect("period is positive")
        .allow_burst(NonZeroU32::new(burst).expect("burst is at least 1"));
    RateLimiter::direct(quota)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn position_is_one_based_and_ends_at_admission() {
        let view = RoomView {
            frontier: 10,
            ..Default::default()
        };
        assert_eq!(view.position(11), Some(1));
        assert_eq!(view.position(15), Some(5));
        assert_eq!(view.position(10), None);
        assert_eq!(view.position(3), None);
    }

    #[test]
    fn eta_follows_the_rate_and_is_unknown_before_opening() {
        let view = RoomView {
            opens_at_ms: 1_000,
            rate: 4.0,
            ..Default::default()
        };
        assert_eq!(view.eta_secs(10, 999), None);
        assert_eq!(view.eta_secs(10, 1_000), Some(3));
        assert_eq!(view.eta_secs(8, 2_000), Some(2));
    }

    #[test]
    fn the_limiter_allows_one_tick_of_burst_and_no_more() {
        let l = limiter(50.0, Duration::from_millis(100));
        let mut n = 0;
        while l.check().is_ok() {
            n += 1;
        }
        assert_eq!(n, 5, "burst is rate x tick");
        let slow = limiter(0.5, Duration::from_millis(100));
        assert!(slow.check().is_ok());
        assert!(
            slow.check().is_err(),
            "burst never below one, never above rate x tick"
        );
    }
}
