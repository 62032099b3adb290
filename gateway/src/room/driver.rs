//! The room's task: once per tick it reads the sale's state, lets the controller lead if this
//! gateway holds the lease, publishes the view, and wakes the sessions that have something to
//! send (the board: `board.rs`).

use std::sync::Arc;
use std::time::Duration;

use floodgate_platform::keys::{Keys, SaleKeys};
use floodgate_platform::runtime::RedisConn;
use floodgate_protocol::now_millis;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::board::news;
use super::controller::{Controller, Leading};
use super::crossings::Crossings;
use super::join_rate::JoinRate;
use super::view::{draw_from, view_from, RoomView};
use super::{Room, Shared};
use crate::scripts;
use crate::scripts::room::Cursor;

/// Everything the room's task needs; built by the gateway state.
pub struct RoomDriver {
    pub sale: String,
    pub keys: Keys,
    pub redis: RedisConn,
    /// This process' name in the lease and the session registry (unique per run).
    pub instance_id: Arc<str>,
    pub tick: Duration,
    pub lease: Duration,
    /// How long a departed client keeps its place in a sale that sets no grace of its own (the
    /// sweep of dead gateways uses it too).
    pub grace: Duration,
    /// How often each session hears from the room at least: a ping and a fresh ETA.
    pub heartbeat: Duration,
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
        let shared = Arc::new(Shared::new(heartbeat_groups(self.heartbeat, self.tick)));
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
        let mut cursor = Cursor::default();
        let mut joins = JoinRate::default();
        let mut failing = false;
        let mut wakes = Wakes::default();
        // However the task ends (shutdown, retirement, a panic), its sessions are told.
        let _closing = Closing(shared.clone());
        let mut heartbeats =
            Heartbeats::new(self.heartbeat, self.tick, tokio::time::Instant::now());
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = retire.cancelled() => {
                    self.retire(&keys).await;
                    break;
                }
                _ = ticker.tick() => {}
            }
            let ticked = self
                .tick_once(&keys, &shared, &mut cursor, &mut controller)
                .await;
            // A new tick's messages are made afresh (their ETAs move).
            shared.frames.clear();
            match ticked {
                Ok(view) => {
                    if failing {
                        tracing::info!(sale = %self.sale, "waiting room reads recovered");
                        failing = false;
                    }
                    let (join_rate, join_rate_low) =
                        joins.observe(tokio::time::Instant::now(), view.issued);
                    let view = RoomView {
                        join_rate,
                        join_rate_low,
                        ..view
                    };
                    publish(&tx, &shared, view);
                    wakes.after(&shared, &tx.borrow());
                }
                // Sessions keep the last view; they are told nothing wrong, only nothing new
                // (but the heartbeat goes on).
                Err(e) => {
                    if !failing {
                        tracing::warn!(sale = %self.sale, error = %e, "waiting room read failed");
                        failing = true;
                    }
                }
            }
            shared
                .board
                .heartbeat(heartbeats.due(tokio::time::Instant::now()));
        }
        // Retired or stopping: this gateway leads the sale no more, whatever its last tick said
        // (a leader's last figures would otherwise stand until the process ends).
        controller.follow(&self.sale);
    }

    /// Removes this gateway's keys from the sale's slot. If Redis is unreachable they lapse by
    /// themselves (the liveness and the lease have TTLs) and the leader's sweep removes the
    /// registry entry.
    async fn retire(&self, keys: &SaleKeys) {
        let mut conn = self.redis.clone();
        match scripts::leader::retire(&mut conn, keys, &self.instance_id).await {
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
        let lease = scripts::leader::lease(&mut conn, keys, &self.instance_id, self.lease);
        match lease.await? {
            Some(fence) => {
                let leading = Leading {
                    sale: &self.sale,
                    keys: &self.keys,
                    instance_id: &self.instance_id,
                    tick: self.tick,
                    grace: self.grace,
                };
                controller
                    .lead(&leading, &mut conn, keys, shared, &mut view, &fence)
                    .await?;
            }
            // Someone else leads: a later takeover starts from a fresh, full limiter.
            None => controller.follow(&self.sale),
        }
        let now = now_millis();
        let mut batches = shared.batches.lock().expect("lock");
        batches.prune(now);
        view.measured_rate = batches.measured_rate(now, view.opens_at_ms);
        Ok(view)
    }

    /// The per-tick read, with what it learnt of the deaths, the admissions and the draw kept
    /// in `shared`.
    async fn read(
        &self,
        conn: &mut RedisConn,
        keys: &SaleKeys,
        shared: &Shared,
        cursor: &mut Cursor,
    ) -> redis::RedisResult<RoomView> {
        let read =
            scripts::room::read_tick(conn, keys, &self.instance_id, self.lease, cursor).await?;
        if !read.deaths.is_empty() {
            let mut dead = shared.dead.write().expect("lock");
            for place in &read.deaths {
                dead.insert(*place);
            }
        }
        for number in &read.taken_over {
            shared.board.tell_session(*number, news::TAKEN_OVER);
        }
        if !read.admits.is_empty() {
            let mut batches = shared.batches.lock().expect("lock");
            for batch in read.admits {
                batches.push(batch);
            }
        }
        let view = view_from(read.meta.as_ref(), read.frontier, read.issued);
        if shared.draw.get().is_none() {
            if let Some(draw) = read.meta.as_ref().and_then(draw_from) {
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

/// Stores `view` as the room's latest (for joins, the place poll and the sessions) and tells
/// every session when it holds news for all of them.
fn publish(tx: &watch::Sender<RoomView>, shared: &Shared, view: RoomView) {
    let mut news = false;
    tx.send_modify(|current| {
        news = current.news_for_everyone(&view);
        *current = view;
    });
    if news {
        shared.board.tell_all(news::ROOM);
    }
}

/// The heartbeat groups: one per tick of the heartbeat, so each tick pings about one group and
/// the room's pings are spread over the heartbeat.
fn heartbeat_groups(heartbeat: Duration, tick: Duration) -> u32 {
    (heartbeat.as_millis() / tick.as_millis().max(1)).clamp(1, 10_000) as u32
}

/// Whose heartbeat is due, by the clock: the heartbeat is cut into one slot per group, and each
/// tick tells the groups of the slots that began since the last. Counting ticks instead would
/// let a slow tick (a busy gateway, a slow Redis) stretch everyone's heartbeat past the
/// contract's 15 s.
struct Heartbeats {
    started: tokio::time::Instant,
    slot: Duration,
    told: u64,
}

impl Heartbeats {
    /// Each group is told once per `heartbeat` less a `tick` (the tick the message may wait to
    /// be sent after its turn comes) and less a twentieth of the heartbeat, for a busy
    /// gateway's and the network's lateness, so the client hears within `heartbeat`. Measured
    /// with 10,000 clients on one gateway: a 15 s period gave silences of up to 15.02 s, and
    /// 14.9 s (a tick less) up to 15.01 s.
    fn new(heartbeat: Duration, tick: Duration, now: tokio::time::Instant) -> Self {
        let period = heartbeat.saturating_sub(tick + heartbeat / 20).max(tick);
        Heartbeats {
            started: now,
            slot: (period / heartbeat_groups(heartbeat, tick)).max(Duration::from_micros(1)),
            told: 0,
        }
    }

    /// The slots due at `now` and not told yet.
    fn due(&mut self, now: tokio::time::Instant) -> std::ops::Range<u64> {
        let reached = (now.duration_since(self.started).as_nanos() / self.slot.as_nanos()) as u64;
        let due = self.told..reached.max(self.told);
        self.told = due.end;
        due
    }
}

/// Tells every session the room has ended when the room's task ends: they close with 1012 and
/// the resume token, so their clients take their places to another gateway.
struct Closing(Arc<Shared>);

impl Drop for Closing {
    fn drop(&mut self) {
        self.0.board.tell_all(news::CLOSING);
    }
}

/// What the room task remembers between ticks to wake only the sessions with news.
#[derive(Default)]
struct Wakes {
    /// The grid crossings of the line (once drawn).
    crossings: Crossings,
    /// The pre-queue's size as last shown, and when.
    prequeue: Option<(u64, tokio::time::Instant)>,
}

/// The least time between two pre-queue sizes pushed to everyone: the pre-queue fills within
/// seconds of a rush and every change would wake every session.
const PREQUEUE_EVERY: Duration = Duration::from_secs(1);

impl Wakes {
    /// Tells the sessions whose shown position the newly published `view` changed. A session
    /// placed after this reads that view (or a newer one) itself when it places itself.
    fn after(&mut self, shared: &Shared, view: &RoomView) {
        if view.drawn {
            let ranges = {
                let dead = shared.dead.read().expect("lock");
                self.crossings
                    .advance(view.frontier, &dead, shared.board.furthest())
            };
            if !ranges.is_empty() {
                shared.board.moved(&ranges);
            }
            return;
        }
        let size = floodgate_protocol::freshness::shown(view.issued);
        let now = tokio::time::Instant::now();
        let due = self
            .prequeue
            .is_none_or(|(shown, at)| shown != size && now.duration_since(at) >= PREQUEUE_EVERY);
        if due {
            self.prequeue = Some((size, now));
            shared.board.tell_all(news::MOVED);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slow_ticks_do_not_stretch_the_heartbeat() {
        // A 1 s heartbeat over 100 ms ticks: ten groups, each told every 850 ms (a tick is left
        // for the sending, and 50 ms for lateness). The ticks come late: at 250, 500, 750 and
        // 850 ms.
        let start = tokio::time::Instant::now();
        let mut heartbeats =
            Heartbeats::new(Duration::from_secs(1), Duration::from_millis(100), start);
        let mut told = Vec::new();
        for ms in [250, 500, 750, 850] {
            told.extend(heartbeats.due(start + Duration::from_millis(ms)));
        }
        let groups: std::collections::BTreeSet<u64> = told.iter().map(|slot| slot % 10).collect();
        assert_eq!(
            groups.len(),
            10,
            "every group within the heartbeat: {told:?}"
        );
        assert_eq!(told, (0..10).collect::<Vec<_>>(), "each once, in turn");
        assert!(heartbeats
            .due(start + Duration::from_millis(850))
            .is_empty());
    }
}
