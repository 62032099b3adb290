//! A place in line whose session ended (`lua/leave.lua`): its ticket starts its grace, or is
//! skipped at once, or its business is done. Departures come in rushes too (a drain, a network
//! dropping a crowd), so they are sent in batches like the joins ([`super::tickets::Lines`]).

use std::sync::Arc;

use floodgate_platform::batch::Flush;
use floodgate_platform::script::{LuaScript as _, ScriptError};
use futures::future::{BoxFuture, FutureExt};

use super::{Line, SaleScope};

floodgate_platform::lua_script! {
    /// `lua/leave.lua`: the sessions of a batch ended; each ticket keeps its place for its
    /// grace, or is skipped at once.
    pub(super) struct Leave {
        file: "leave.lua",
        helpers: Sale,
        reply: i64,
        keys {
            gone: "gone (sorted set)",
            holders: "holders (hash)",
            sessions: "the gateway's session set",
            away: "away (sorted set)",
        }
        args {}
        rest {
            departures: Vec<(u64, String, i64, u64)> =
                "four per departure: ticket, the session's id, grace (ms) or -1, its place in line"
        }
    }
}

impl Line {
    pub(super) async fn leave(&self, departures: &[Departure]) -> Result<i64, ScriptError> {
        let keys = &self.keys;
        Leave {
            gone: keys.gone(),
            holders: keys.holders(),
            sessions: keys.gateway_sessions(&self.instance_id),
            away: keys.away(),
            departures: departures
                .iter()
                .map(|d| (d.ticket, d.session_id.clone(), d.grace_ms, d.place))
                .collect(),
        }
        .run(&mut self.redis.clone())
        .await
    }
}

/// A session that ended, as `leave.lua` takes it.
pub(super) struct Departure {
    pub(super) ticket: u64,
    pub(super) session_id: String,
    pub(super) grace_ms: i64,
    /// Its place in line (0: not known, before the draw), for a ticket whose grace starts.
    pub(super) place: u64,
}

pub(super) struct Leaves(pub(super) Arc<Line>);

impl Flush for Leaves {
    type Key = ();
    type Item = Departure;
    /// Redis' error, as text (the departures are only logged when they fail).
    type Answer = Result<(), String>;

    fn flush(&self, _: &(), departures: Vec<Departure>) -> BoxFuture<'static, Self::Answer> {
        let line = self.0.clone();
        async move {
            line.leave(&departures)
                .await
                .map(drop)
                .map_err(|e| e.to_string())
        }
        .boxed()
    }
}

/// Records that the session `session_id` holding `ticket` ended. With `grace_ms >= 0` the ticket
/// keeps its place that long (0: it is skipped as soon as the controller sees it); with -1 its
/// business is done (admitted, or the sale is over for it).
pub async fn leave(scope: &SaleScope, ticket: u64, session_id: &str, grace_ms: i64) {
    leave_from(scope, (ticket, 0), session_id, grace_ms).await;
}

/// [`leave`], for a `ticket` at a known `place` in line: should its turn come while it is in
/// its grace, it is let in without holding stock until its person comes back (`advance.lua`).
pub async fn leave_from(scope: &SaleScope, at: (u64, u64), session_id: &str, grace_ms: i64) {
    let ((ticket, place), session_id) = (at, session_id.to_owned());
    let departure = Departure {
        ticket,
        session_id,
        grace_ms,
        place,
    };
    let left = match scope.lines.leaves.submit((), departure).await {
        Ok((_, left)) => left,
        Err(e) => Err(e.to_string()),
    };
    if let Err(error) = left {
        // The ticket stays registered to this gateway; it is handled if this gateway dies.
        tracing::warn!(%error, ticket, "could not record the departure");
    }
}
