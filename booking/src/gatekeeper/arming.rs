//! Arming a sale: each pool's counters (`lua/arm_pool.lua`), then the sale's settings for the
//! waiting room (`lua/arm_sale.lua`), then the sale's place in the list the relay and the
//! reaper walk. Both scripts refuse once the sale has opened by Redis' clock (`lua/clock.lua`).

use floodgate_platform::keys::{Keys, PoolKeys};
use floodgate_platform::lua::clocked_script;
use floodgate_platform::runtime::RedisConn;
use floodgate_protocol::settings::Door;
use floodgate_protocol::UnixMillis;
use redis::RedisResult;

/// One pool's settings, as armed.
pub struct PoolArming<'a> {
    pub sale: &'a str,
    pub pool: &'a str,
    pub capacity: u32,
    pub hold_ttl_ms: i64,
    pub opens_at_ms: UnixMillis,
    pub fare_minor: i64,
    pub currency: &'a str,
}

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
    pub door: Door,
}

/// What an arming script did.
#[derive(Debug, PartialEq, Eq)]
pub enum Armed {
    /// Written (again: arming is idempotent before the opening).
    Armed,
    /// Refused: the sale opened at this instant (as armed before, or as asked now).
    Opened(UnixMillis),
}

/// Adds a pool's state keys, in the order arm_pool.lua and rebuild_pool.lua take them: config,
/// available, held, sold, holds, expiries.
pub(super) fn with_state_keys<'a, 'b>(
    invocation: &'b mut redis::ScriptInvocation<'a>,
    k: &PoolKeys,
) -> &'b mut redis::ScriptInvocation<'a> {
    invocation
        .key(k.config())
        .key(k.available())
        .key(k.held())
        .key(k.sold())
        .key(k.holds())
        .key(k.expiries())
}

/// Adds a pool's config, in the order arm_pool.lua and rebuild_pool.lua take it (their ARGV[1]
/// to ARGV[7]): capacity, hold TTL, opening, sale, pool, fare, currency.
pub(super) fn with_pool_config<'a, 'b>(
    invocation: &'b mut redis::ScriptInvocation<'a>,
    pool: &PoolArming<'_>,
) -> &'b mut redis::ScriptInvocation<'a> {
    invocation
        .arg(pool.capacity)
        .arg(pool.hold_ttl_ms)
        .arg(pool.opens_at_ms)
        .arg(pool.sale)
        .arg(pool.pool)
        .arg(pool.fare_minor)
        .arg(pool.currency)
}

/// Loads one pool's counters (`available` = capacity, nothing held or sold) and config.
pub async fn arm_pool(
    conn: &mut RedisConn,
    keys: &Keys,
    pool: &PoolArming<'_>,
) -> RedisResult<Armed> {
    let script = clocked_script(include_str!("../../../lua/arm_pool.lua"));
    let mut invocation = script.prepare_invoke();
    with_state_keys(&mut invocation, &keys.pool(pool.sale, pool.pool));
    let reply: Vec<String> = with_pool_config(&mut invocation, pool)
        .invoke_async(conn)
        .await?;
    parse_armed("arm_pool", &reply)
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
    let reply: Vec<String> = clocked_script(include_str!("../../../lua/arm_sale.lua"))
        .key(k.meta())
        .key(k.seq())
        .key(k.frontier())
        .arg(sale.opens_at_ms)
        .arg(sale.rate)
        .arg(sale.token_ttl_ms)
        .arg(sale.max_seats)
        .arg(sale.active_cap)
        .arg(sale.pools.join(","))
        .arg(if sale.paused { "1" } else { "0" })
        .arg(sale.stock_factor)
        .arg(hex::encode(secret))
        .arg(hex::encode(commitment))
        .arg(sale.door.identity.as_str())
        .arg(sale.door.challenge.as_str())
        .arg(sale.door.pow_difficulty)
        .arg(sale.door.max_seats_per_buyer.unwrap_or(0))
        .arg(sale.door.grace_secs.unwrap_or(0))
        .invoke_async(conn)
        .await?;
    let armed = parse_armed("arm_sale", &reply)?;
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

/// `{"armed"}` or `{"opened", at_ms}`.
fn parse_armed(script: &str, reply: &[String]) -> RedisResult<Armed> {
    match reply {
        [armed] if armed == "armed" => Ok(Armed::Armed),
        [opened, at] if opened == "opened" => at
            .parse()
            .map(Armed::Opened)
            .map_err(|_| super::replies::protocol_error(script, reply)),
        _ => Err(super::replies::protocol_error(script, reply)),
    }
}

#[cfg(test)]
mod tests {
    use super::super::strings;
    use super::*;

    #[test]
    fn arming_replies_parse() {
        assert_eq!(
            parse_armed("a", &strings(&["armed"])).unwrap(),
            Armed::Armed
        );
        assert_eq!(
            parse_armed("a", &strings(&["opened", "1700"])).unwrap(),
            Armed::Opened(1700)
        );
        assert!(parse_armed("a", &strings(&["opened"])).is_err());
        assert!(parse_armed("a", &strings(&["armed", "x"])).is_err());
    }
}
