//! Where the gateway talks to Redis: the waiting room's Lua scripts (`lua/`), each declared once
//! (`floodgate_platform::script`: its keys and arguments by name, its reply's type) and called
//! one way, and the room's pipelined reads. Every key list, argument order and reply shape of
//! the gateway is here or in `platform::state`.
//!
//! - [`tickets`]: a place in line (join, leave); [`takeback`]: taking it back with its resume
//!   token, and whether it still stands; [`taken_over`]: the session it was taken from, closed.
//! - [`buyers`]: one place in line per buyer (the buyer's record).
//! - [`draw`]: the pre-queue's record (nonces and batches of joins) for the draw endpoints.
//! - [`room`]: the room's reads (the tick's, the leader's, the summary's); [`leader`]: the
//!   room's scripts (the lease, bury, sweep, advance, retire); [`pilot`]: the admission
//!   autopilot's read of the sale's health and its fenced step.

pub mod buyers;
pub mod departures;
pub mod draw;
pub mod leader;
pub mod pilot;
pub mod room;
pub mod takeback;
pub mod taken_over;
pub mod tickets;

use std::sync::Arc;
use std::time::Duration;

use floodgate_platform::keys::{Keys, SaleKeys};
use floodgate_platform::runtime::RedisConn;
use floodgate_platform::script::{Declaration, LuaScript};

/// One sale's scripts on this gateway: what every script call of its sessions needs (the sale's
/// keys, the connection, this gateway's name in the sale's registry, the batched joins and
/// departures). Made once per room; sessions reach it through their room's context.
pub struct SaleScope {
    pub sale: String,
    pub keys: SaleKeys,
    /// Every key builder (a buyer's record lives outside the sale's slot).
    pub root_keys: Keys,
    pub redis: RedisConn,
    /// This sale's joins and departures on this gateway, sent in batches.
    pub lines: tickets::Lines,
    pub instance_id: Arc<str>,
    /// Lifetime of this gateway's liveness key, renewed when a session registers.
    pub lease: Duration,
}

/// What the batches of one sale on this gateway (its joins, its departures) send with: the
/// sale's keys and this gateway's.
struct Line {
    redis: RedisConn,
    keys: SaleKeys,
    instance_id: Arc<str>,
    lease: Duration,
}

/// The scripts the gateway declares (with `lua/lease.lua`, which both services run,
/// `floodgate_platform::scripts`).
pub const DECLARED: &[&Declaration] = &[
    <tickets::Join<'_> as LuaScript>::DECLARATION,
    <departures::Leave as LuaScript>::DECLARATION,
    <takeback::Resume<'_> as LuaScript>::DECLARATION,
    <takeback::StandingCall<'_> as LuaScript>::DECLARATION,
    <buyers::BuyerPlace<'_> as LuaScript>::DECLARATION,
    <leader::Bury as LuaScript>::DECLARATION,
    <leader::Sweep<'_> as LuaScript>::DECLARATION,
    <leader::Advance<'_> as LuaScript>::DECLARATION,
    <leader::Retire<'_> as LuaScript>::DECLARATION,
    <pilot::Pilot<'_> as LuaScript>::DECLARATION,
];

/// A script's reply as the tests of its parser write it.
#[cfg(test)]
pub(crate) fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}
