//! Putting a pool's Redis state right: reading it for reconciliation, applying a safe repair to
//! its counters (`lua/repair_pool.lua`), and rebuilding a lost pool from PostgreSQL
//! (`lua/rebuild_pool.lua`). The decisions (what is safe, what PostgreSQL says) are the
//! callers'; this is only how Redis is asked.

use floodgate_platform::keys::{Keys, PoolKeys};
use floodgate_platform::runtime::RedisConn;
use floodgate_protocol::UnixMillis;
use redis::RedisResult;

use floodgate_platform::script::LuaScript as _;

use super::layouts::{PoolArming, PoolStateKeys};
pub use super::outcomes::{Rebuild, Repaired};
use super::scripts::{RebuildPool, RepairPool};

/// A pool's counters and the seats in its live holds, read together; `None` from
/// [`read_pool`] when its state is missing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolState {
    pub available: i64,
    pub held: i64,
    pub sold: i64,
    /// Seats in the live holds themselves (what `held` must equal).
    pub hold_seats: i64,
    /// The pool's event sequence (the last number it gave an event).
    pub seq: i64,
    /// Refused for lost writes (booking/src/worker.rs) until rebuilt.
    pub diverged: bool,
}

/// Reads `pool`'s counters and holds (every hold's seats: a reconciliation, not a hot path).
pub async fn read_pool(conn: &mut RedisConn, pool: &PoolKeys) -> RedisResult<Option<PoolState>> {
    type Counter = Option<i64>;
    type Read = (
        bool,
        Counter,
        Counter,
        Counter,
        Vec<i64>,
        (Counter, Option<String>),
    );
    let (armed, available, held, sold, holds, (seq, diverged)): Read = redis::pipe()
        .exists(pool.config())
        .get(pool.available())
        .get(pool.held())
        .get(pool.sold())
        .hvals(pool.holds())
        .hget(pool.config(), &["seq", "diverged"])
        .query_async(conn)
        .await?;
    Ok(match (armed, available) {
        (true, Some(available)) => Some(PoolState {
            available,
            held: held.unwrap_or(0),
            sold: sold.unwrap_or(0),
            hold_seats: holds.iter().sum(),
            seq: seq.unwrap_or(0),
            diverged: diverged.is_some(),
        }),
        _ => None,
    })
}

/// Sets `pool`'s `available` and `sold` to `to`, only if they are still `read`: whether they
/// were (false: they moved meanwhile, nothing changed).
pub async fn repair_pool(
    conn: &mut RedisConn,
    pool: &PoolKeys,
    read: (i64, i64),
    to: (i64, i64),
) -> RedisResult<bool> {
    let repaired = RepairPool {
        available: pool.available(),
        sold: pool.sold(),
        read_available: read.0,
        read_sold: read.1,
        available_now: to.0,
        sold_now: to.1,
    }
    .run(conn)
    .await?;
    Ok(repaired == Repaired::Repaired)
}

/// A live hold to restore.
pub struct RestoredHold {
    pub reservation_id: String,
    pub seats: u32,
    pub expires_at_ms: UnixMillis,
}

/// A reservation's record to restore (the pool scripts' `rec`, lua/lib.lua).
pub struct RestoredRecord {
    pub reservation_id: String,
    pub token_id: String,
    /// A fresh secret: the old one was lost with Redis.
    pub secret: String,
    pub seats: u32,
    pub ticket: i64,
    pub expires_at_ms: UnixMillis,
    pub reserved_at_ms: UnixMillis,
    /// `rec.state`, in the scripts' vocabulary.
    pub state: &'static str,
    pub payment_id: Option<String>,
    /// The buyer the reservation was made for, if its pass named one.
    pub buyer: Option<String>,
}

/// Restores a lost pool, or one refused for lost writes, in one atomic step: its records, live
/// holds, counters, event sequence (at least `seq`, the highest PostgreSQL holds) and config.
pub async fn rebuild_pool(
    conn: &mut RedisConn,
    keys: &Keys,
    pool: &PoolArming<'_>,
    sold: i64,
    seq: i64,
    holds: &[RestoredHold],
    records: &[RestoredRecord],
) -> RedisResult<Rebuild> {
    let k = keys.pool(pool.sale, pool.pool);
    // ARGV[10..]: the holds' count and triples, then each record's ten values, in the order of
    // the records' keys.
    let mut restored = vec![holds.len().to_string()];
    for hold in holds {
        restored.extend([
            hold.reservation_id.clone(),
            hold.seats.to_string(),
            hold.expires_at_ms.to_string(),
        ]);
    }
    let mut record_keys = Vec::with_capacity(records.len() * 2);
    for r in records {
        record_keys.extend([
            k.reservation(&r.reservation_id),
            k.token_reservation(&r.token_id),
        ]);
        restored.extend([
            r.reservation_id.clone(),
            r.token_id.clone(),
            r.secret.clone(),
            r.seats.to_string(),
            r.ticket.to_string(),
            r.expires_at_ms.to_string(),
            r.reserved_at_ms.to_string(),
            r.state.to_owned(),
            r.payment_id.clone().unwrap_or_default(),
            r.buyer.clone().unwrap_or_default(),
        ]);
    }
    Ok(RebuildPool {
        state: PoolStateKeys(&k),
        outbox: k.outbox(),
        records: record_keys,
        pool_config: *pool,
        sold_seats: sold,
        seq,
        restored,
    }
    .run(conn)
    .await?)
}

#[cfg(test)]
mod tests {
    use super::super::strings;
    use floodgate_platform::script::FromStrings;

    use super::*;

    #[test]
    fn rebuild_replies_parse() {
        assert_eq!(
            Rebuild::from_strings(&strings(&["rebuilt", "5", "2", "3"])).unwrap(),
            Rebuild::Rebuilt {
                available: 5,
                held: 2,
                sold: 3
            }
        );
        assert_eq!(
            Rebuild::from_strings(&strings(&["intact"])).unwrap(),
            Rebuild::Intact
        );
        assert_eq!(
            Rebuild::from_strings(&strings(&["busy"])).unwrap(),
            Rebuild::Busy
        );
        assert_eq!(
            Rebuild::from_strings(&strings(&["overcommitted", "-1"])).unwrap(),
            Rebuild::Overcommitted
        );
        assert!(Rebuild::from_strings(&strings(&["rebuilt", "x", "2", "3"])).is_none());
    }
}
