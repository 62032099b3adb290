//! Where the gateway talks to Redis by hand: the waiting room's Lua scripts (`lua/`), each called
//! one way and its reply read into a type in one function, and the room's pipelined reads. Every
//! key list, argument order and reply shape of the gateway is here or in `platform::state`.
//!
//! - [`tickets`]: a place in line (join, leave); [`takeback`]: taking it back with its resume
//!   token, and whether it still stands.
//! - [`buyers`]: one place in line per buyer (the buyer's record).
//! - [`draw`]: the pre-queue's record (nonces and batches of joins) for the draw endpoints.
//! - [`room`]: the room's tick (its read, the lease, bury, sweep, advance, retire).

pub mod buyers;
pub mod draw;
pub mod room;
pub mod takeback;
pub mod tickets;

use std::sync::Arc;
use std::time::Duration;

use floodgate_platform::keys::{Keys, SaleKeys};
use floodgate_platform::lua::{clocked_script, sale_script};
use floodgate_platform::runtime::RedisConn;
use redis::Script;

/// One sale's scripts on this gateway: what every script call of its sessions needs (the sale's
/// keys, the connection, this gateway's name in the sale's registry, the batched joins and
/// departures). Made once per room; sessions reach it through their room's context.
pub struct SaleScope {
    pub sale: String,
    pub keys: SaleKeys,
    /// Every key builder (a buyer's record lives outside the sale's slot).
    pub root_keys: Keys,
    pub redis: RedisConn,
    pub scripts: Arc<Scripts>,
    /// This sale's joins and departures on this gateway, sent in batches.
    pub lines: tickets::Lines,
    pub instance_id: Arc<str>,
    /// Lifetime of this gateway's liveness key, renewed when a session registers.
    pub lease: Duration,
}

/// The Lua scripts the gateway runs, loaded once from `lua/` and shared by every session and
/// room: each holds its source text, a few KB that must not be copied per session.
pub struct Scripts {
    join: Script,
    resume: Script,
    standing: Script,
    leave: Script,
    lease: Script,
    advance: Script,
    bury: Script,
    sweep: Script,
    retire: Script,
    buyer_place: Script,
}

impl Default for Scripts {
    fn default() -> Self {
        // The waiting room's scripts share the clock and sale_lib.lua's helpers.
        let with_lib = sale_script;
        Self {
            join: with_lib(include_str!("../../../lua/join.lua")),
            resume: with_lib(include_str!("../../../lua/resume.lua")),
            standing: with_lib(include_str!("../../../lua/standing.lua")),
            leave: with_lib(include_str!("../../../lua/leave.lua")),
            lease: floodgate_platform::lua::script(include_str!("../../../lua/lease.lua")),
            advance: with_lib(include_str!("../../../lua/advance.lua")),
            bury: with_lib(include_str!("../../../lua/bury.lua")),
            sweep: with_lib(include_str!("../../../lua/sweep.lua")),
            retire: floodgate_platform::lua::script(include_str!("../../../lua/retire.lua")),
            buyer_place: clocked_script(include_str!("../../../lua/buyer_place.lua")),
        }
    }
}

/// What the gateway answers when a script's reply is not the shape it documents: logged with
/// the reply, and a retryable 503 for the client.
pub(crate) fn odd_reply(script: &str, reply: &str) -> crate::error::ApiError {
    tracing::error!(script, %reply, "a waiting-room script answered oddly");
    crate::error::ApiError::Unavailable(
        floodgate_protocol::api::code::REDIS_UNAVAILABLE,
        "the waiting room answered oddly; retry in a second".into(),
    )
}

/// A script's reply as the tests of its parser write it.
#[cfg(test)]
pub(crate) fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}
