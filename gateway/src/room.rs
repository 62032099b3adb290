//! A sale's waiting room as one gateway sees it: the shared view every session watches, and the
//! task that refreshes it and, while this instance holds the lease, runs the admission controller.
//!
//! Per tick and per sale this gateway makes one pipelined Redis round trip to read the view,
//! whatever the number of clients; sessions compute their own positions from it. The leader
//! adds a few more (lease, stock and housekeeping reads, bury, advance), never per client.

use std::num::NonZeroU32;
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Duration;

use floodgate_contract::keys::{Keys, SaleKeys};
use floodgate_contract::lottery::{draw_seed, Draw};
use floodgate_contract::now_millis;
use floodgate_contract::state::{self, AdmitEntry, PoolCounts, SaleMeta};
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use redis::aio::ConnectionManager;
use redis::Script;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::places::{Batch, Batches, DeadPlaces};

/// What every session of a sale needs to know, refreshed once per tick.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RoomView {
    /// False until the first read from Redis: sessions wait for a real view.
    pub loaded: bool,
    /// Heartbeats since the room started: each change tells every session to ping its client
    /// (and to check that it has heard from it lately). Counted even while Redis is unreachable.
    pub beat: u64,
    /// Highest place in line admitted so far.
    pub frontier: u64,
    /// Highest ticket handed out so far.
    pub issued: u64,
    pub opens_at_ms: i64,
    /// Admissions per second, as set.
    pub rate: f64,
    /// Live admissions per second over the last few seconds, once there were some.
    pub measured_rate: Option<f64>,
    pub token_ttl_ms: i64,
    pub max_seats: u32,
    /// An operator paused admission: nobody is let in, and no ETA can be given.
    pub paused: bool,
    /// Every pool is sold out and no hold can return: the room is closing.
    pub sold_out: bool,
    /// Whether the pre-queue has been drawn (then [`Room::place`] answers).
    pub drawn: bool,
    /// Dead places this gateway knows of: a new death changes positions, so it changes the view.
    pub dead_known: u64,
    /// SHA-256 (hex) of the lottery's secret seed.
    pub commitment: String,
    /// Settings the controller needs.
    pub active_cap: u64,
    pub stock_factor: f64,
    /// Admission tokens handed out and not yet spent or expired.
    pub unspent: u64,
    pub pools: Vec<String>,
}

impl RoomView {
    /// Seconds until `position` is admitted, at the measured rate once there is one (the set
    /// rate before that); unknown before the opening or while paused.
    pub fn eta_secs(&self, position: u64, now_ms: i64) -> Option<u64> {
        if now_ms < self.opens_at_ms || self.paused {
            return None;
        }
        let rate = self.measured_rate.unwrap_or(self.rate);
        if !(rate.is_finite() && rate > 0.0) {
            return None;
        }
        Some((position as f64 / rate).ceil() as u64)
    }
}

/// The Lua scripts the gateway runs, loaded once from `lua/`.
#[derive(Clone)]
pub struct Scripts {
    pub join: Script,
    pub resume: Script,
    pub leave: Script,
    lease: Script,
    advance: Script,
    bury: Script,
    sweep: Script,
    retire: Script,
}

impl Default for Scripts {
    fn default() -> Self {
        // The waiting room's scripts share sale_lib.lua's helpers.
        let with_lib =
            |body: &str| Script::new(&format!("{}{body}", include_str!("../../lua/sale_lib.lua")));
        Self {
            join: with_lib(include_str!("../../lua/join.lua")),
            resume: with_lib(include_str!("../../lua/resume.lua")),
            leave: with_lib(include_str!("../../lua/leave.lua")),
            lease: Script::new(include_str!("../../lua/lease.lua")),
            advance: with_lib(include_str!("../../lua/advance.lua")),
            bury: with_lib(include_str!("../../lua/bury.lua")),
            sweep: with_lib(include_str!("../../lua/sweep.lua")),
            retire: Script::new(include_str!("../../lua/retire.lua")),
        }
    }
}

impl Scripts {
    /// lease.lua for `instance` on `keys`' sale: the fencing token, or "" if another leads.
    pub fn lease_call(
        &self,
        keys: &SaleKeys,
        instance: &str,
        lease: Duration,
    ) -> redis::ScriptInvocation<'_> {
        let mut call = self.lease.prepare_invoke();
        call.key(keys.leader())
            .key(keys.epoch())
            .arg(instance)
            .arg(lease.as_millis() as u64);
        call
    }

    /// advance.lua with fencing token `fence`, admitting at most `permits` live tickets:
    /// `(admitted, frontier, token expiry)`.
    pub fn advance_call(
        &self,
        keys: &SaleKeys,
        fence: &str,
        permits: u64,
    ) -> redis::ScriptInvocation<'_> {
        let mut call = self.advance.prepare_invoke();
        call.key(keys.meta())
            .key(keys.seq())
            .key(keys.frontier())
            .key(keys.leader())
            .key(keys.dead())
            .key(keys.admits())
            .key(keys.batches())
            .key(keys.tokens())
            .arg(fence)
            .arg(permits);
        call
    }
}

/// One sale's room on this gateway; sessions subscribe to its view and ask it where they stand.
pub struct Room {
    view: watch::Receiver<RoomView>,
    shared: Arc<Shared>,
}

/// What the room task learns beyond the view, too big to copy every tick.
#[derive(Default)]
struct Shared {
    draw: OnceLock<Draw>,
    dead: RwLock<DeadPlaces>,
    batches: Mutex<Batches>,
}

impl Room {
    pub fn subscribe(&self) -> watch::Receiver<RoomView> {
        self.view.clone()
    }

    /// The place in line of `ticket`, once the pre-queue has been drawn.
    pub fn place(&self, ticket: u64) -> Option<u64> {
        self.shared.draw.get().map(|draw| draw.place(ticket))
    }

    /// Live tickets ahead of `place`, plus one. It overestimates by at most the tickets that
    /// died since this gateway last read the deaths stream (one tick), never underestimates.
    pub fn position(&self, place: u64, frontier: u64) -> u64 {
        let dead = self
            .shared
            .dead
            .read()
            .expect("lock")
            .between(frontier, place);
        place.saturating_sub(frontier).saturating_sub(dead).max(1)
    }

    /// When the admission token of an admitted `place` expires, if its batch is still known.
    pub fn token_expiry(&self, place: u64) -> Option<i64> {
        self.shared.batches.lock().expect("lock").expiry_of(place)
    }
}

/// Everything the room's task needs; built by the gateway state.
pub struct RoomDriver {
    pub sale: String,
    pub keys: Keys,
    pub redis: ConnectionManager,
    pub scripts: Arc<Scripts>,
    /// This process' name in the lease and the session registry (unique per run).
    pub instance_id: Arc<str>,
    pub tick: Duration,
    pub lease: Duration,
    /// How long a departed client keeps its place (the sweep of dead gateways uses it too).
    pub grace: Duration,
    /// How often sessions ping their clients.
    pub heartbeat: Duration,
}

/// Stream entries read per tick: catching up on a long history takes a few ticks, during which
/// positions are overestimates.
const STREAM_BATCH: usize = 10_000;
/// Tickets handled per tick by the bury and sweep steps.
const HOUSEKEEPING_BATCH: usize = 5_000;

/// Where this gateway has read the streams up to.
struct Cursor {
    deaths: String,
    admits: String,
}

impl RoomDriver {
    /// Starts the room's task; it runs until `shutdown`, or until `retire`, when it also
    /// removes this gateway's keys from the sale's slot.
    pub fn start(
        self,
        shutdown: CancellationToken,
        retire: CancellationToken,
    ) -> (Arc<Room>, impl std::future::Future<Output = ()>) {
        let (tx, rx) = watch::channel(RoomView::default());
        let shared = Arc::new(Shared::default());
        let room = Arc::new(Room {
            view: rx,
            shared: shared.clone(),
        });
        (room, self.drive(tx, shared, shutdown, retire))
    }

    async fn drive(
        self,
        tx: watch::Sender<RoomView>,
        shared: Arc<Shared>,
        shutdown: CancellationToken,
        retire: CancellationToken,
    ) {
        let keys = self.keys.sale(&self.sale);
        let mut ticker = tokio::time::interval(self.tick);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        let mut controller = Controller::default();
        let mut cursor = Cursor {
            deaths: "-".into(),
            admits: "-".into(),
        };
        let mut failing = false;
        let started = tokio::time::Instant::now();
        let heartbeat = self.heartbeat.max(Duration::from_millis(1));
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = retire.cancelled() => {
                    self.retire(&keys).await;
                    break;
                }
                _ = ticker.tick() => {}
            }
            let beat = (started.elapsed().as_millis() / heartbeat.as_millis()) as u64;
            match self
                .tick_once(&keys, &shared, &mut cursor, &mut controller)
                .await
            {
                Ok(view) => {
                    let view = RoomView { beat, ..view };
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
                // Sessions keep the last view; they are told nothing wrong, only nothing new
                // (but the heartbeat goes on).
                Err(e) => {
                    if !failing {
                        tracing::warn!(sale = %self.sale, error = %e, "waiting room read failed");
                        failing = true;
                    }
                    tx.send_if_modified(|current| {
                        let changed = current.beat != beat;
                        current.beat = beat;
                        changed
                    });
                }
            }
        }
    }

    /// Removes this gateway's liveness, its place in the sale's registry and any lease it holds
    /// (`lua/retire.lua`). If Redis is unreachable the keys lapse by themselves (the liveness
    /// and the lease have TTLs) and the leader's sweep removes the registry entry.
    async fn retire(&self, keys: &SaleKeys) {
        let retired: redis::RedisResult<i64> = self
            .scripts
            .retire
            .key(keys.gateway_alive(&self.instance_id))
            .key(keys.gateway_sessions(&self.instance_id))
            .key(keys.gateways())
            .key(keys.leader())
            .arg(&*self.instance_id)
            .invoke_async(&mut self.redis.clone())
            .await;
        match retired {
            Ok(_) => {
                tracing::info!(sale = %self.sale, "room retired: no session for its idle time")
            }
            Err(e) => {
                tracing::warn!(sale = %self.sale, error = %e, "room retired; its keys will lapse")
            }
        }
    }

    #[tracing::instrument(skip_all, level = "debug", fields(sale = %self.sale))]
    async fn tick_once(
        &self,
        keys: &SaleKeys,
        shared: &Shared,
        cursor: &mut Cursor,
        controller: &mut Controller,
    ) -> redis::RedisResult<RoomView> {
        let mut conn = self.redis.clone();
        let mut view = self.read(&mut conn, keys, shared, cursor).await?;
        if let Some(fence) = controller.lease(self, &mut conn, keys).await? {
            controller
                .lead(self, &mut conn, keys, shared, &mut view, &fence)
                .await?;
        }
        let now = now_millis();
        let mut batches = shared.batches.lock().expect("lock");
        batches.prune(now);
        view.measured_rate = batches.measured_rate(now, view.opens_at_ms);
        Ok(view)
    }

    /// The per-tick read: settings, frontier, tickets, the deaths and admissions since the last
    /// read, and this gateway's liveness, in one pipelined round trip.
    async fn read(
        &self,
        conn: &mut ConnectionManager,
        keys: &SaleKeys,
        shared: &Shared,
        cursor: &mut Cursor,
    ) -> redis::RedisResult<RoomView> {
        type Entries = Vec<(String, Vec<String>)>;
        let mut pipe = redis::pipe();
        SaleMeta::query(&mut pipe, keys);
        let (meta, frontier, issued, deaths, admits): (
            Vec<Option<String>>,
            Option<u64>,
            Option<u64>,
            Entries,
            Entries,
        ) = pipe
            .get(keys.frontier())
            .get(keys.seq())
            .cmd("XRANGE")
            .arg(keys.deaths())
            .arg(exclusive(&cursor.deaths))
            .arg("+")
            .arg("COUNT")
            .arg(STREAM_BATCH)
            .cmd("XRANGE")
            .arg(keys.admits())
            .arg(exclusive(&cursor.admits))
            .arg("+")
            .arg("COUNT")
            .arg(STREAM_BATCH)
            .cmd("SADD")
            .arg(keys.gateways())
            .arg(&*self.instance_id)
            .ignore()
            .cmd("SET")
            .arg(keys.gateway_alive(&self.instance_id))
            .arg(1)
            .arg("PX")
            .arg(self.lease.as_millis() as u64)
            .ignore()
            .query_async(conn)
            .await?;
        if let Some((last, _)) = deaths.last() {
            cursor.deaths = last.clone();
            let mut dead = shared.dead.write().expect("lock");
            for (_, fields) in &deaths {
                if let Some(place) = state::death_place(fields) {
                    dead.insert(place);
                }
            }
        }
        if let Some((last, _)) = admits.last() {
            cursor.admits = last.clone();
            let mut batches = shared.batches.lock().expect("lock");
            for (id, fields) in &admits {
                if let Some(admitted) = AdmitEntry::from_entry(id, fields) {
                    batches.push(Batch {
                        from: admitted.from,
                        to: admitted.to,
                        n: admitted.n,
                        exp_ms: admitted.exp_ms,
                        at_ms: admitted.at_ms,
                    });
                }
            }
        }
        let meta = SaleMeta::from_fields(&meta);
        let view = view_from(meta.as_ref(), frontier.unwrap_or(0), issued.unwrap_or(0));
        if shared.draw.get().is_none() {
            if let Some(draw) = meta.as_ref().and_then(draw_from) {
                tracing::info!(sale = %self.sale, prequeue = draw.size(), "pre-queue drawn");
                let _ = shared.draw.set(draw);
            }
        }
        Ok(RoomView {
            drawn: shared.draw.get().is_some(),
            dead_known: shared.dead.read().expect("lock").total(),
            ..view
        })
    }
}

/// The view of a sale whose meta is `meta` (`None`: not armed, which sessions wait through).
fn view_from(meta: Option<&SaleMeta>, frontier: u64, issued: u64) -> RoomView {
    let Some(meta) = meta else {
        return RoomView {
            loaded: true,
            frontier,
            issued,
            opens_at_ms: i64::MAX,
            max_seats: 1,
            active_cap: u64::MAX,
            stock_factor: 2.0,
            ..RoomView::default()
        };
    };
    RoomView {
        loaded: true,
        beat: 0,
        frontier,
        issued,
        opens_at_ms: meta.opens_at_ms,
        rate: meta.rate,
        measured_rate: None,
        token_ttl_ms: meta.token_ttl_ms,
        max_seats: meta.max_seats,
        paused: meta.paused,
        sold_out: meta.sold_out,
        drawn: false,
        dead_known: 0,
        commitment: meta.lottery_commitment.clone(),
        active_cap: meta.active_cap,
        stock_factor: meta.stock_factor,
        unspent: meta.unspent,
        pools: meta.pools.clone(),
    }
}

/// The draw, once the pre-queue has closed (its size and digest are set) and the secret is known.
fn draw_from(meta: &SaleMeta) -> Option<Draw> {
    let size = meta.prequeue_size?;
    let digest = meta.prequeue_digest.as_deref()?;
    let secret: [u8; 32] = hex::decode(meta.lottery_secret.as_deref()?)
        .ok()?
        .try_into()
        .ok()?;
    Some(Draw::new(draw_seed(&secret, digest), size))
}

/// The XRANGE start just after stream id `id` (or the very start).
fn exclusive(id: &str) -> String {
    if id == "-" {
        "-".into()
    } else {
        format!("({id}")
    }
}

/// Reads a sale's public figures in one round trip (for the summary endpoint); `None` if the
/// sale is not armed.
pub async fn read_view(
    conn: &mut ConnectionManager,
    keys: &SaleKeys,
) -> redis::RedisResult<Option<RoomView>> {
    let mut pipe = redis::pipe();
    SaleMeta::query(&mut pipe, keys);
    let (meta, frontier, issued): (Vec<Option<String>>, Option<u64>, Option<u64>) = pipe
        .get(keys.frontier())
        .get(keys.seq())
        .query_async(conn)
        .await?;
    let Some(meta) = SaleMeta::from_fields(&meta) else {
        return Ok(None);
    };
    Ok(Some(view_from(
        Some(&meta),
        frontier.unwrap_or(0),
        issued.unwrap_or(0),
    )))
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

/// The stock of a sale's pools, as the leader reads it each tick.
#[derive(Debug, Default)]
struct Stock {
    available: u64,
    holds: u64,
    /// Every pool answered with an armed state.
    complete: bool,
}

impl Controller {
    /// Takes or renews the lease; the fencing token if this instance leads.
    async fn lease(
        &mut self,
        driver: &RoomDriver,
        conn: &mut ConnectionManager,
        keys: &SaleKeys,
    ) -> redis::RedisResult<Option<String>> {
        let fence: String = driver
            .scripts
            .lease_call(keys, &driver.instance_id, driver.lease)
            .invoke_async(conn)
            .await?;
        if fence.is_empty() {
            // Someone else leads: a later takeover starts from a fresh, full limiter.
            self.limiter = None;
            return Ok(None);
        }
        Ok(Some(fence))
    }

    /// The leader's work for one tick: stock and sold-out, burying the departed, sweeping dead
    /// gateways, then one fenced advance within rate, cap and stock.
    async fn lead(
        &mut self,
        driver: &RoomDriver,
        conn: &mut ConnectionManager,
        keys: &SaleKeys,
        shared: &Shared,
        view: &mut RoomView,
        fence: &str,
    ) -> redis::RedisResult<()> {
        let now = now_millis();
        let mut pipe = redis::pipe();
        for pool in &view.pools {
            PoolCounts::query(&mut pipe, &driver.keys.pool(&driver.sale, pool));
        }
        pipe.cmd("ZRANGEBYSCORE")
            .arg(keys.gone())
            .arg(1)
            .arg(now)
            .arg("LIMIT")
            .arg(0)
            .arg(HOUSEKEEPING_BATCH)
            .smembers(keys.gateways());
        let replies: Vec<redis::Value> = pipe.query_async(conn).await?;
        let (pool_replies, rest) = replies.split_at(view.pools.len() * PoolCounts::REPLIES);
        let stock = stock_from(&PoolCounts::all_from_replies(pool_replies));
        let due: Vec<u64> = redis::from_redis_value(&rest[0])?;
        let gateways: Vec<String> = redis::from_redis_value(&rest[1])?;

        let opened = now >= view.opens_at_ms;
        if opened && !view.sold_out && stock.complete && stock.available == 0 && stock.holds == 0 {
            // Nothing to sell and no hold that could return a seat: final.
            let _: () = state::writes::sold_out(keys).query_async(conn).await?;
            tracing::info!(sale = %driver.sale, "sold out: the room closes");
            view.sold_out = true;
        }

        if let (Some(draw), false) = (shared.draw.get(), due.is_empty()) {
            let mut bury = driver.scripts.bury.prepare_invoke();
            bury.key(keys.meta())
                .key(keys.frontier())
                .key(keys.gone())
                .key(keys.dead())
                .key(keys.deaths());
            for ticket in &due {
                bury.arg(ticket).arg(draw.place(*ticket));
            }
            let buried: u64 = bury.invoke_async(conn).await?;
            if buried > 0 {
                metrics::counter!("floodgate_tickets_skipped_total").increment(buried);
            }
        }

        self.sweep(driver, conn, keys, &gateways).await?;

        let mut permits = 0u64;
        if opened && !view.paused && !view.sold_out {
            let dead_beyond = {
                let dead = shared.dead.read().expect("lock");
                dead.total() - dead.up_to(view.frontier)
            };
            let live_waiting = view.issued.saturating_sub(view.frontier + dead_beyond);
            let active = view.unspent + stock.holds;
            let cap_room = view.active_cap.saturating_sub(active);
            let stock_room = ((view.stock_factor * stock.available as f64).floor() as u64)
                .saturating_sub(view.unspent);
            let allowed = live_waiting.min(cap_room).min(stock_room);
            if let Some(limiter) = self.limiter_for(view.rate, driver.tick) {
                while permits < allowed && limiter.check().is_ok() {
                    permits += 1;
                }
            }
        }
        // Called every tick, even with no permits: it also expires unspent tokens.
        let (admitted, frontier, exp_ms): (i64, u64, i64) = driver
            .scripts
            .advance_call(keys, fence, permits)
            .invoke_async(conn)
            .await?;
        if admitted < 0 {
            return Ok(());
        }
        if admitted > 0 {
            tracing::debug!(admitted, frontier, "frontier advanced");
            metrics::counter!("floodgate_admissions_total").increment(admitted as u64);
            // Known here at once, so this gateway's admitted clients need not wait a tick.
            shared.batches.lock().expect("lock").push(Batch {
                from: view.frontier,
                to: frontier,
                n: admitted as u64,
                exp_ms,
                at_ms: now_millis(),
            });
        }
        view.frontier = view.frontier.max(frontier);
        Ok(())
    }

    /// Hands the tickets of gateways that died without goodbye to the grace period.
    async fn sweep(
        &self,
        driver: &RoomDriver,
        conn: &mut ConnectionManager,
        keys: &SaleKeys,
        gateways: &[String],
    ) -> redis::RedisResult<()> {
        let others: Vec<&String> = gateways
            .iter()
            .filter(|g| g.as_str() != &*driver.instance_id)
            .collect();
        if others.is_empty() {
            return Ok(());
        }
        let mut pipe = redis::pipe();
        for g in &others {
            pipe.exists(keys.gateway_alive(g));
        }
        let alive: Vec<bool> = pipe.query_async(conn).await?;
        for (gateway, alive) in others.into_iter().zip(alive) {
            if alive {
                continue;
            }
            let swept: i64 = driver
                .scripts
                .sweep
                .key(keys.gateway_alive(gateway))
                .key(keys.gateway_sessions(gateway))
                .key(keys.holders())
                .key(keys.gone())
                .key(keys.gateways())
                .arg(gateway)
                .arg(driver.grace.as_millis() as u64)
                .arg(HOUSEKEEPING_BATCH)
                .invoke_async(conn)
                .await?;
            if swept > 0 {
                tracing::info!(%gateway, swept, "a gateway died: its clients' grace has started");
            }
        }
        Ok(())
    }

    fn limiter_for(&mut self, stored: f64, tick: Duration) -> Option<&DefaultDirectRateLimiter> {
        // Whatever Redis holds (a rate written by hand, by an older release): paced within the
        // valid range, never a panic that would take the room down with it.
        let rate = floodgate_contract::settings::pacing_rate(stored)?;
        if rate != stored && self.limiter.as_ref().map(|(r, _)| *r) != Some(rate) {
            tracing::warn!(stored, rate, "the sale's stored admission rate is out of range; pacing by the nearest valid rate");
        }
        if self.limiter.as_ref().map(|(r, _)| *r) != Some(rate) {
            self.limiter = Some((rate, limiter(rate, tick)));
        }
        self.limiter.as_ref().map(|(_, l)| l)
    }
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
    let burst = (rate * tick.as_secs_f64())
        .ceil()
        .clamp(1.0, f64::from(u32::MAX)) as u32;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eta_follows_the_measured_rate_and_is_unknown_before_opening() {
        let mut view = RoomView {
            opens_at_ms: 1_000,
            rate: 4.0,
            ..Default::default()
        };
        assert_eq!(view.eta_secs(10, 999), None);
        assert_eq!(view.eta_secs(10, 1_000), Some(3));
        view.measured_rate = Some(2.0);
        assert_eq!(view.eta_secs(8, 2_000), Some(4));
        view.paused = true;
        assert_eq!(view.eta_secs(8, 2_000), None);
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
