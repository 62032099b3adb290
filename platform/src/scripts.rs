//! The scripts both services run, declared once ([`crate::script`]); each service declares the
//! rest of its own beside the code that calls them (`floodgate_gateway::scripts`,
//! `floodgate_booking::gatekeeper`).

use crate::keys::PoolKeys;
use crate::script::{Call, Declaration, FromReply, KeyLayout};

/// The `KEYS` every pool script takes first, all in the pool's slot (`lua/lib.lua`): the
/// pool's config and counters, its holds, expiries and outbox, and one reservation's record.
pub struct PoolLayout([String; 8]);

impl PoolLayout {
    /// The layout of `pool`, naming the reservation `reservation_id`.
    pub fn new(pool: &PoolKeys, reservation_id: &str) -> Self {
        Self([
            pool.config(),
            pool.available(),
            pool.held(),
            pool.sold(),
            pool.holds(),
            pool.expiries(),
            pool.outbox(),
            pool.reservation(reservation_id),
        ])
    }
}

impl KeyLayout for PoolLayout {
    const KEYS: &'static [(&'static str, &'static str)] = &[
        ("config", "cfg hash"),
        ("available", "available"),
        ("held", "held"),
        ("sold", "sold"),
        ("holds", "holds hash"),
        ("expiries", "expiries"),
        ("outbox", "outbox"),
        ("reservation", "the reservation (hash)"),
    ];

    fn write<C: Call>(&self, call: &mut C) {
        for key in &self.0 {
            call.key(key);
        }
    }
}

crate::lua_script! {
    /// `lua/lease.lua`: takes or renews a lease (a sale's admission controller, a pool's relay):
    /// the fencing token `<id>#<epoch>` if `instance` holds it, "" if another does.
    pub struct Lease<'a> {
        file: "lease.lua",
        helpers: None,
        reply: Leased,
        keys {
            leader: "leader key",
            epoch: "epoch counter",
        }
        args {
            instance: &'a str = "this instance's id",
            lease_ms: u64 = "lease length (ms)",
        }
    }
}

/// The scripts declared here.
pub const DECLARED: &[&Declaration] = &[<Lease<'_> as crate::script::LuaScript>::DECLARATION];

/// What `lease.lua` answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Leased {
    /// This instance holds the lease; `fence` (`<id>#<epoch>`) fences off every earlier holder.
    Held { fence: String },
    /// Another instance holds it.
    Elsewhere,
}

/// The fencing token, or `""` when another instance holds the lease.
impl FromReply for Leased {
    fn from_reply(value: redis::Value) -> Result<Self, String> {
        let fence = String::from_reply(value)?;
        Ok(if fence.is_empty() {
            Self::Elsewhere
        } else {
            Self::Held { fence }
        })
    }
}
