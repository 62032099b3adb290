//! Arming a sale: each pool's counters (`lua/arm_pool.lua`), then the sale's settings for the
//! waiting room (`lua/arm_sale.lua`), then the sale's place in the list the relay and the
//! reaper walk. Both scripts refuse once the sale has opened by Redis' clock (`lua/clock.lua`).

use floodgate_platform::keys::Keys;
use floodgate_platform::runtime::RedisConn;
use floodgate_platform::script::LuaScript as _;
use floodgate_protocol::settings::Door;
use floodgate_protocol::UnixMillis;
use redis::RedisResult;

pub use super::layouts::PoolArming;
use super::layouts::PoolStateKeys;
pub use super::outcomes::Armed;
use super::scripts::{ArmPool, ArmSale};

/// A sale's settings for the waiting room, as armed.
pub struct SaleArming<'a> {
    pub sale: &'a str,
    pub opens_at_ms: UnixMillis,
    pub rate: f64,
    pub token_ttl_ms: i64,
    pub max_seats: u32,
    pub active_cap: u32,
    pub pools: &'a [&'a str],
    pub paused: bool,
    pub stock_factor: f64,
    /// How long an unspent pass counts against the stock (at most `token_ttl_ms`).
    pub stock_hold_ms: i64,
    pub door: Door,
}

/// Loads one pool's counters (`available` = capacity, nothing held or sold) and config.
pub async fn arm_pool(
    conn: &mut RedisConn,
    keys: &Keys,
    pool: &PoolArming<'_>,
) -> RedisResult<Armed> {
    let k = keys.pool(pool.sale, pool.pool);
    let reply = ArmPool {
        state: PoolStateKeys(&k),
        pool_config: *pool,
    }
    .run(conn)
    .await?;
    Ok(reply)
}

/// Publishes a sale's settings to the waiting room with a fresh lottery secret (only the first
/// arming's is kept, so the commitment shown to the pre-queue never changes), and lists the
/// sale for the relay and the reaper.
pub async fn arm_sale(
    conn: &mut RedisConn,
    keys: &Keys,
    sale: &SaleArming<'_>,
) -> RedisResult<Armed> {
    let k = keys.sale(sale.sale);
    let secret: [u8; 32] = rand::random();
    let commitment = floodgate_protocol::lottery::commitment(&secret);
    let armed = ArmSale {
        meta: k.meta(),
        seq: k.seq(),
        frontier: k.frontier(),
        opens_at_ms: sale.opens_at_ms,
        rate: sale.rate,
        token_ttl_ms: sale.token_ttl_ms,
        max_seats: sale.max_seats,
        active_cap: sale.active_cap,
        pools: sale.pools.join(","),
        paused: if sale.paused { "1" } else { "0" },
        stock_factor: sale.stock_factor,
        seed: hex::encode(secret),
        commitment: hex::encode(commitment),
        identity: sale.door.identity.as_str(),
        challenge: sale.door.challenge.as_str(),
        pow_difficulty: sale.door.pow_difficulty,
        max_seats_per_buyer: sale.door.max_seats_per_buyer.unwrap_or(0),
        grace_secs: sale.door.grace_secs.unwrap_or(0),
        stock_hold_ms: sale.stock_hold_ms,
    }
    .run(conn)
    .await?;
    if armed == Armed::Armed {
        // Known to the relay and the reaper from now on.
        let _: i64 = redis::cmd("SADD")
            .arg(keys.sales())
            .arg(sale.sale)
            .query_async(conn)
            .await?;
    }
    Ok(armed)
}

#[cfg(test)]
mod tests {
    use super::super::strings;
    use floodgate_platform::script::FromStrings;

    use super::*;

    #[test]
    fn arming_replies_parse() {
        assert_eq!(
            Armed::from_strings(&strings(&["armed"])).unwrap(),
            Armed::Armed
        );
        assert_eq!(
            Armed::from_strings(&strings(&["opened", "1700"])).unwrap(),
            Armed::Opened(1700)
        );
        assert!(Armed::from_strings(&strings(&["opened"])).is_none());
        assert!(Armed::from_strings(&strings(&["armed", "x"])).is_none());
    }
}
