//! The autopilot's notable rate changes, from the queue the sale's leader keeps in the sale's
//! slot (`lua/autopilot.lua`) into the audit trail: every couple of seconds, for every sale not
//! long ended, each queued change becomes one chained row (`action` `autopilot`, the actor the
//! leading gateway) and is then deleted from the queue. Several booking instances drain at once
//! without writing a change twice: a row is written only if none of the sale's rows carries the
//! change's id (`audit::chain::append_once`, under the chain's lock), and a change written but
//! not yet deleted (a crash between the two) is deleted on the next pass.

use std::time::Duration;

use floodgate_platform::autopilot::Audited;
use floodgate_platform::service::Every;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::audit::chain::{self, Entry, Phase};
use crate::AppState;

/// How often the queues are read: the trail is for people, a few seconds late is on time.
const EVERY: Duration = Duration::from_secs(2);
/// Most changes taken from one sale's queue in one pass (the leader queues one in several
/// seconds at most: a change must be a fifth of the rate to be queued).
const BATCH: usize = 100;

/// Drains every sale's queue until `shutdown`. A pass that fails is logged and the next one
/// tries again: the queue keeps what was not written (capped at a thousand changes).
pub async fn drain(state: AppState, shutdown: CancellationToken) {
    let mut every = Every::new(EVERY, shutdown);
    while every.tick().await {
        if let Err(e) = pass(&state).await {
            tracing::warn!(error = %e, "the autopilot's changes could not be audited now");
        }
    }
}

/// One pass over the sales still selling (or ended in the last hour: a queue written just
/// before the end is still drained). A sale whose queue cannot be read or written now is left
/// for the next pass; the others are drained meanwhile.
async fn pass(state: &AppState) -> anyhow::Result<()> {
    let sales: Vec<String> = sqlx::query_scalar(
        "select id from sales where purged_at is null
           and (ended_at is null or ended_at > now() - interval '1 hour')",
    )
    .fetch_all(&state.db)
    .await?;
    for sale in sales {
        if let Err(e) = drain_sale(state, &sale).await {
            tracing::warn!(error = %e, %sale, "the autopilot's changes could not be audited now");
        }
    }
    Ok(())
}

/// Writes one sale's queued changes into the trail, in order, and deletes them from the queue
/// once written. An entry this release cannot read stays queued (a newer release's booking
/// service writes it; the queue is capped) and is skipped.
async fn drain_sale(state: &AppState, sale: &str) -> anyhow::Result<()> {
    let queued = state.gatekeeper.autopilot_audit_queue(sale, BATCH).await?;
    let mut done = Vec::with_capacity(queued.len());
    for (entry, json) in queued {
        match serde_json::from_str::<Audited>(&json) {
            Ok(change) => {
                write(state, sale, &change).await?;
                done.push(entry);
            }
            Err(e) => {
                tracing::debug!(error = %e, sale, entry, "an autopilot change this release cannot read")
            }
        }
    }
    state.gatekeeper.autopilot_audit_done(sale, &done).await?;
    Ok(())
}

/// Writes one change as a chained row, unless it was written before (by its id: a stream's
/// entry ids are not kept across a failover, the change's own id is).
async fn write(state: &AppState, sale: &str, change: &Audited) -> anyhow::Result<()> {
    let actor = format!("autopilot (gateway {})", change.step.leader);
    let detail = json!({
        "change": change.id,
        "at_ms": change.step.at_ms,
        "decision": change.step.decision,
        "health": change.step.health,
    });
    let entry = Entry {
        sale,
        action: "autopilot",
        actor: &actor,
        phase: Phase::Done,
        intent: None,
        before: &json!({ "admission_rate": change.from }),
        after: &json!({ "admission_rate": change.to }),
        detail: &detail,
    };
    chain::append_once(&state.db, &state.audit_keys, entry, &change.id).await?;
    Ok(())
}
