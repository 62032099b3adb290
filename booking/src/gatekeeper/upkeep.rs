//! What the relay and the reaper read and clear in Redis: the armed pools, each pool's outbox
//! and its relay lease, the holds that are due. Each is one typed call here, so the workers hold
//! no key or command of their own.

use floodgate_platform::script::LuaScript as _;
use floodgate_platform::scripts::{Lease, Leased};
use floodgate_platform::state::{pool_list, redis_time_ms};
use floodgate_protocol::UnixMillis;
use redis::streams::StreamRangeReply;

pub use super::outcomes::Sequence;
use super::scripts::Diverge;
use super::Gatekeeper;

/// One event waiting in a pool's outbox.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutboxEntry {
    /// The stream entry's id (`<Unix ms>-<n>`).
    pub id: String,
    /// The envelope's JSON, or `None` for an entry without one (cleared as it is found).
    pub event: Option<String>,
}

impl OutboxEntry {
    /// When the entry was written, Unix ms (its id starts with it).
    pub fn written_ms(&self) -> UnixMillis {
        self.id
            .split('-')
            .next()
            .and_then(|ms| ms.parse().ok())
            .unwrap_or(0)
    }
}

impl Gatekeeper {
    /// Compares `pool`'s event sequence with `kafka_seq`, the highest number Kafka delivered
    /// (`reused`: PostgreSQL saw a number twice), and refuses it if it lost writes
    /// (`lua/diverge.lua`).
    pub async fn check_sequence(
        &self,
        sale: &str,
        pool: &str,
        kafka_seq: i64,
        reused: bool,
    ) -> redis::RedisResult<Sequence> {
        let keys = self.keys.pool(sale, pool);
        Ok(Diverge {
            config: keys.config(),
            delivered: kafka_seq,
            repeated: if reused { "1" } else { "0" },
        }
        .run(&mut self.redis.clone())
        .await?)
    }

    /// Every pool of every armed sale that has not ended, as `(sale, pool)`.
    pub async fn armed_pools(&self) -> redis::RedisResult<Vec<(String, String)>> {
        self.pools_of(self.keys.sales()).await
    }

    /// Every pool of every sale that ended and is not purged yet.
    pub async fn ended_pools(&self) -> redis::RedisResult<Vec<(String, String)>> {
        self.pools_of(self.keys.ended_sales()).await
    }

    /// Every pool of every sale in the set `sales`.
    async fn pools_of(&self, sales: String) -> redis::RedisResult<Vec<(String, String)>> {
        let mut conn = self.redis.clone();
        let sales: Vec<String> = redis::cmd("SMEMBERS")
            .arg(sales)
            .query_async(&mut conn)
            .await?;
        if sales.is_empty() {
            return Ok(Vec::new());
        }
        // Each sale's meta is in a slot of its own: one read per sale, all at once.
        let lists = futures::future::try_join_all(sales.iter().map(|sale| {
            let mut conn = conn.clone();
            let keys = self.keys.sale(sale);
            async move {
                let mut pipe = redis::pipe();
                floodgate_platform::state::SaleMeta::query_pools(&mut pipe, &keys);
                let (list,): (Option<String>,) = pipe.query_async(&mut conn).await?;
                redis::RedisResult::Ok(list)
            }
        }))
        .await?;
        Ok(sales
            .into_iter()
            .zip(lists)
            .flat_map(|(sale, list)| {
                pool_list(&list.unwrap_or_default())
                    .into_iter()
                    .map(move |pool| (sale.clone(), pool))
            })
            .collect())
    }

    /// Events waiting in the pool's outbox (the oldest `max`), or none without reading further
    /// when it is empty.
    pub async fn outbox(
        &self,
        sale: &str,
        pool: &str,
        max: usize,
    ) -> redis::RedisResult<Vec<OutboxEntry>> {
        let outbox = self.keys.pool(sale, pool).outbox();
        let mut conn = self.redis.clone();
        let pending: usize = redis::cmd("XLEN")
            .arg(&outbox)
            .query_async(&mut conn)
            .await?;
        if pending == 0 {
            return Ok(Vec::new());
        }
        let entries: StreamRangeReply = redis::cmd("XRANGE")
            .arg(&outbox)
            .arg("-")
            .arg("+")
            .arg("COUNT")
            .arg(max)
            .query_async(&mut conn)
            .await?;
        Ok(entries
            .ids
            .iter()
            .map(|entry| OutboxEntry {
                id: entry.id.clone(),
                event: entry.get::<String>("e"),
            })
            .collect())
    }

    /// Removes outbox entries whose events the broker acknowledged.
    pub async fn drop_outbox_entries(
        &self,
        sale: &str,
        pool: &str,
        ids: &[String],
    ) -> redis::RedisResult<()> {
        if ids.is_empty() {
            return Ok(());
        }
        let _: i64 = redis::cmd("XDEL")
            .arg(self.keys.pool(sale, pool).outbox())
            .arg(ids)
            .query_async(&mut self.redis.clone())
            .await?;
        Ok(())
    }

    /// Takes or renews the lease on relaying the pool's outbox for `lease_ms`
    /// (`lua/lease.lua`): whether `instance` holds it. One relay at a time keeps a pool's
    /// events in order on its partition.
    pub async fn relay_lease(
        &self,
        sale: &str,
        pool: &str,
        instance: &str,
        lease_ms: u64,
    ) -> redis::RedisResult<bool> {
        let keys = self.keys.pool(sale, pool);
        let leased = Lease {
            leader: keys.relay(),
            epoch: keys.relay_epoch(),
            instance,
            lease_ms,
        }
        .run(&mut self.redis.clone())
        .await?;
        Ok(matches!(leased, Leased::Held { .. }))
    }

    /// Holds of the pool whose expiry has passed by `now_ms` (the oldest `max`), to be expired
    /// one by one ([`Gatekeeper::expire`] decides by Redis' clock).
    pub async fn due_holds(
        &self,
        sale: &str,
        pool: &str,
        now_ms: UnixMillis,
        max: usize,
    ) -> redis::RedisResult<Vec<String>> {
        redis::cmd("ZRANGEBYSCORE")
            .arg(self.keys.pool(sale, pool).expiries())
            .arg("-inf")
            .arg(now_ms)
            .arg("LIMIT")
            .arg(0)
            .arg(max)
            .query_async(&mut self.redis.clone())
            .await
    }

    /// Redis' clock, Unix ms.
    pub async fn now_ms(&self) -> redis::RedisResult<UnixMillis> {
        let time: (i64, i64) = redis::cmd("TIME")
            .query_async(&mut self.redis.clone())
            .await?;
        Ok(redis_time_ms(time))
    }
}

#[cfg(test)]
mod tests {
    use floodgate_platform::script::FromReply;

    use super::*;

    #[test]
    fn an_entry_knows_when_it_was_written() {
        let entry = OutboxEntry {
            id: "1700000000123-4".into(),
            event: None,
        };
        assert_eq!(entry.written_ms(), 1_700_000_000_123);
    }

    #[test]
    fn divergence_replies_parse() {
        let found = |n: i64| Sequence::from_reply(redis::Value::Int(n));
        assert_eq!(found(0), Ok(Sequence::InStep));
        assert_eq!(found(1), Ok(Sequence::Refused { newly: true }));
        assert_eq!(found(2), Ok(Sequence::Refused { newly: false }));
        assert_eq!(found(-1), Ok(Sequence::NotArmed));
        assert!(found(3).is_err());
    }
}
