//! The scripts of a sale's and a pool's life outside the rush, run by the admin commands
//! (`floodgate-booking sale arm`, `sale end`, `pool repair`, `pool rebuild`): loading a pool and
//! the sale's settings, closing a pool, and putting a pool's counters right.

use super::super::layouts::{PoolArming, PoolStateKeys};
use super::super::outcomes::{Armed, PoolEnd, Rebuild, Repaired};

floodgate_platform::lua_script! {
    /// `lua/arm_pool.lua`: loads one pool's counters and config.
    pub struct ArmPool<'a> {
        file: "arm_pool.lua",
        helpers: Clock,
        reply: Armed,
        layout { state: PoolStateKeys<'a> }
        keys {}
        arg_layout { pool_config: PoolArming<'a> }
        args {}
    }
}

floodgate_platform::lua_script! {
    /// `lua/arm_sale.lua`: publishes a sale's settings to the waiting room.
    pub struct ArmSale<'a> {
        file: "arm_sale.lua",
        helpers: Clock,
        reply: Armed,
        keys {
            meta: "sale meta hash",
            seq: "ticket sequence",
            frontier: "frontier",
        }
        args {
            opens_at_ms: i64 = "opens_at (Unix ms)",
            rate: f64 = "admission rate (per second)",
            token_ttl_ms: i64 = "token TTL (ms)",
            max_seats: u32 = "max seats per booking",
            active_cap: u32 = "active cap",
            pools: String = "pool ids, comma-separated",
            paused: &'a str = "paused (0/1)",
            stock_factor: f64 = "stock factor",
            seed: String = "a fresh lottery secret seed (hex)",
            commitment: String = "its commitment (SHA-256 hex)",
            identity: &'a str = "identity (optional/required)",
            challenge: &'a str = "challenge (none/pow)",
            pow_difficulty: u8 = "proof-of-work difficulty (bits)",
            max_seats_per_buyer: u32 = "most seats per buyer (0: no limit)",
            grace_secs: u32 = "the sale's grace in seconds",
            stock_hold_ms: i64 = "how long an unspent pass counts against the stock",
        }
    }
}

floodgate_platform::lua_script! {
    /// `lua/end_pool.lua`: no new hold in a pool from now on, if nothing is in flight there.
    pub struct EndPool {
        file: "end_pool.lua",
        helpers: Pool,
        reply: PoolEnd,
        keys {
            config: "cfg hash",
            held: "held (integer)",
            outbox: "outbox (stream)",
        }
        args {}
    }
}

floodgate_platform::lua_script! {
    /// `lua/repair_pool.lua`: sets a pool's counters, only if they are still as read.
    pub struct RepairPool {
        file: "repair_pool.lua",
        helpers: None,
        reply: Repaired,
        keys {
            available: "available",
            sold: "sold",
        }
        args {
            read_available: i64 = "available as read",
            read_sold: i64 = "sold as read",
            available_now: i64 = "new available",
            sold_now: i64 = "new sold",
        }
    }
}

floodgate_platform::lua_script! {
    /// `lua/rebuild_pool.lua`: restores a lost pool, or one refused for lost writes.
    pub struct RebuildPool<'a> {
        file: "rebuild_pool.lua",
        helpers: None,
        reply: Rebuild,
        layout { state: PoolStateKeys<'a> }
        keys {
            outbox: "outbox",
        }
        rest_keys { records = "per restored reservation, its record then its token's pointer" }
        arg_layout { pool_config: PoolArming<'a> }
        args {
            sold_seats: i64 = "seats sold",
            seq: i64 = "the highest event sequence number PostgreSQL holds for the pool",
        }
        rest {
            restored: Vec<String> =
                "number of live holds H, then H triples: reservation id, seats, hold expiry"
        }
    }
}
