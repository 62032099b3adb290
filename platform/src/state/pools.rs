//! A pool's counters and live holds, and all of a sale's, read in one round trip per slot.

use redis::aio::ConnectionLike;
use redis::{FromRedisValue, Pipeline, RedisResult, Value};

use super::{redis_time_ms, SaleMeta};
use crate::keys::{Keys, PoolKeys};
use floodgate_protocol::UnixMillis;

/// One pool's counters and live holds, as read together.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct PoolCounts {
    /// From the pool's config: `None` if the config is missing (the pool's state was lost or it
    /// was never armed).
    pub capacity: Option<i64>,
    pub available: Option<i64>,
    pub held: Option<i64>,
    pub sold: Option<i64>,
    /// Live holds (entries of the pool's holds hash).
    pub holds: u64,
}

impl PoolCounts {
    /// Replies [`PoolCounts::query`] adds per pool.
    pub const REPLIES: usize = 5;

    /// Adds the reads of one pool's counts to `pipe` ([`PoolCounts::REPLIES`] replies).
    pub fn query(pipe: &mut Pipeline, keys: &PoolKeys) {
        pipe.hget(keys.config(), "capacity")
            .get(keys.available())
            .get(keys.held())
            .get(keys.sold())
            .hlen(keys.holds());
    }

    /// One pool's counts from its [`PoolCounts::REPLIES`] replies; anything unreadable is
    /// missing, never zero.
    pub fn from_replies(replies: &[Value]) -> Self {
        let int = |i: usize| {
            replies
                .get(i)
                .and_then(|v| Option::<i64>::from_redis_value(v).ok())
                .flatten()
        };
        PoolCounts {
            capacity: int(0),
            available: int(1),
            held: int(2),
            sold: int(3),
            holds: int(4).map_or(0, |h| h.max(0) as u64),
        }
    }

    /// Whether the pool has its whole state (config and the seat counters).
    pub fn armed(&self) -> bool {
        self.capacity.is_some()
            && self.available.is_some()
            && self.held.is_some()
            && self.sold.is_some()
    }

    /// Reads one pool's counts.
    pub async fn read<C: ConnectionLike + Send>(
        conn: &mut C,
        keys: &PoolKeys,
    ) -> RedisResult<Self> {
        let mut pipe = redis::pipe();
        Self::query(&mut pipe, keys);
        let replies: Vec<Value> = pipe.query_async(conn).await?;
        Ok(Self::from_replies(&replies))
    }

    /// Each of `pools`' counts: one pipeline per pool, all at once. Each pool is a slot of its
    /// own, so on a Redis Cluster one pipeline cannot ask them all; on a single Redis the
    /// multiplexed connection sends them together anyway.
    pub async fn read_each<C: ConnectionLike + Clone + Send>(
        conn: &C,
        pools: &[PoolKeys],
    ) -> RedisResult<Vec<Self>> {
        futures::future::try_join_all(pools.iter().map(|keys| {
            let mut conn = conn.clone();
            async move { Self::read(&mut conn, keys).await }
        }))
        .await
    }

    /// Every pool of a pipeline that asked for each in turn.
    pub fn all_from_replies(replies: &[Value]) -> Vec<Self> {
        replies
            .chunks_exact(Self::REPLIES)
            .map(Self::from_replies)
            .collect()
    }
}

/// A sale's meta with Redis' clock, and every pool's counts: what the seat board shows.
#[derive(Clone, Debug, PartialEq)]
pub struct SaleCounts {
    pub meta: SaleMeta,
    /// Redis' clock when read.
    pub at_ms: UnixMillis,
    /// Each pool's counts, in the sale's order.
    pub pools: Vec<(String, PoolCounts)>,
}

impl SaleCounts {
    /// Reads `sale`'s counts in two round trips (the meta names the pools; then every pool at
    /// once); `None` if the sale is not armed.
    pub async fn read<C: ConnectionLike + Clone + Send>(
        conn: &mut C,
        keys: &Keys,
        sale: &str,
    ) -> RedisResult<Option<Self>> {
        let mut pipe = redis::pipe();
        SaleMeta::query(&mut pipe, &keys.sale(sale));
        let (meta, time): (Vec<Option<String>>, (i64, i64)) =
            pipe.cmd("TIME").query_async(conn).await?;
        let Some(meta) = SaleMeta::from_fields(&meta) else {
            return Ok(None);
        };
        let pool_keys: Vec<PoolKeys> = meta.pools.iter().map(|p| keys.pool(sale, p)).collect();
        let counts = PoolCounts::read_each(conn, &pool_keys).await?;
        let pools = meta.pools.iter().cloned().zip(counts).collect();
        Ok(Some(SaleCounts {
            meta,
            at_ms: redis_time_ms(time),
            pools,
        }))
    }
}
