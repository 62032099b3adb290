//! Buyers' records written again after a failover.
//!
//! A signed-in buyer's record (`{b:<sale>/<buyer>}:rec`, lua/buyer_place.lua) names their
//! ticket, so their next connection takes that place back instead of a second one. Joins do not
//! wait for a replica (a `WAIT` on the rush's hottest path), so a failover can lose the record's
//! last write: the buyer's next tab would then take a new place at the back, and they would hold
//! two. Their ticket itself lives on in the sale's slot, and this gateway knows it: the session
//! still waiting on it. So each room lists its signed-in sessions (`sale::Waiting`), and when the
//! primary serving a slot changes (platform/src/primaries.rs: a replica promoted, or a primary
//! restarted), every listed session whose buyer's record lives in that slot writes its ticket
//! into the record again (`restore`: only if the record names no ticket or an earlier one).
//!
//! What this does not cover, written in docs/runbook.md: a buyer who was not connected when the
//! record was lost (they come back with their resume token, whose ticket is then theirs again,
//! or through the door for a new place), a buyer who opened another tab in the seconds between
//! the failover and the rewrite (that tab took a second place; the record keeps the later one,
//! and both stay in line), and any change of primary while the layout cannot be read
//! (`floodgate_redis_primaries_known` is 0 then).

use std::sync::Arc;
use std::time::Duration;

use floodgate_platform::primaries::{self, Layout, WATCH_INTERVAL};
use floodgate_platform::replicas::key_slot;
use floodgate_protocol::identity::BuyerId;

use crate::sale::Context;
use crate::scripts::buyers::{self, Restored};
use crate::AppState;

/// How fast one gateway writes records again after a change of primary: the work comes in a
/// burst (every signed-in session whose record moved, most of them answered `kept`), so it is
/// paced, [`PER_STEP`] records every [`STEP`] (500 a second), rather than landing on the newly
/// promoted primary at once. A gateway holding 15,000 buyers on a three-primary cluster has
/// some 5,000 to write after one failover: ten seconds.
const PER_STEP: usize = 50;
const STEP: Duration = Duration::from_millis(100);
/// How many times a record that could not be written is tried again, a [`WATCH_INTERVAL`]
/// apart: a promoted primary that is still settling answers errors for a few seconds.
const ATTEMPTS: usize = 30;

/// The sessions of `ctx`'s room whose buyer's record lives in a slot that `before` and `after`
/// serve from different primaries: `(ticket, buyer)` of each.
fn moved(ctx: &Context, before: &Layout, after: &Layout) -> Vec<(u64, BuyerId)> {
    let scope = &ctx.scope;
    ctx.waiting
        .listed()
        .into_iter()
        .map(|(ticket, buyer)| (ticket, BuyerId::new(&*buyer)))
        .filter(|(_, buyer)| {
            let slot = key_slot(scope.root_keys.buyer(&scope.sale, buyer).as_bytes());
            before.moved(after, slot)
        })
        .collect()
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
    let mut work: Vec<(Arc<Context>, u64, BuyerId)> = rooms
        .iter()
        .flat_map(|ctx| {
            moved(ctx, before, after)
                .into_iter()
                .map(|(ticket, buyer)| (ctx.clone(), ticket, buyer))
        })
        .collect();
    let (sessions, mut written) = (work.len(), 0);
    for attempt in 1..=ATTEMPTS {
        if work.is_empty() {
            break;
        }
        if attempt > 1 {
            tokio::time::sleep(WATCH_INTERVAL).await;
        }
        let mut failed = Vec::new();
        for step in work.chunks(PER_STEP) {
            let pace = tokio::time::sleep(STEP);
            let outcomes = step.iter().map(|(ctx, ticket, buyer)| async move {
                (
                    buyers::restore(&ctx.scope, buyer, *ticket).await,
                    ctx,
                    *ticket,
                    buyer,
                )
            });
            for (outcome, ctx, ticket, buyer) in futures::future::join_all(outcomes).await {
                let label = match &outcome {
                    Ok(Restored::Written) => "written",
                    Ok(Restored::Kept) => "kept",
                    Err(_) => "failed",
                };
                metrics::counter!("floodgate_buyer_records_restored_total", "outcome" => label)
                    .increment(1);
                match outcome {
                    Ok(Restored::Written) => written += 1,
                    Ok(Restored::Kept) => {}
                    Err(_) if attempt < ATTEMPTS => {
                        failed.push((ctx.clone(), ticket, buyer.clone()));
                    }
                    Err(e) => {
                        tracing::warn!(sale = %ctx.scope.sale, ticket, error = %e, "a buyer's record could not be written again");
                    }
                }
            }
            pace.await;
        }
        work = failed;
    }
    if sessions > 0 {
        tracing::info!(
            sessions,
            written,
            "a Redis primary changed: buyers' records written again from their sessions"
        );
    }
}
