//! The admitted person's side: a request per pool tried, each waiting its turn at the booking
//! fleet and at its pool's primary, answered 503 past the Redis timeout; holds paid or expired;
//! and what the run measured at its end.

use super::{Event, Fate, Model, Outcome, Spread, ATTEMPTS, RETRY_MS, TIMEOUT_MS};

impl Model<'_> {
    /// A person sends their next request: the first spends their token (on the sale's slot).
    pub(super) fn ask(&mut self, now: i64, who: u32) {
        let p = &mut self.people[who as usize];
        if !p.claimed && now > p.exp_ms {
            // Thought for longer than the token lives: refused, as the service would.
            p.fate = Fate::TokenExpired;
            p.done_ms = now;
            return;
        }
        p.attempts += 1;
        let pool = usize::from(p.pools[0]);
        let primary = pool % self.pools_free_ms.len();
        let claims = !p.claimed;
        let at = now as f64;
        let booking_start = self.booking_free_ms.max(at);
        let pool_start = self.pools_free_ms[primary].max(booking_start);
        let (booking_wait, pool_wait) = (booking_start - at, pool_start - booking_start);
        if booking_wait + pool_wait > TIMEOUT_MS {
            // Timed out waiting for Redis: 503, and the client retries after a second, twenty
            // times at one pool at most.
            let gave_up = p.attempts >= ATTEMPTS;
            if gave_up {
                p.fate = Fate::GaveUp;
                p.done_ms = now;
            }
            self.out.refused_503 += 1;
            self.second(now).refused_503 += 1;
            if !gave_up {
                self.push(now + RETRY_MS, Event::Ask(who));
            }
            return;
        }
        if claims {
            p.claimed = true;
            // Spent: no longer unspent (its batch may have expired meanwhile, and with it the
            // count).
            if let Some(n) = self.batches.get_mut(&p.exp_ms) {
                *n -= 1;
                self.unspent -= 1;
            }
        }
        let c = self.costs;
        self.booking_free_ms = booking_start + 1e3 / self.fleet.booking_per_second;
        let script_ms = c.reserve_script_us / 1e3;
        self.pools_free_ms[primary] = pool_start + script_ms;
        self.push((pool_start + script_ms).ceil() as i64, Event::Decide(who));
        self.charge_primary(now, primary, c.reserve_script_us);
        let s = self.second(now);
        s.requests += 1;
        s.booking_us += c.booking_request_us;
        if claims {
            s.slot_us += c.claim_script_us;
        }
        s.worst_wait_ms = s.worst_wait_ms.max(booking_wait + pool_wait);
        s.worst_pool_wait_ms = s.worst_pool_wait_ms.max(pool_wait);
    }

    /// The pool's script decides: a hold, or a refusal and the next pool.
    pub(super) fn decide(&mut self, now: i64, who: u32) {
        let answered = now + self.costs.reservation_base_ms.round() as i64;
        let p = &mut self.people[who as usize];
        let pool = p.pools.remove(0);
        p.attempts = 0;
        let seats = p.seats;
        if self.avail[usize::from(pool)] >= u64::from(seats) {
            self.avail[usize::from(pool)] -= u64::from(seats);
            self.held += u64::from(seats);
            self.holds += 1;
            let paid = p.pays;
            let (fate, ends) = if paid {
                (Fate::Paid, answered + self.crowd.pay_ms as i64)
            } else {
                (Fate::WalkedAway, answered + self.sale.hold_ttl_ms)
            };
            p.fate = fate;
            // Who walks away is done at the 201; who pays, once paid.
            p.done_ms = if paid { ends } else { answered };
            p.pools.clear();
            self.push(ends, Event::Settled { pool, seats, paid });
            // The hold's event, and its ack on the pool's primary once the broker has it.
            self.event(now);
            let primary = usize::from(pool) % self.pools_free_ms.len();
            self.charge_primary(now, primary, self.costs.ack_script_us);
        } else if p.pools.is_empty() {
            p.fate = Fate::NothingLeft;
            p.done_ms = answered;
        } else {
            self.push(answered, Event::Ask(who));
        }
    }

    /// Redis time on one of the pools' primaries.
    fn charge_primary(&mut self, now: i64, primary: usize, us: f64) {
        let primaries = self.pools_free_ms.len();
        let s = self.second(now);
        s.pools_us += us;
        s.primary_us.resize(primaries, 0.0);
        s.primary_us[primary] += us;
    }

    /// A hold ends: sold, or its seats back in the pool.
    pub(super) fn settle(&mut self, now: i64, pool: u16, seats: u32, paid: bool) {
        self.held -= u64::from(seats);
        self.holds -= 1;
        if paid {
            self.sold += u64::from(seats);
        } else {
            self.avail[usize::from(pool)] += u64::from(seats);
        }
        self.event(now);
    }

    /// One event on the topic: the broker's, the consumer's and PostgreSQL's work.
    fn event(&mut self, now: i64) {
        let c = self.costs;
        let s = self.second(now);
        s.events += 1;
        s.broker_us += c.broker_event_us;
        s.consumer_us += c.consumer_event_us;
        s.postgres_us += c.postgres_event_us;
    }

    pub(super) fn finish(mut self) -> Outcome {
        let mut out = std::mem::take(&mut self.out);
        let first = self.first_ms;
        let mut admission = Vec::new();
        let mut waits = Vec::with_capacity(self.people.len());
        let mut last_done = first;
        for p in &self.people {
            match p.fate {
                Fate::Paid => out.paid += 1,
                Fate::WalkedAway => out.walked_away += 1,
                Fate::NothingLeft => out.nothing_left_when_admitted += 1,
                Fate::GaveUp => out.gave_up_after_503s += 1,
                Fate::TokenExpired => out.tokens_expired += 1,
                Fate::Waiting | Fate::Left | Fate::Admitted | Fate::SoldOut => {}
            }
            if let Some(answered) = p.answered_ms {
                if p.fate != Fate::SoldOut {
                    admission.push((answered - p.arrived_ms) as f64);
                }
                waits.push((answered - p.ticket_ms).max(0) as f64);
            }
            last_done = last_done.max(p.done_ms);
        }
        out.join_to_admission_ms = Spread::of(admission);
        out.wait_ms = Spread::of(waits);
        out.everyone_finished_s = (last_done - first) as f64 / 1e3;
        out.sold_out_s = self.sold_out_ms.map(|at| at as f64 / 1e3);
        out.seats_sold = self.sold;
        out.seconds = self.seconds;
        out
    }
}
