//! Where the gateway talks to Redis by hand: the waiting room's Lua scripts (`lua/`), each called
//! one way and its reply read into a type in one function, and the room's pipelined reads. Every
//! key list, argument order and reply shape of the gateway is here or in `contract::state`.
//!
//! - [`tickets`]: a place in line (join, resume, leave).
//! - [`draw`]: the pre-queue's record (nonces and batches of joins) for the draw endpoints.
//! - [`room`]: the room's tick (its read, the lease, bury, sweep, advance, retire).

pub mod draw;
pub mod room;
pub mod tickets;

use floodgate_contract::lua::sale_script;
use redis::Script;

/// The Lua scripts the gateway runs, loaded once from `lua/` and shared by every session and
/// room: each holds its source text, a few KB that must not be copied per session.
pub struct Scripts {
    join: Script,
    resume: Script,
    leave: Script,
    lease: Script,
    advance: Script,
    bury: Script,
    sweep: Script,
    retire: Script,
}

impl Default for Scripts {
    fn default() -> Self {
        // The waiting room's scripts share the clock and sale_lib.lua's helpers.
        let with_lib = sale_script;
        Self {
            join: with_lib(include_str!("../../../lua/join.lua")),
            resume: with_lib(include_str!("../../../lua/resume.lua")),
            leave: with_lib(include_str!("../../../lua/leave.lua")),
            lease: Script::new(include_str!("../../../lua/lease.lua")),
            advance: with_lib(include_str!("../../../lua/advance.lua")),
            bury: with_lib(include_str!("../../../lua/bury.lua")),
            sweep: with_lib(include_str!("../../../lua/sweep.lua")),
            retire: Script::new(include_str!("../../../lua/retire.lua")),
        }
    }
}
