//! The sale, on a virtual clock: a discrete-event model of everything between the first arrival
//! and the last seat settled.
//!
//! - **Arrivals**: the pre-queue (people who come before the opening, spread over a window; the
//!   lottery draws their order at the opening) and the opening spike (the rest, exponentially
//!   after the opening). Each join costs the gateways CPU and the sale's slot Redis time, and is
//!   ticketed in order as fast as the slower of the two allows.
//! - **Waiting**: a person gives up after their patience (exponential), leaving a dead place the
//!   frontier skips. Every waiting person costs the gateways a little each second, at the front
//!   of the line more than behind; the leader's tick costs the sale's slot the same whatever the
//!   line's length.
//! - **Admission**: a tick every 100 ms: tokens of expired batches stop counting, the sale is
//!   sold out once nothing is available or held, and the leader admits what the rate limiter
//!   and [`Room::allowed`] (the same rule as the gateways') let in, with the autopilot's
//!   [`Autopilot`] (the same controller as the gateways') moving the rate if it is on.
//! - **Booking**: an admitted person thinks, then tries the pools in a random order, one request
//!   each (the first also spends their token, on the sale's slot); a request waits its turn at
//!   the booking fleet and at its pool's primary, and is answered 503 (then retried, as the
//!   client does, up to 20 times a pool) if it would wait past the Redis client's timeout. A hold
//!   is paid (sold) or walked away from (its seats come back when it expires).
//!
//! Costs come from [`Costs`]; what it measures goes into one [`Second`] a second of virtual time.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::time::Duration;

use floodgate_platform::admission::{self, Room};
use floodgate_platform::autopilot::{Autopilot, Decision};
use rand::rngs::StdRng;
use rand::SeedableRng;
use serde::Serialize;

mod booking;
mod health;
mod line;

use super::costs::Costs;
use super::scenario::{Crowd, Fleet, Sale};
pub use super::spread::Spread;

/// How long a simulated sale may run on its virtual clock before the model stops it.
pub const LIMIT: Duration = Duration::from_secs(6 * 3600);
/// The admission leader's tick (the gateways' `FLOODGATE_TICK_MS` default).
pub const TICK_MS: i64 = 100;
/// A request waiting longer than this for Redis is answered 503 (the services' Redis timeout).
const TIMEOUT_MS: f64 = 2_000.0;
/// How long a person waits before retrying a 503 (the client honours `Retry-After`: 1 s).
const RETRY_MS: i64 = 1_000;
/// Attempts at one reservation before giving up (the load generator's and the page's).
const ATTEMPTS: u32 = 20;
/// The health summaries' window (`platform::autopilot::window::SPAN`).
const HEALTH_WINDOW_S: usize = 5;

/// What became of one person.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fate {
    Waiting,
    Left,
    Admitted,
    SoldOut,
    NothingLeft,
    Paid,
    WalkedAway,
    /// Thought for longer than the token lives: refused at the first request.
    TokenExpired,
    /// Twenty 503s at one pool.
    GaveUp,
}

#[derive(Clone, Debug)]
struct Person {
    arrived_ms: i64,
    ticket_ms: i64,
    leaves_ms: i64,
    /// When they were admitted, or told the sale was sold out.
    answered_ms: Option<i64>,
    /// When their run ended (paid, walked away, nothing left, gave up, told sold out).
    done_ms: i64,
    /// The expiry of the batch that admitted them.
    exp_ms: i64,
    seats: u32,
    pays: bool,
    /// Seeds what they do once admitted (how long they think, the pools' order): drawn with
    /// the rest on arrival, so a change of admission (the autopilot's) changes no one's draws.
    luck: u64,
    fate: Fate,
    /// Whether their token is spent (their first request), and their attempts at the pool they
    /// are trying now.
    claimed: bool,
    attempts: u32,
    /// The pools still to try, in their order (indexes into the sale's pools), drawn when
    /// admitted.
    pools: Vec<u16>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    Tick,
    /// A person asks for their next pool (or again, after a 503).
    Ask(u32),
    /// A request reaches its pool's script.
    Decide(u32),
    /// A hold ends: paid (its seats sold) or expired (its seats back).
    Settled {
        pool: u16,
        seats: u32,
        paid: bool,
    },
}

/// One second of virtual time: the work done in it and what it cost.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Second {
    pub joins: u64,
    pub connections: u64,
    pub waiting: u64,
    pub admitted: u64,
    pub messages: u64,
    pub requests: u64,
    pub refused_503: u64,
    pub events: u64,
    /// CPU (microseconds) of the gateways, the sale's slot, the booking fleet, the pools'
    /// primaries, the broker and the consumer with PostgreSQL.
    pub gateway_us: f64,
    pub slot_us: f64,
    pub booking_us: f64,
    pub pools_us: f64,
    /// The pools' Redis time on each primary (a pool lives on primary `pool % primaries`).
    pub primary_us: Vec<f64>,
    pub broker_us: f64,
    pub consumer_us: f64,
    pub postgres_us: f64,
    /// The admission rate at the second's end.
    pub rate: f64,
    /// The worst wait a request had for its turn this second, at the booking fleet and at the
    /// pools' primaries (ms).
    worst_wait_ms: f64,
    worst_pool_wait_ms: f64,
}

/// What the run measured.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Outcome {
    pub people: u64,
    /// When the last person was ticketed, after the first arrival (s).
    pub all_ticketed_s: f64,
    /// How long joins waited for their ticket (ms): the gateways' or the sale's slot's queue.
    pub join_to_ticket_ms: Spread,
    /// When the sale sold out (the room closed), after the opening (s).
    pub sold_out_s: Option<f64>,
    /// When everyone had their answer (admitted and finished, or told sold out), after the first
    /// arrival (s).
    pub everyone_finished_s: f64,
    /// Arrival to admission, for those admitted (ms): what the load generator's rush measures.
    pub join_to_admission_ms: Spread,
    /// Ticket to an answer (admission or sold out), everyone (ms).
    pub wait_ms: Spread,
    pub paid: u64,
    pub walked_away: u64,
    pub sold_out_while_waiting: u64,
    pub nothing_left_when_admitted: u64,
    pub left_the_line: u64,
    pub gave_up_after_503s: u64,
    pub tokens_expired: u64,
    pub refused_503: u64,
    pub seats_sold: u64,
    /// The autopilot's decisions that changed the rate (cuts and raises).
    pub rate_changes: u64,
    /// The run reached its time limit ([`LIMIT`]) before the sale ended: its figures are partial.
    pub truncated: bool,
    #[serde(skip)]
    pub seconds: Vec<Second>,
}

/// One run of the model.
pub struct Model<'a> {
    costs: &'a Costs,
    sale: &'a Sale,
    fleet: &'a Fleet,
    crowd: &'a Crowd,
    rng: StdRng,
    people: Vec<Person>,
    /// Everyone's index in place order (the pre-queue's drawn, then the rest as they came).
    line: Vec<u32>,
    /// Indexes sorted by when they would leave.
    leaving: Vec<u32>,
    left_next: usize,
    frontier: usize,
    dead_beyond: u64,
    avail: Vec<u64>,
    /// Seats held, and the holds holding them (what the active cap counts).
    held: u64,
    holds: u64,
    sold: u64,
    unspent: u64,
    batches: BTreeMap<i64, u64>,
    sold_out_ms: Option<i64>,
    rate: f64,
    tokens: f64,
    pilot: Option<Autopilot>,
    booking_free_ms: f64,
    pools_free_ms: Vec<f64>,
    heap: BinaryHeap<Reverse<(i64, u64, Event)>>,
    seq: u64,
    first_ms: i64,
    opens_ms: i64,
    seconds: Vec<Second>,
    /// The consumers' lag as of the start of second `lag_upto` (kept as the run goes, for the
    /// autopilot's health).
    lag: f64,
    lag_upto: usize,
    out: Outcome,
}

impl<'a> Model<'a> {
    pub fn new(costs: &'a Costs, sale: &'a Sale, fleet: &'a Fleet, crowd: &'a Crowd) -> Self {
        let pilot = crowd
            .autopilot
            .as_ref()
            .map(|s| Autopilot::new(s.clone(), sale.admission_rate));
        Self {
            costs,
            sale,
            fleet,
            crowd,
            rng: StdRng::seed_from_u64(crowd.seed),
            people: Vec::new(),
            line: Vec::new(),
            leaving: Vec::new(),
            left_next: 0,
            frontier: 0,
            dead_beyond: 0,
            avail: sale.pools.iter().map(|&c| u64::from(c)).collect(),
            held: 0,
            holds: 0,
            sold: 0,
            unspent: 0,
            batches: BTreeMap::new(),
            sold_out_ms: None,
            rate: pilot.as_ref().map_or(sale.admission_rate, Autopilot::rate),
            tokens: 0.0,
            pilot,
            booking_free_ms: 0.0,
            pools_free_ms: vec![0.0; fleet.pool_primaries.max(1) as usize],
            heap: BinaryHeap::new(),
            seq: 0,
            first_ms: 0,
            opens_ms: 0,
            seconds: Vec::new(),
            lag: 0.0,
            lag_upto: 0,
            out: Outcome::default(),
        }
    }

    /// Runs the sale to its end (everyone answered, every hold settled), or to `limit`.
    pub fn run(mut self, limit: Duration) -> Outcome {
        self.arrive();
        self.push(self.opens_ms.min(self.first_ms), Event::Tick);
        let end = self.first_ms + limit.as_millis() as i64;
        while let Some(Reverse((at, _, event))) = self.heap.pop() {
            if at > end {
                self.out.truncated = true;
                break;
            }
            match event {
                Event::Tick => {
                    if self.tick(at) {
                        self.push(at + TICK_MS, Event::Tick);
                    }
                }
                Event::Ask(who) => self.ask(at, who),
                Event::Decide(who) => self.decide(at, who),
                Event::Settled { pool, seats, paid } => self.settle(at, pool, seats, paid),
            }
        }
        self.finish()
    }

    fn push(&mut self, at: i64, event: Event) {
        self.seq += 1;
        self.heap.push(Reverse((at, self.seq, event)));
    }

    fn second(&mut self, at: i64) -> &mut Second {
        let i = ((at - self.first_ms).max(0) / 1_000) as usize;
        if self.seconds.len() <= i {
            self.seconds.resize(i + 1, Second::default());
        }
        &mut self.seconds[i]
    }

    /// One admission tick; false once nothing can change any more.
    fn tick(&mut self, now: i64) -> bool {
        self.leave_until(now);
        // A batch (named by its tokens' expiry) counts until its hold on the stock ends, as
        // lua/advance.lua counts it: the sale's `stock_hold_secs`, or the tokens' life.
        let shortfall = self.sale.token_ttl_ms - self.sale.stock_hold_ms;
        while let Some((&exp, &n)) = self.batches.first_key_value() {
            if exp - shortfall > now {
                break;
            }
            self.unspent -= n;
            self.batches.remove(&exp);
        }
        let available: u64 = self.avail.iter().sum();
        if now >= self.opens_ms && self.sold_out_ms.is_none() && available == 0 && self.held == 0 {
            self.sold_out(now);
        }
        let issued = self.people.partition_point(|p| p.ticket_ms <= now);
        let live_waiting =
            (issued.saturating_sub(self.frontier) as u64).saturating_sub(self.dead_beyond);
        let admitting = now >= self.opens_ms && self.sold_out_ms.is_none();
        if admitting {
            self.steer(now);
            let room = Room {
                live_waiting,
                active_cap: self.sale.active_cap,
                unspent: self.unspent,
                holds: self.holds,
                available,
                stock_factor: self.sale.stock_factor,
            };
            let tick = Duration::from_millis(TICK_MS as u64);
            let burst = f64::from(admission::burst(self.rate, tick));
            self.tokens = (self.tokens + self.rate * TICK_MS as f64 / 1e3).min(burst);
            let permits = (self.tokens.floor() as u64).min(room.allowed());
            self.tokens -= permits as f64;
            self.admit(now, permits, issued);
        }
        self.account_waiting(now, issued);
        // The room closed, or everyone is ticketed and answered with nothing held or on the way:
        // no tick can change anything (the admitted finding nothing left need none).
        let idle = issued == self.people.len()
            && live_waiting == 0
            && self.held == 0
            && self.heap.is_empty();
        self.sold_out_ms.is_none() && !idle
    }

    /// The autopilot's step on the health the services would publish now.
    fn steer(&mut self, now: i64) {
        // The leader steps the autopilot once a second (gateway/src/room/pilot.rs).
        if self.pilot.is_none() || (now - self.opens_ms).rem_euclid(1_000) >= TICK_MS {
            return;
        }
        let complete = (((now - self.first_ms).max(0) / 1_000) as usize).min(self.seconds.len());
        // The consumers' lag: what the topic took beyond what they apply a second.
        let c = self.costs;
        let per_second = 1e6 / (c.consumer_event_us + c.postgres_event_us).max(1e-9);
        for s in &self.seconds[self.lag_upto.min(complete)..complete] {
            self.lag = (self.lag + s.events as f64 - per_second).max(0.0);
        }
        self.lag_upto = self.lag_upto.max(complete);
        let health = health::health(&self.seconds[..complete], now, self.lag, self.costs);
        let Some(pilot) = self.pilot.as_mut() else {
            return;
        };
        let decision = pilot.step(now, health.as_ref());
        if !matches!(decision, Decision::Held { .. }) {
            self.out.rate_changes += 1;
        }
        self.rate = pilot.rate();
    }
}

#[cfg(test)]
pub(crate) mod tests;
