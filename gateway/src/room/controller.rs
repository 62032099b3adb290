//! The admission controller, run by the one gateway holding the sale's lease: each tick it
//! checks the stock (and closes the room when nothing can sell), buries the departed, hands the
//! clients of dead gateways to their grace, lets the sale's autopilot (if on) move the rate
//! (`pilot`), and makes one fenced advance within rate, cap and stock.

use std::num::NonZeroU32;
use std::time::Duration;

use floodgate_platform::admission::{self, Room};
use floodgate_platform::keys::{Keys, SaleKeys};
use floodgate_platform::runtime::RedisConn;
use floodgate_platform::state::{self, PoolCounts};
use floodgate_protocol::now_millis;
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};

use super::pilot::{self, Pilot};
use super::placing;
use super::view::RoomView;
use super::Shared;
use crate::places::Batch;
use crate::scripts;
use crate::scripts::leader::{Advanced, Placing, Swept};

/// The controller's local half: the rate limiter, rebuilt when the rate changes.
///
/// Only the instance holding the sale's lease advances the frontier, so the limiter of one
/// process governs the whole fleet. A limiter starts with a full burst, so a change of leader
/// can admit at most one extra burst (a tick's worth of admissions).
#[derive(Default)]
pub(super) struct Controller {
    limiter: Option<(f64, DefaultDirectRateLimiter)>,
    /// The sale's autopilot, while it is on and this instance leads.
    pilot: Option<Pilot>,
}

/// What the leader's tick needs of its room: the sale, its keys, this gateway's name and the
/// gateway's own settings. (The room's task lends it; the controller never sees the task.)
pub(super) struct Leading<'a> {
    pub sale: &'a str,
    pub keys: &'a Keys,
    pub instance_id: &'a str,
    pub tick: Duration,
    pub grace: Duration,
}

/// The stock of a sale's pools, as the leader reads it each tick.
#[derive(Debug, Default)]
struct Stock {
    available: u64,
    holds: u64,
    /// Every pool answered with an armed state.
    complete: bool,
}

impl Controller {
    /// Another instance leads: a later takeover starts from a fresh, full limiter, and this
    /// gateway's admission figures say it does not lead (an alert reads the leader's only: a
    /// former leader's last figures would otherwise stand for the sale's).
    pub(super) fn follow(&mut self, sale: &str) {
        self.limiter = None;
        self.pilot = None;
        leading(sale, false, 0);
    }

    /// The leader's work for one tick, with fencing token `fence`.
    pub(super) async fn lead(
        &mut self,
        driver: &Leading<'_>,
        conn: &mut RedisConn,
        keys: &SaleKeys,
        shared: &Shared,
        view: &mut RoomView,
        fence: &str,
    ) -> redis::RedisResult<()> {
        let now = now_millis();
        let pools: Vec<_> = view
            .pools
            .iter()
            .map(|pool| driver.keys.pool(driver.sale, pool))
            .collect();
        let read = scripts::room::read_for_leader(conn, keys, &pools, now).await?;
        let stock = stock_from(&read.pools);
        let opened = now >= view.opens_at_ms;
        if opened && !view.sold_out && stock.complete && stock.available == 0 && stock.holds == 0 {
            // Nothing to sell and no hold that could return a seat: final.
            let _: () = state::writes::sold_out(keys).query_async(conn).await?;
            tracing::info!(sale = %driver.sale, "sold out: the room closes");
            view.sold_out = true;
        }
        bury(conn, keys, shared, &read.due).await?;
        let grace = view.door.grace(driver.grace);
        sweep(driver, conn, keys, &read.gateways, grace).await?;
        let admitting = opened && !view.paused && !view.sold_out;
        if admitting {
            // Before the permits: a rate it changes paces this very tick.
            let leading = (driver.sale, driver.instance_id);
            pilot::steer(&mut self.pilot, leading, conn, keys, view, (fence, now)).await?;
        }
        // Places dropped before the draw are placed once the leader knows it (`placing`):
        // until then, in the tick that closes the pre-queue, nobody is let in while any is
        // away, or each would count as someone there.
        let unplaceable = shared.draw.get().is_none() && !read.unplaced.is_empty();
        let (allowed, permits) = if admitting && !unplaceable {
            self.permits(driver.tick, shared, view, &stock)
        } else {
            (0, 0)
        };
        leading(driver.sale, true, allowed);
        report(driver.sale, view, &read.pools);
        // Away tickets left before the draw: their places, now that the draw is known.
        let placing = match shared.draw.get() {
            Some(draw) => placing::placing(conn, keys, draw, view.frontier, &read.unplaced).await?,
            None => Placing::default(),
        };
        // Called every tick, even with no permits: it also expires unspent tokens.
        let advanced = scripts::leader::advance(conn, keys, (fence, permits), &placing).await?;
        let Advanced::Moved {
            admitted,
            frontier,
            exp_ms,
        } = advanced
        else {
            return Ok(());
        };
        if admitted > 0 {
            tracing::debug!(admitted, frontier, "frontier advanced");
            metrics::counter!("floodgate_admissions_total", "sale" => driver.sale.to_owned())
                .increment(admitted);
            // Known here at once, so this gateway's admitted clients need not wait a tick.
            shared.batches.lock().expect("lock").push(Batch {
                from: view.frontier,
                to: frontier,
                n: admitted,
                exp_ms,
                at_ms: now_millis(),
            });
        }
        view.frontier = view.frontier.max(frontier);
        Ok(())
    }

    /// How many live tickets may be admitted now (those waiting, within the active cap and what
    /// the stock can serve), and how many of those this tick's rate limiter lets in.
    fn permits(
        &mut self,
        tick: Duration,
        shared: &Shared,
        view: &RoomView,
        stock: &Stock,
    ) -> (u64, u64) {
        let dead_beyond = {
            let dead = shared.dead.read().expect("lock");
            dead.total() - dead.up_to(view.frontier)
        };
        let room = Room {
            live_waiting: view.issued.saturating_sub(view.frontier + dead_beyond),
            active_cap: view.active_cap,
            unspent: view.unspent,
            holds: stock.holds,
            available: stock.available,
            stock_factor: view.stock_factor,
        };
        let allowed = room.allowed();
        let mut permits = 0;
        if let Some(limiter) = self.limiter_for(view.rate, tick) {
            while permits < allowed && limiter.check().is_ok() {
                permits += 1;
            }
        }
        (allowed, permits)
    }

    fn limiter_for(&mut self, stored: f64, tick: Duration) -> Option<&DefaultDirectRateLimiter> {
        // Whatever Redis holds (a rate written by hand, by an older release): paced within the
        // valid range, never a panic that would take the room down with it.
        let rate = floodgate_protocol::settings::pacing_rate(stored)?;
        if rate != stored && self.limiter.as_ref().map(|(r, _)| *r) != Some(rate) {
            tracing::warn!(stored, rate, "the sale's stored admission rate is out of range; pacing by the nearest valid rate");
        }
        if self.limiter.as_ref().map(|(r, _)| *r) != Some(rate) {
            self.limiter = Some((rate, limiter(rate, tick)));
        }
        self.limiter.as_ref().map(|(_, l)| l)
    }
}

/// Declares dead the `due` tickets whose grace ran out, once the draw tells their places.
async fn bury(
    conn: &mut RedisConn,
    keys: &SaleKeys,
    shared: &Shared,
    due: &[u64],
) -> redis::RedisResult<()> {
    let (Some(draw), false) = (shared.draw.get(), due.is_empty()) else {
        return Ok(());
    };
    let places: Vec<(u64, u64)> = due.iter().map(|t| (*t, draw.place(*t))).collect();
    let buried = scripts::leader::bury(conn, keys, &places).await?;
    if buried > 0 {
        metrics::counter!("floodgate_tickets_skipped_total").increment(buried);
    }
    Ok(())
}

/// Hands the tickets of gateways that died without goodbye to the grace period.
async fn sweep(
    driver: &Leading<'_>,
    conn: &mut RedisConn,
    keys: &SaleKeys,
    gateways: &[String],
    grace: Duration,
) -> redis::RedisResult<()> {
    let others: Vec<&str> = gateways
        .iter()
        .map(String::as_str)
        .filter(|g| *g != driver.instance_id)
        .collect();
    if others.is_empty() {
        return Ok(());
    }
    let alive = scripts::leader::alive(conn, keys, &others).await?;
    for (gateway, alive) in others.into_iter().zip(alive) {
        if alive {
            continue;
        }
        let swept = scripts::leader::sweep(conn, keys, gateway, grace);
        if let Swept::Handed(swept @ 1..) = swept.await? {
            tracing::info!(%gateway, swept, "a gateway died: its clients' grace has started");
        }
    }
    Ok(())
}

fn stock_from(pools: &[PoolCounts]) -> Stock {
    let mut stock = Stock {
        complete: true,
        ..Default::default()
    };
    for pool in pools {
        match pool.available.filter(|_| pool.armed()) {
            Some(available) => stock.available += available.max(0) as u64,
            // A pool whose state was lost sells nothing until rebuilt, and is not "sold out".
            None => stock.complete = false,
        }
        stock.holds += pool.holds;
    }
    stock
}

/// A limiter admitting `rate` per second, with a burst of one tick's worth so a batch per tick
/// is possible (a burst of 1 would cap admissions at one per tick). Any positive rate makes a
/// limiter: one too small for a `Duration` period gets the longest period there is.
fn limiter(rate: f64, tick: Duration) -> DefaultDirectRateLimiter {
    let burst = admission::burst(rate, tick);
    // A year is "never" for a sale, and far inside what governor's nanosecond clock can hold.
    const LONGEST: Duration = Duration::from_secs(365 * 24 * 3600);
    let period = Duration::try_from_secs_f64(1.0 / rate)
        .unwrap_or(LONGEST)
        .clamp(Duration::from_nanos(1), LONGEST);
    let quota = Quota::with_period(period)
        .expect("period is positive")
        .allow_burst(NonZeroU32::new(burst).expect("burst is at least 1"));
    RateLimiter::direct(quota)
}

/// The sale's admission figures as the controller sees them each tick (the leader of each sale
/// reports; a gateway that lost the lease keeps its last figures, so dashboards take the
/// maximum across gateways): the set rate, the frontier, the tickets issued, the admission
/// tokens not yet spent, and the cap on active users; each pool's seats available, held and sold.
/// Whether this gateway leads `sale`'s admission (`floodgate_admission_leading`, 1 or 0), and
/// how many waiting people the cap and the stock would let in now, the rate aside
/// (`floodgate_admission_allowed`: 0 while admission waits for seats held to come back, after a
/// sell-out, while paused or before the opening, and on every gateway that does not lead).
fn leading(sale: &str, leads: bool, allowed: u64) {
    let sale = sale.to_owned();
    metrics::gauge!("floodgate_admission_leading", "sale" => sale.clone())
        .set(f64::from(u8::from(leads)));
    metrics::gauge!("floodgate_admission_allowed", "sale" => sale).set(allowed as f64);
}

fn report(sale: &str, view: &RoomView, pools: &[PoolCounts]) {
    let sale = sale.to_owned();
    for (pool, counts) in view.pools.iter().zip(pools) {
        for (name, value) in [
            ("floodgate_pool_available", counts.available),
            ("floodgate_pool_held", counts.held),
            ("floodgate_pool_sold", counts.sold),
        ] {
            // A pool whose state is lost reports nothing rather than zeros.
            if let Some(value) = value {
                metrics::gauge!(name, "sale" => sale.clone(), "pool" => pool.clone())
                    .set(value as f64);
            }
        }
    }
    let figures = [
        ("floodgate_admission_rate", view.rate),
        ("floodgate_admission_frontier", view.frontier as f64),
        ("floodgate_admission_issued", view.issued as f64),
        ("floodgate_admission_unspent", view.unspent as f64),
        ("floodgate_admission_active_cap", view.active_cap as f64),
        (
            "floodgate_admission_paused",
            f64::from(u8::from(view.paused)),
        ),
    ];
    for (name, value) in figures {
        metrics::gauge!(name, "sale" => sale.clone()).set(value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn defect_04_any_stored_rate_makes_a_limiter_without_panicking() {
        for rate in [
            1e-20,
            f64::MIN_POSITIVE,
            5e-324,
            1e-300,
            0.001,
            1e9,
            f64::MAX,
        ] {
            let l = limiter(rate, Duration::from_millis(100));
            assert!(l.check().is_ok(), "rate {rate}: one burst to start with");
        }
    }

    #[test]
    fn stock_counts_armed_pools_and_flags_lost_ones() {
        let pool = |available: Option<i64>, holds: u64| PoolCounts {
            capacity: Some(10),
            available,
            held: Some(holds as i64),
            sold: Some(0),
            holds,
        };
        let stock = stock_from(&[pool(Some(3), 2), pool(Some(0), 1)]);
        assert_eq!((stock.available, stock.holds, stock.complete), (3, 3, true));
        let lost = stock_from(&[pool(Some(0), 0), pool(None, 0)]);
        assert!(!lost.complete, "a lost pool is never taken for sold out");
    }
}
