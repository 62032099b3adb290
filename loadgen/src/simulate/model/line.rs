//! The line's side of the model: everyone's arrival and ticket, the lottery, who gives up, who is
//! admitted, who is told the sale sold out, and what the waiting cost each second.

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use super::{Event, Fate, Model, Person, Spread};

impl Model<'_> {
    /// Everyone's arrival, ticket and patience; the line in place order.
    pub(super) fn arrive(&mut self) {
        let crowd = self.crowd;
        let mut arrivals: Vec<i64> = (0..crowd.people)
            .map(|_| {
                let early = self.rng.gen_bool(crowd.prequeue.clamp(0.0, 1.0));
                let s = if early {
                    -crowd.prequeue_from_s + self.rng.gen::<f64>() * crowd.prequeue_spread_s
                } else {
                    -crowd.spike_s * (1.0 - self.rng.gen::<f64>()).ln()
                };
                (s * 1_000.0).round() as i64
            })
            .collect();
        arrivals.sort_unstable();
        self.first_ms = arrivals.first().copied().unwrap_or(0);
        // Joins are served in order, as fast as the slower of the gateways and the sale's slot
        // (what the leader's tick leaves of its core).
        let c = self.costs;
        let slot_left = (1.0 - c.slot_us_per_s / 1e6).max(0.05);
        let per_join_ms = (c.gateway_join_us / (self.fleet.gateway_cores * 1e3))
            .max(c.slot_join_us / 1e3 / slot_left);
        let mut free = f64::MIN;
        let max_seats = self.sale.max_seats.min(crowd.seats).max(1);
        for at in arrivals {
            free = free.max(at as f64) + per_join_ms;
            let ticket_ms = free.ceil() as i64;
            let patience = crowd.patience_s.map_or(f64::INFINITY, |mean| {
                -mean * (1.0 - self.rng.gen::<f64>()).ln()
            });
            self.people.push(Person {
                arrived_ms: at,
                ticket_ms,
                // Past any run's end when nobody gives up.
                leaves_ms: ticket_ms.saturating_add((patience * 1e3).min(1e15) as i64),
                answered_ms: None,
                done_ms: ticket_ms,
                exp_ms: 0,
                seats: self.rng.gen_range(1..=max_seats),
                pays: self.rng.gen_bool(crowd.pay_ratio.clamp(0.0, 1.0)),
                luck: self.rng.gen(),
                fate: Fate::Waiting,
                claimed: false,
                attempts: 0,
                pools: Vec::new(),
            });
            let costs = self.costs;
            let s = self.second(ticket_ms);
            s.joins += 1;
            s.gateway_us += costs.gateway_join_us;
            s.slot_us += costs.slot_join_us;
        }
        let waits = self
            .people
            .iter()
            .map(|p| (p.ticket_ms - p.arrived_ms) as f64);
        self.out.join_to_ticket_ms = Spread::of(waits.collect());
        self.out.all_ticketed_s = self
            .people
            .last()
            .map_or(0.0, |p| (p.ticket_ms - self.first_ms) as f64 / 1e3);
        // The pre-queue's order is drawn at the opening; later joins follow in order.
        let early = self.people.partition_point(|p| p.ticket_ms < self.opens_ms);
        let mut line: Vec<u32> = (0..self.people.len() as u32).collect();
        line[..early].shuffle(&mut self.rng);
        self.line = line;
        let mut leaving: Vec<u32> = (0..self.people.len() as u32).collect();
        leaving.sort_by_key(|&i| self.people[i as usize].leaves_ms);
        self.leaving = leaving;
        self.out.people = self.people.len() as u64;
    }

    /// People whose patience ran out before they were admitted leave the line.
    pub(super) fn leave_until(&mut self, now: i64) {
        while let Some(&who) = self.leaving.get(self.left_next) {
            let p = &mut self.people[who as usize];
            if p.leaves_ms > now {
                break;
            }
            self.left_next += 1;
            if p.fate == Fate::Waiting && p.ticket_ms <= now {
                p.fate = Fate::Left;
                p.done_ms = p.leaves_ms;
                self.out.left_the_line += 1;
                self.dead_beyond += 1;
            }
        }
    }

    /// Moves the frontier past `permits` live people (and the dead among them).
    pub(super) fn admit(&mut self, now: i64, mut permits: u64, issued: usize) {
        let exp = now + self.sale.token_ttl_ms;
        let mut admitted = 0;
        while permits > 0 && self.frontier < issued {
            let who = self.line[self.frontier];
            self.frontier += 1;
            let p = &mut self.people[who as usize];
            if p.fate == Fate::Left {
                self.dead_beyond -= 1;
                continue;
            }
            p.fate = Fate::Admitted;
            p.answered_ms = Some(now);
            p.exp_ms = exp;
            let mut luck = StdRng::seed_from_u64(p.luck);
            p.pools = (0..self.sale.pools.len() as u16).collect();
            p.pools.shuffle(&mut luck);
            let think = self.crowd.think_ms * luck.gen_range(0.5..1.5);
            permits -= 1;
            admitted += 1;
            self.push(now + think as i64, Event::Ask(who));
        }
        if admitted > 0 {
            self.unspent += admitted;
            *self.batches.entry(exp).or_default() += admitted;
            let message_us = self.costs.gateway_message_us;
            let s = self.second(now);
            s.admitted += admitted;
            s.messages += admitted;
            s.gateway_us += admitted as f64 * message_us;
        }
    }

    /// The room closes: everyone waiting is told, and whoever joins later is told at once.
    pub(super) fn sold_out(&mut self, now: i64) {
        self.sold_out_ms = Some(now);
        let mut told = 0;
        for p in &mut self.people {
            if p.fate == Fate::Waiting {
                p.fate = Fate::SoldOut;
                let at = p.ticket_ms.max(now);
                p.answered_ms = Some(at);
                p.done_ms = at;
                told += 1;
            }
        }
        self.out.sold_out_while_waiting = told;
        let message_us = self.costs.gateway_message_us;
        let s = self.second(now);
        s.messages += told;
        s.gateway_us += told as f64 * message_us;
    }

    /// What the people waiting this tick cost (a tick's share of a second's), and the rate.
    pub(super) fn account_waiting(&mut self, now: i64, issued: usize) {
        let done = self.frontier as u64 + self.dead_beyond;
        let waiting = if self.sold_out_ms.is_some() {
            0
        } else {
            (issued as u64).saturating_sub(done)
        };
        let front = waiting.min(10_000) as f64;
        let behind = waiting as f64 - front;
        let share = super::TICK_MS as f64 / 1e3;
        let (c, rate) = (self.costs, self.rate);
        let s = self.second(now);
        s.waiting = s.waiting.max(waiting);
        s.connections = s.connections.max(waiting);
        s.gateway_us += share
            * (front * c.gateway_wait_front_us_per_client_s
                + behind * c.gateway_wait_behind_us_per_client_s);
        s.slot_us += share * c.slot_us_per_s;
        s.rate = rate;
    }
}
