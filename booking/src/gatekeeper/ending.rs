//! The end of a sale in Redis: marking it over (no new claim, no new hold), taking it out of the
//! relay's and reaper's walk, and purging its state once PostgreSQL has everything. The
//! decisions (may it end, may it be purged) are `crate::ending`'s; this is how Redis is asked.

use floodgate_platform::keys::{Keys, PoolKeys, SaleKeys};
use floodgate_platform::runtime::RedisConn;
use floodgate_platform::script::LuaScript as _;
use floodgate_platform::state::{writes, SaleMeta};
use floodgate_protocol::UnixMillis;
use redis::RedisResult;

pub use super::outcomes::PoolEnd;
use super::scripts::EndPool;

/// Marks the sale over in its slot: from now on no admission token makes a first claim.
pub async fn mark_sale_ended(
    conn: &mut RedisConn,
    sale: &SaleKeys,
    at_ms: UnixMillis,
) -> RedisResult<()> {
    writes::sale_ended(sale, at_ms).query_async(conn).await
}

/// Ends one pool: no new hold from now on, if nothing is left in flight there.
pub async fn end_pool(conn: &mut RedisConn, pool: &PoolKeys) -> RedisResult<PoolEnd> {
    Ok(EndPool {
        config: pool.config(),
        held: pool.held(),
        outbox: pool.outbox(),
    }
    .run(conn)
    .await?)
}

/// Takes an ended sale out of the walk of live sales and into that of ended ones.
pub async fn retire_sale(conn: &mut RedisConn, keys: &Keys, sale: &str) -> RedisResult<()> {
    // Two commands, in this order: the sale is always in one of the sets (the relay finds its
    // outboxes either way).
    let _: i64 = redis::cmd("SADD")
        .arg(keys.ended_sales())
        .arg(sale)
        .query_async(conn)
        .await?;
    let _: i64 = redis::cmd("SREM")
        .arg(keys.sales())
        .arg(sale)
        .query_async(conn)
        .await?;
    Ok(())
}

/// The sale's meta, or `None` once it is gone (purged, or never armed).
pub async fn read_meta(conn: &mut RedisConn, sale: &SaleKeys) -> RedisResult<Option<SaleMeta>> {
    let mut pipe = redis::pipe();
    SaleMeta::query(&mut pipe, sale);
    let (fields,): (Vec<Option<String>>,) = pipe.query_async(conn).await?;
    Ok(SaleMeta::from_fields(&fields))
}

/// What a purge deletes besides the fixed keys of the sale's and its pools' slots: the
/// per-record keys, named from PostgreSQL's bookings.
pub struct Records {
    /// `(pool, reservation id, admission token id)` of every booking of the sale.
    pub bookings: Vec<(String, String, String)>,
    pub pools: Vec<String>,
}

/// Deletes every key of an ended sale (its waiting room, token uses, pools, holds, records,
/// outboxes), the sale's meta last, so a purge cut short is finished by running it again.
/// Keys that expire by themselves are left to expire (buyers' records, webhook outcomes). Returns
/// how many keys were deleted.
pub async fn purge(
    conn: &mut RedisConn,
    keys: &Keys,
    sale: &str,
    records: &Records,
) -> RedisResult<u64> {
    let sale_keys = keys.sale(sale);
    let gateways: Vec<String> = redis::cmd("SMEMBERS")
        .arg(sale_keys.gateways())
        .query_async(conn)
        .await?;
    let mut deleted = 0;
    for pool in &records.pools {
        let pool_keys = keys.pool(sale, pool);
        let mut doomed = vec![
            pool_keys.config(),
            pool_keys.available(),
            pool_keys.held(),
            pool_keys.sold(),
            pool_keys.holds(),
            pool_keys.expiries(),
            pool_keys.outbox(),
            pool_keys.relay(),
            pool_keys.relay_epoch(),
        ];
        for (_, reservation, token) in records.bookings.iter().filter(|(p, ..)| p == pool) {
            doomed.push(pool_keys.reservation(reservation));
            doomed.push(pool_keys.token_reservation(token));
        }
        deleted += unlink(conn, &doomed).await?;
    }
    let mut doomed = vec![
        sale_keys.seq(),
        sale_keys.frontier(),
        sale_keys.leader(),
        sale_keys.epoch(),
        sale_keys.prequeue(),
        sale_keys.prequeue_batches(),
        sale_keys.gone(),
        sale_keys.away(),
        sale_keys.away_admitted(),
        sale_keys.holders(),
        sale_keys.owners(),
        sale_keys.dead(),
        sale_keys.deaths(),
        sale_keys.admits(),
        sale_keys.batches(),
        sale_keys.tokens(),
        // Drained into the audit trail within seconds of each change; it has no TTL of its own.
        sale_keys.autopilot_audit(),
    ];
    for gateway in &gateways {
        doomed.push(sale_keys.gateway_alive(gateway));
        doomed.push(sale_keys.gateway_sessions(gateway));
    }
    doomed.extend(
        records
            .bookings
            .iter()
            .map(|(_, _, token)| sale_keys.token(token)),
    );
    deleted += unlink(conn, &doomed).await?;
    // The registry and the meta last: while the meta is there the purge is not finished.
    deleted += unlink(conn, &[sale_keys.gateways(), sale_keys.meta()]).await?;
    for set in [keys.ended_sales(), keys.sales()] {
        let _: i64 = redis::cmd("SREM")
            .arg(set)
            .arg(sale)
            .query_async(conn)
            .await?;
    }
    Ok(deleted)
}

/// `UNLINK`s keys of one slot, a bounded number per command.
async fn unlink(conn: &mut RedisConn, doomed: &[String]) -> RedisResult<u64> {
    let mut deleted = 0;
    for chunk in doomed.chunks(500) {
        let n: u64 = redis::cmd("UNLINK").arg(chunk).query_async(conn).await?;
        deleted += n;
    }
    Ok(deleted)
}

#[cfg(test)]
mod tests {
    use super::super::strings;
    use floodgate_platform::script::FromStrings;

    use super::*;

    #[test]
    fn end_replies_parse() {
        assert_eq!(
            PoolEnd::from_strings(&strings(&["ended", "17"])).unwrap(),
            PoolEnd::Ended { at_ms: 17 }
        );
        assert_eq!(
            PoolEnd::from_strings(&strings(&["holding", "3"])).unwrap(),
            PoolEnd::Holding { seats: 3 }
        );
        assert_eq!(
            PoolEnd::from_strings(&strings(&["relaying", "2"])).unwrap(),
            PoolEnd::Relaying { events: 2 }
        );
        assert_eq!(
            PoolEnd::from_strings(&strings(&["not_armed"])).unwrap(),
            PoolEnd::NotArmed
        );
        assert!(PoolEnd::from_strings(&strings(&["holding"])).is_none());
        assert!(PoolEnd::from_strings(&strings(&["?"])).is_none());
    }
}
