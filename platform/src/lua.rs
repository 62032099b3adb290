//! How a Lua script is put together: its body, with the helper files it calls prepended, so each
//! script is still one atomic `EVALSHA` on one slot. Every script that reads the time starts with
//! `lua/clock.lua`, the one definition of "now" (Redis' `TIME`) and of the arming rule.

use redis::Script;

/// Redis' clock and the arming rule (`lua/clock.lua`).
const CLOCK: &str = include_str!("../../lua/clock.lua");
/// The pool scripts' key layout and helpers (`lua/lib.lua`).
const POOL_LIB: &str = include_str!("../../lua/lib.lua");
/// The sale slot's helpers: closing the pre-queue, registering sessions (`lua/sale_lib.lua`).
const SALE_LIB: &str = include_str!("../../lua/sale_lib.lua");

/// A script on one pool's slot, with the pool scripts' common KEYS layout (`lua/lib.lua`).
pub fn pool_script(body: &str) -> Script {
    composed(&format!("{CLOCK}\n{POOL_LIB}\n{body}"), body)
}

/// A script on a sale's slot (the waiting room's, and the claim of an admission token).
pub fn sale_script(body: &str) -> Script {
    composed(&format!("{CLOCK}\n{SALE_LIB}\n{body}"), body)
}

/// A script that needs only the clock (arming).
pub fn clocked_script(body: &str) -> Script {
    composed(&format!("{CLOCK}\n{body}"), body)
}

/// A script as it is written, named after its first line (`-- reserve: ...`) so its latency
/// is measured under that name (`floodgate_redis_script_duration_seconds`).
pub fn script(source: &str) -> Script {
    composed(source, source)
}

/// The script `source`, named after the first line of `body` (the script's own part, not the
/// helpers before it).
fn composed(source: &str, body: &str) -> Script {
    let script = Script::new(source);
    crate::telemetry::name_script(&script, body);
    script
}
