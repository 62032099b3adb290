//! The services' health summaries for a sale's admission autopilot: each service instance
//! writes its own field of the sale's `health` hash every second (a field, not a key of its
//! own, so the leader reads them all with one command in the sale's slot), and the admission
//! leader reads them.

use std::time::Duration;

use redis::Pipeline;

use crate::autopilot::Health;
use crate::keys::SaleKeys;
use crate::runtime::RedisConn;

/// Writes `health` as the field `instance` (`booking:<id>`, say) of the sale's health hash, and
/// keeps the hash for `ttl` more: a sale no service still writes for loses its hash, and a
/// field whose writer died stays only until then (readers judge a field by its `at_ms`).
pub fn publish(keys: &SaleKeys, instance: &str, health: &Health, ttl: Duration) -> Pipeline {
    let json = serde_json::to_string(health).expect("a health summary serialises");
    let mut pipe = redis::pipe();
    pipe.hset(keys.health(), instance, json)
        .ignore()
        .pexpire(keys.health(), ttl.as_millis() as i64)
        .ignore();
    pipe
}

/// Every summary in the sale's health hash, by the instance that wrote it. A field that does
/// not parse (a newer writer's, say) is left out rather than failing the read.
pub async fn read(
    conn: &mut RedisConn,
    keys: &SaleKeys,
) -> redis::RedisResult<Vec<(String, Health)>> {
    let fields: Vec<(String, String)> = redis::cmd("HGETALL")
        .arg(keys.health())
        .query_async(conn)
        .await?;
    Ok(fields
        .into_iter()
        .filter_map(|(instance, json)| Some((instance, serde_json::from_str(&json).ok()?)))
        .collect())
}
