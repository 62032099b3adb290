//! What a gateway knows about places in line beyond its own clients: which are dead (their
//! tickets were skipped after the grace) and which admission batch each admitted place belongs
//! to. Both are fed from Redis streams once per tick and read by every session of the room.

use std::collections::VecDeque;

/// Dead places, counted by prefix in O(log n) (a Fenwick tree), so each session can compute
/// "live tickets ahead of me" locally. Places only ever die; the tree never forgets one.
#[derive(Debug)]
pub struct DeadPlaces {
    /// 1-based Fenwick tree; its length minus one is a power of two.
    tree: Vec<u32>,
    total: u64,
}

impl Default for DeadPlaces {
    fn default() -> Self {
        Self {
            tree: vec![0; 1025],
            total: 0,
        }
    }
}

impl DeadPlaces {
    fn capacity(&self) -> u64 {
        (self.tree.len() - 1) as u64
    }

    /// Records that `place` (1-based) is dead. Each place must be recorded once.
    pub fn insert(&mut self, place: u64) {
        if place == 0 {
            return;
        }
        while place > self.capacity() {
            self.double();
        }
        let mut i = place as usize;
        while i < self.tree.len() {
            self.tree[i] += 1;
            i += i & i.wrapping_neg();
        }
        self.total += 1;
    }

    /// Doubling a power-of-two Fenwick tree: every new node covers only new (empty) places,
    /// except the last, which covers everything, old places included.
    fn double(&mut self) {
        let old = self.capacity() as usize;
        self.tree.resize(2 * old + 1, 0);
        self.tree[2 * old] = self.total as u32;
    }

    /// Whether `place` is dead.
    pub fn contains(&self, place: u64) -> bool {
        place > 0 && self.up_to(place) > self.up_to(place - 1)
    }

    /// Dead places in `1..=place`.
    pub fn up_to(&self, place: u64) -> u64 {
        let mut i = place.min(self.capacity()) as usize;
        let mut sum = 0u64;
        while i > 0 {
            sum += u64::from(self.tree[i]);
            i &= i - 1;
        }
        sum
    }

    /// Dead places strictly between `after` and `before`.
    pub fn between(&self, after: u64, before: u64) -> u64 {
        if before <= after + 1 {
            return 0;
        }
        self.up_to(before - 1) - self.up_to(after)
    }

    pub fn total(&self) -> u64 {
        self.total
    }

    /// The furthest place `x` with at most `live` live places in `1..=x`: the inverse of
    /// `x - up_to(x)`, by one walk down the tree (places beyond the tree are all live).
    pub fn furthest_with_live(&self, live: u64) -> u64 {
        let capacity = self.capacity() as usize;
        let (mut at, mut left) = (0usize, live);
        let mut step = capacity;
        while step > 0 {
            let next = at + step;
            if next <= capacity {
                let live_in = step as u64 - u64::from(self.tree[next]);
                if live_in <= left {
                    at = next;
                    left -= live_in;
                }
            }
            step >>= 1;
        }
        if at == capacity {
            at as u64 + left
        } else {
            at as u64
        }
    }
}

/// One admission batch, as advance.lua wrote it to the admits stream.
pub use floodgate_platform::state::AdmitEntry as Batch;

/// The recent admission batches, in frontier order.
#[derive(Debug, Default)]
pub struct Batches {
    batches: VecDeque<Batch>,
}

/// How far back admissions count for the measured rate.
pub const RATE_WINDOW_MS: i64 = 10_000;

impl Batches {
    /// Adds a batch unless it is already known (the leader adds its own at once, then reads it
    /// again from the stream).
    pub fn push(&mut self, batch: Batch) {
        if self.batches.back().is_none_or(|last| batch.to > last.to) {
            self.batches.push_back(batch);
        }
    }

    /// The token expiry of the batch that admitted `place`, if that batch is still known.
    pub fn expiry_of(&self, place: u64) -> Option<i64> {
        let i = self.batches.partition_point(|b| b.to < place);
        let batch = self.batches.get(i)?;
        (batch.from < place).then_some(batch.exp_ms)
    }

    /// Forgets batches whose tokens expired more than a minute ago.
    pub fn prune(&mut self, now_ms: i64) {
        while self
            .batches
            .front()
            .is_some_and(|b| b.exp_ms + 60_000 < now_ms)
        {
            self.batches.pop_front();
        }
    }

    /// Live admissions per second over the last [`RATE_WINDOW_MS`] (since `since_ms` if that is
    /// later), or `None` when nothing was admitted in that window.
    pub fn measured_rate(&self, now_ms: i64, since_ms: i64) -> Option<f64> {
        let from = (now_ms - RATE_WINDOW_MS).max(since_ms);
        let span = (now_ms - from).max(1_000);
        let n: u64 = self
            .batches
            .iter()
            .rev()
            .take_while(|b| b.at_ms >= from)
            .map(|b| b.n)
            .sum();
        (n > 0).then(|| n as f64 * 1_000.0 / span as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dead_places_count_by_range_and_grow() {
        let mut dead = DeadPlaces::default();
        let places = [3u64, 7, 8, 1_500, 70_000, 2];
        for p in places {
            dead.insert(p);
        }
        let naive = |a: u64, b: u64| places.iter().filter(|&&p| p > a && p < b).count() as u64;
        for (a, b) in [
            (0, 10),
            (2, 8),
            (3, 9),
            (0, 100_000),
            (1_000, 70_000),
            (7, 8),
        ] {
            assert_eq!(dead.between(a, b), naive(a, b), "({a}, {b})");
        }
        assert_eq!(dead.up_to(u64::MAX), 6);
        assert_eq!(dead.total(), 6);
        for p in 0..80_000 {
            assert_eq!(dead.contains(p), places.contains(&p), "{p}");
        }
    }

    #[test]
    fn the_furthest_place_with_so_many_live_inverts_the_count() {
        let mut dead = DeadPlaces::default();
        for p in [3u64, 4, 9, 1_024, 1_025, 5_000] {
            dead.insert(p);
        }
        let live_up_to = |x: u64| x - dead.up_to(x);
        for live in 0..6_000 {
            // The naive answer: the last x whose live count is still `live`.
            let mut x = 0;
            while live_up_to(x + 1) <= live {
                x += 1;
            }
            assert_eq!(dead.furthest_with_live(live), x, "live {live}");
        }
    }

    #[test]
    fn a_place_finds_the_batch_that_admitted_it() {
        let mut batches = Batches::default();
        let batch = |from, to, n, exp_ms| Batch {
            from,
            to,
            n,
            exp_ms,
            at_ms: exp_ms - 100,
        };
        batches.push(batch(0, 10, 10, 1_000));
        batches.push(batch(10, 15, 5, 2_000));
        batches.push(batch(10, 15, 5, 9_999)); // the same batch again, from the stream
        batches.push(batch(18, 30, 12, 3_000)); // 16..=18 were dead, skipped alone
        assert_eq!(batches.expiry_of(1), Some(1_000));
        assert_eq!(batches.expiry_of(10), Some(1_000));
        assert_eq!(batches.expiry_of(11), Some(2_000));
        assert_eq!(batches.expiry_of(30), Some(3_000));
        assert_eq!(batches.expiry_of(17), None, "skipped, never admitted");
        assert_eq!(batches.expiry_of(31), None, "not admitted yet");
        batches.prune(62_500);
        assert_eq!(
            batches.expiry_of(5),
            None,
            "admitted before every known batch"
        );
        assert_eq!(batches.expiry_of(20), Some(3_000));
    }

    #[test]
    fn the_measured_rate_covers_the_recent_window() {
        let mut batches = Batches::default();
        for i in 0..20 {
            batches.push(Batch {
                from: i * 5,
                to: (i + 1) * 5,
                n: 5,
                exp_ms: 1_000_000,
                at_ms: i as i64 * 1_000,
            });
        }
        // The last 10 s hold batches at 9..=19 s: 11 batches of 5 over 10 s.
        assert_eq!(batches.measured_rate(19_000, 0), Some(5.5));
        assert_eq!(batches.measured_rate(100_000, 0), None);
    }
}
