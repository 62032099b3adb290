//! The keys and arguments several of the booking service's scripts share, in their order, for
//! their declarations (`scripts`): a pool's state keys and a pool's configuration, as arming and
//! rebuilding take them.

use floodgate_platform::keys::PoolKeys;
use floodgate_platform::script::{ArgLayout, Call, KeyLayout};
use floodgate_protocol::UnixMillis;

/// A pool's state keys, the first six `KEYS` of `arm_pool.lua` and `rebuild_pool.lua`: config,
/// available, held, sold, holds, expiries.
pub struct PoolStateKeys<'a>(pub &'a PoolKeys);

impl KeyLayout for PoolStateKeys<'_> {
    const KEYS: &'static [(&'static str, &'static str)] = &[
        ("config", "cfg hash"),
        ("available", "available"),
        ("held", "held"),
        ("sold", "sold"),
        ("holds", "holds hash"),
        ("expiries", "expiries zset"),
    ];

    fn write<C: Call>(&self, call: &mut C) {
        let k = self.0;
        for key in [
            k.config(),
            k.available(),
            k.held(),
            k.sold(),
            k.holds(),
            k.expiries(),
        ] {
            call.key(&key);
        }
    }
}

/// A pool's configuration, the first seven `ARGV` of `arm_pool.lua` and `rebuild_pool.lua`.
impl ArgLayout for PoolArming<'_> {
    const ARGS: &'static [(&'static str, &'static str)] = &[
        ("capacity", "capacity"),
        ("hold_ttl_ms", "hold TTL (ms)"),
        ("opens_at_ms", "opens_at (Unix ms)"),
        ("sale", "sale id"),
        ("pool", "pool id"),
        ("fare_minor", "fare per seat"),
        ("currency", "currency"),
    ];

    fn write<C: Call>(&self, call: &mut C) {
        call.arg(&self.capacity);
        call.arg(&self.hold_ttl_ms);
        call.arg(&self.opens_at_ms);
        call.arg(&self.sale);
        call.arg(&self.pool);
        call.arg(&self.fare_minor);
        call.arg(&self.currency);
    }
}

/// One pool's settings, as armed.
#[derive(Clone, Copy, Debug)]
pub struct PoolArming<'a> {
    pub sale: &'a str,
    pub pool: &'a str,
    pub capacity: u32,
    pub hold_ttl_ms: i64,
    pub opens_at_ms: UnixMillis,
    pub fare_minor: i64,
    pub currency: &'a str,
}
