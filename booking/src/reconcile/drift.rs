//! What a reconciliation concludes from one pool's figures, as pure functions: the drifts between
//! Redis and PostgreSQL, the lost writes a failover left, and the repair that is safe.

use super::RedisCounts;

/// A disagreement, and whether (and how) it can be repaired safely.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Drift {
    /// Redis has no counters for the pool.
    StateLost,
    /// `available + held + sold` is more than the capacity: too much is sellable.
    OverCapacity { excess: i64 },
    /// `available + held + sold` is less than the capacity: seats are unaccounted for.
    UnderCapacity { missing: i64 },
    /// PostgreSQL holds more confirmed seats than Redis counts as sold: Redis lost sales, and
    /// would sell those seats again.
    SoldBelowConfirmed { missing: i64 },
    /// Redis counts more sold seats than PostgreSQL confirmed: events still on their way (the
    /// consumer is behind) or lost before PostgreSQL.
    SoldAboveConfirmed { extra: i64 },
    /// The `held` counter disagrees with the live holds.
    HeldMismatch { counter: i64, holds: i64 },
    /// Redis lost writes in a failover: its event sequence is behind the highest number Kafka
    /// delivered (or gave a number twice). The pool is refused until rebuilt from PostgreSQL.
    LostWrites { redis_seq: i64, kafka_seq: i64 },
}

impl Drift {
    pub fn describe(&self) -> String {
        match self {
            Drift::StateLost => "Redis has no state for this pool: it is refused until rebuilt".into(),
            Drift::OverCapacity { excess } => format!(
                "{excess} seat(s) more than capacity are counted (repair: take them from available)"
            ),
            Drift::UnderCapacity { missing } => format!(
                "{missing} seat(s) of the capacity are unaccounted for (not repaired: adding them could sell a seat twice)"
            ),
            Drift::SoldBelowConfirmed { missing } => format!(
                "PostgreSQL confirms {missing} more sold seat(s) than Redis counts (repair: move them from available to sold)"
            ),
            Drift::SoldAboveConfirmed { extra } => format!(
                "Redis counts {extra} sold seat(s) PostgreSQL has not confirmed (consumer behind, or events lost: check the lag)"
            ),
            Drift::HeldMismatch { counter, holds } => format!(
                "held counter {counter} but live holds have {holds} seat(s) (not repaired)"
            ),
            Drift::LostWrites { redis_seq, kafka_seq } => format!(
                "Redis lost writes in a failover (event sequence {redis_seq}, Kafka's {kafka_seq}): refused; repair replays PostgreSQL into it after the Kafka tail"
            ),
        }
    }
}

/// The drifts between one pool's two sides (pure, so every case is unit-tested).
pub fn drifts(capacity: i64, redis: Option<RedisCounts>, confirmed_seats: i64) -> Vec<Drift> {
    let Some(r) = redis else {
        return vec![Drift::StateLost];
    };
    let mut found = Vec::new();
    if r.sold < confirmed_seats {
        found.push(Drift::SoldBelowConfirmed {
            missing: confirmed_seats - r.sold,
        });
    } else if r.sold > confirmed_seats {
        found.push(Drift::SoldAboveConfirmed {
            extra: r.sold - confirmed_seats,
        });
    }
    let total = r.available + r.held + r.sold;
    if total > capacity {
        found.push(Drift::OverCapacity {
            excess: total - capacity,
        });
    } else if total < capacity {
        found.push(Drift::UnderCapacity {
            missing: capacity - total,
        });
    }
    if r.held != r.hold_seats {
        found.push(Drift::HeldMismatch {
            counter: r.held,
            holds: r.hold_seats,
        });
    }
    found
}

/// Whether a pool lost writes: refused already, or its sequence behind Kafka's highest number
/// (`kafka_seq`, as the consumer recorded it), or a number that came twice (`reused`).
pub fn lost_writes(r: &RedisCounts, kafka_seq: i64, reused: bool) -> Option<Drift> {
    (r.diverged || reused || r.seq < kafka_seq).then_some(Drift::LostWrites {
        redis_seq: r.seq,
        kafka_seq,
    })
}

/// The safe repair of `r`: counters with sold raised to what PostgreSQL confirmed and available
/// lowered so the total is the capacity again, taking only from available. `None` if there is
/// nothing safe to do.
pub fn safe_repair(capacity: i64, r: RedisCounts, confirmed_seats: i64) -> Option<(i64, i64)> {
    let sold = r.sold.max(confirmed_seats);
    let available = (capacity - r.held - sold).min(r.available).max(0);
    let changed = (available, sold) != (r.available, r.sold);
    // Never more sellable than before, and the invariant restored (or as close as allowed).
    (changed && available <= r.available).then_some((available, sold))
}
