//! One sale on this gateway: what its sessions share ([`Context`], made once per room) and the
//! list of its signed-in sessions ([`Waiting`]), which `records` walks after a failover.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use floodgate_protocol::resume::ResumeKey;
use floodgate_protocol::token::TokenSigner;

use crate::room::Room;
use crate::scripts::SaleScope;

/// What every session of one sale on this gateway shares: made once per room, so a session
/// itself carries only what is its own (every idle client pays for each byte of a session).
pub struct Context {
    /// The sale's scripts on this gateway: keys, connection, batched joins and departures.
    pub scope: SaleScope,
    pub room: Arc<Room>,
    pub signer: Arc<TokenSigner>,
    pub resume: Arc<ResumeKey>,
    /// Seals the resume tokens and passes handed out, for the edge (platform::clients::seal).
    pub seal: floodgate_platform::clients::EdgeSeal,
    pub grace: Duration,
    /// Cancelled when the room retires (it has had no session for its idle time).
    pub retire: tokio_util::sync::CancellationToken,
    /// How long a client may stay silent (it is pinged on the room's heartbeat), how long a
    /// send may take.
    pub idle_timeout: Duration,
    pub send_timeout: Duration,
    /// The signed-in sessions, whose buyers' records are written again after a failover.
    pub waiting: Waiting,
}

impl Context {
    /// The id of session `n` of this gateway: `<gateway instance>/<n>`, recorded as a resumed
    /// ticket's holder (resume.lua) and checked when it leaves (leave.lua).
    pub fn session_id(&self, n: u64) -> String {
        format!("{}/{n}", self.scope.instance_id)
    }
}

/// The signed-in sessions of one room, by session number: their ticket and buyer.
#[derive(Default)]
pub struct Waiting {
    sessions: Mutex<HashMap<u64, (u64, Arc<str>)>>,
}

impl Waiting {
    pub fn add(&self, number: u64, ticket: u64, buyer: Arc<str>) {
        self.lock().insert(number, (ticket, buyer));
    }

    pub fn remove(&self, number: u64) {
        self.lock().remove(&number);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, (u64, Arc<str>)>> {
        // A panic while holding the map leaves it whole (inserts and removes only).
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Every listed session's `(ticket, buyer)`, as of now.
    pub fn listed(&self) -> Vec<(u64, Arc<str>)> {
        self.lock().values().cloned().collect()
    }
}
