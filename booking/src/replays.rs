//! Replays of a settled reservation, answered from memory: a client's retry after a lost 201,
//! or a stranger replaying one pass's key and body from many connections, gets the original 201
//! (the same bytes, as idempotency promises) with no Redis work at all, once this instance has
//! answered that reservation (or a replay of it) 201.
//!
//! Only a whole success is kept: the hold durable and everything it stands on on the replicas
//! (crate::reservations), so the answer kept is one this service has already promised, and a
//! promised answer never changes (a retry gets it "whatever happened since"). A request is
//! answered from here only when it matches what was answered exactly (the pass, the key, the
//! pool, the seats); anything else (another key with the same pass, a changed body) goes the
//! whole way and gets the refusal the scripts give it.
//!
//! Memory is bounded: at most [`KEPT`] answers (a few hundred bytes each), the oldest dropped
//! first; the entries are real reservations, which only admitted people make.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use floodgate_protocol::api::booking::ReservationCreated;

/// The most answers one instance keeps: far more than a sale's holds in flight at once.
pub const KEPT: usize = 65_536;

/// The answers this instance gave, by pass (`window::pass_key`).
#[derive(Default)]
pub struct Answered {
    inner: Mutex<Kept>,
}

#[derive(Default)]
struct Kept {
    by_pass: HashMap<u64, Entry>,
    order: VecDeque<u64>,
}

struct Entry {
    key: String,
    seats: u32,
    answer: ReservationCreated,
}

impl Answered {
    /// The 201 to give a replay of `key` for `pool` and `seats` with pass `pass`, if this
    /// instance answered exactly that before.
    pub fn replay(
        &self,
        pass: u64,
        key: &str,
        pool: &str,
        seats: u32,
    ) -> Option<ReservationCreated> {
        let kept = self.inner.lock().expect("lock");
        let entry = kept.by_pass.get(&pass)?;
        (entry.key == key && entry.answer.pool == pool && entry.seats == seats)
            .then(|| entry.answer.clone())
    }

    /// Keeps the 201 just given to `key` for `seats` with pass `pass`.
    pub fn keep(&self, pass: u64, key: &str, seats: u32, answer: &ReservationCreated) {
        let mut kept = self.inner.lock().expect("lock");
        let entry = Entry {
            key: key.to_owned(),
            seats,
            answer: answer.clone(),
        };
        if kept.by_pass.insert(pass, entry).is_none() {
            kept.order.push_back(pass);
        }
        while kept.order.len() > KEPT {
            if let Some(oldest) = kept.order.pop_front() {
                kept.by_pass.remove(&oldest);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use floodgate_protocol::reservation::ReservationState;

    use super::*;

    fn created(pool: &str) -> ReservationCreated {
        ReservationCreated {
            reservation_id: format!("{pool}~1"),
            sale: "s".into(),
            pool: pool.into(),
            seats: 2,
            status: ReservationState::Held,
            reserved_at_ms: 1,
            hold_expires_at_ms: 2,
            secret: "secret".into(),
        }
    }

    #[test]
    fn only_the_very_same_request_is_replayed_and_the_oldest_go_first() {
        let answered = Answered::default();
        answered.keep(7, "k", 2, &created("p1"));
        assert_eq!(answered.replay(7, "k", "p1", 2), Some(created("p1")));
        assert_eq!(answered.replay(7, "other key", "p1", 2), None);
        assert_eq!(answered.replay(7, "k", "p2", 2), None);
        assert_eq!(answered.replay(7, "k", "p1", 1), None);
        assert_eq!(answered.replay(8, "k", "p1", 2), None);
        for pass in 100..100 + KEPT as u64 {
            answered.keep(pass, "k", 2, &created("p1"));
        }
        assert_eq!(answered.replay(7, "k", "p1", 2), None, "the oldest went");
        assert!(answered
            .replay(100 + KEPT as u64 - 1, "k", "p1", 2)
            .is_some());
    }
}
