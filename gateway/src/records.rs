//! Buyers' records written again after a failover.
//!
//! A signed-in buyer's record (`{b:<sale>/<buyer>}:rec`, lua/buyer_place.lua) names their
//! ticket, so their next connection takes that place back instead of a second one. Joins do not
//! wait for a replica (a `WAIT` on the rush's hottest path), so a failover can lose the record's
//! last write: the buyer's next tab would then take a new place at the back, and they would hold
//! two. Their ticket itself lives on in the sale's slot, and this gateway knows it: the session
//! still waiting on it. So each room lists its signed-in sessions ([`Waiting`]), and when the
//! primary serving a slot changes (contract/src/primaries.rs: a replica promoted, or a primary
//! restarted), every listed session whose buyer's record lives in that slot writes its ticket
//! into the record again (`restore`: only if the record names no ticket or an earlier one).
//!
//! What this does not cover, written in docs/runbook.md: a buyer who was not connected when the
//! record was lost (they come back with their resume token, whose ticket is then theirs again,
//! or through the door for a new place), and a buyer who opened another tab in the second or two
//! between the failover and the rewrite (that tab took a second place; the record keeps the
//! later one, and both stay in line).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use floodgate_contract::identity::BuyerId;
use floodgate_contract::primaries::{self, Layout};
use floodgate_contract::replicas::key_slot;
use futures::StreamExt;

use crate::scripts::buyers::{self, Restored};
use crate::session::Context;
use crate::AppState;

/// At most this many records are written at once by one gateway after a failover: the work
/// comes in a burst (every signed-in session whose record moved), and spreads over a second or
/// two rather than landing on the new primary at once.
const AT_ONCE: usize = 32;

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

    /// The sessions whose buyer's record lives in a slot that `before` and `after` serve from
    /// different primaries: `(ticket, buyer)` of each.
    fn moved(&self, ctx: &Context, before: &Layout, after: &Layout) -> Vec<(u64, BuyerId)> {
        let listed: Vec<(u64, Arc<str>)> = self.lock().values().cloned().collect();
        listed
            .into_iter()
            .map(|(ticket, buyer)| (ticket, BuyerId::new(&*buyer)))
            .filter(|(_, buyer)| {
                let slot = key_slot(ctx.root_keys.buyer(&ctx.sale, buyer).as_bytes());
                before.moved(after, slot)
            })
            .collect()
    }
}

/// Watches the slots' primaries until shutdown and, at each change, writes again the records of
/// the sessions whose record moved.
pub fn keep_across_failovers(state: &AppState) {
    let (mut layouts, watch) = primaries::watch(state.redis.clone(), state.shutdown.clone());
    tokio::spawn(watch);
    let state = state.clone();
    tokio::spawn(async move {
        let mut seen = layouts.borrow_and_update().clone();
        while layouts.changed().await.is_ok() {
            let Some(after) = layouts.borrow_and_update().clone() else {
                continue;
            };
            // The first layout read is where the gateway starts from: it has no session yet
            // whose record could have been lost before it.
            if let Some(before) = seen.replace(after.clone()) {
                restore_moved(&state, &before, &after).await;
            }
        }
    });
}

async fn restore_moved(state: &AppState, before: &Layout, after: &Layout) {
    let rooms: Vec<Arc<Context>> = state.rooms.iter().map(|r| r.value().clone()).collect();
    let work: Vec<(Arc<Context>, u64, BuyerId)> = rooms
        .iter()
        .flat_map(|ctx| {
            ctx.waiting
                .moved(ctx, before, after)
                .into_iter()
                .map(|(ticket, buyer)| (ctx.clone(), ticket, buyer))
        })
        .collect();
    if work.is_empty() {
        return;
    }
    let total = work.len();
    let restored = futures::stream::iter(work)
        .map(|(ctx, ticket, buyer)| async move {
            let outcome = buyers::restore(&ctx, &buyer, ticket).await;
            let label = match &outcome {
                Ok(Restored::Written) => "written",
                Ok(Restored::Kept) => "kept",
                Err(_) => "failed",
            };
            metrics::counter!("floodgate_buyer_records_restored_total", "outcome" => label)
                .increment(1);
            if let Err(e) = &outcome {
                tracing::warn!(sale = %ctx.sale, ticket, error = %e, "writing a buyer's record again");
            }
            matches!(outcome, Ok(Restored::Written))
        })
        .buffer_unordered(AT_ONCE)
        .filter(|written| std::future::ready(*written))
        .count()
        .await;
    tracing::info!(
        sessions = total,
        restored,
        "a Redis primary changed: buyers' records written again from their sessions"
    );
}
