//! Applying events to PostgreSQL, a batch at a time. Every write is idempotent on a natural key
//! (the reservation id for a booking, the event id for its audit trail), so a redelivered event
//! changes nothing, and the booking state machine only moves forward, so events that arrive late
//! or out of order change nothing either.
//!
//! ```text
//! (none) ──▶ PENDING_PAYMENT ──▶ CONFIRMED
//!    │              ├──────────▶ CANCELLED ─┐
//!    │              ├──────────▶ EXPIRED ───┼──▶ REFUNDED   (money that came too late, returned)
//!    │              └──────────▶ ABORTED ───┘
//!    └──▶ any of them directly (every event carries the whole reservation)
//! ```
//!
//! A refund while a booking is PENDING_PAYMENT or CONFIRMED returns a payment that was not the
//! one that bought it (another payment, a wrong amount) and leaves the booking as it is.
//!
//! A batch is one transaction: the rows it locks are read, each event's transition is decided
//! here ([`transition`], a pure function), and the changes and the audit trail are written with
//! one multi-row statement each (`UNNEST`). Several events of one reservation in one batch are
//! applied in rounds, in their order, so each statement touches a row at most once.

use std::collections::HashMap;

use floodgate_protocol::events::{Envelope, Event, SCHEMA_VERSION};
use floodgate_protocol::reservation::ReservationState;
use sqlx::PgPool;
use time::OffsetDateTime;

#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The event can never be applied (undecodable, unknown version, violates a constraint).
    #[error("{0}")]
    Poison(String),
    /// The database is unreachable or failed transiently: retry the same events.
    #[error("database: {0}")]
    Db(#[from] sqlx::Error),
    /// This member no longer holds the partition (another took it over): nothing was written.
    #[error("partition {0} is no longer this member's")]
    Fenced(i32),
}

/// Where a batch moves its partitions' stored offsets, in its own transaction, and the fence
/// that says this member still holds them.
pub struct Advance<'a> {
    pub fence: &'a crate::membership::Fence,
    /// Per partition, the offset after the batch's last message.
    pub next: &'a HashMap<i32, i64>,
}

/// The booking status an event moves a row to, if any.
pub fn status_after(event: &Event) -> Option<ReservationState> {
    match event {
        Event::SeatReserved(_) => Some(ReservationState::Held),
        Event::ReservationAborted(_) => Some(ReservationState::Aborted),
        Event::PaymentConfirmed(_) => Some(ReservationState::Confirmed),
        Event::PaymentFailed(_) => Some(ReservationState::Cancelled),
        Event::HoldExpired(_) => Some(ReservationState::Expired),
        Event::RefundSucceeded(_) => Some(ReservationState::Refunded),
        // The refund is under way or needs a person; the booking's own state does not change.
        Event::RefundRequired(_) | Event::RefundFailed(_) => None,
    }
}

/// The state machine: the status a booking in `current` (none: no row yet) moves to on an event
/// aiming at `target`, or `None` if it stays. Forward only: from PENDING_PAYMENT to any final
/// state, from a dead hold to REFUNDED; never backwards, never sideways.
pub fn transition(
    current: Option<ReservationState>,
    target: ReservationState,
) -> Option<ReservationState> {
    use ReservationState::*;
    match (current, target) {
        (None, target) => Some(target),
        (Some(Held), Held) => None,
        // A refund while the hold is live returns money that was not this booking's (another
        // payment, a wrong amount): the hold goes on.
        (Some(Held), Refunded) => None,
        (Some(Held), target) => Some(target),
        (Some(Expired | Cancelled | Aborted), Refunded) => Some(Refunded),
        _ => None,
    }
}

/// One decoded event and where it came from.
#[derive(Clone, Debug)]
pub struct Decoded {
    pub envelope: Envelope,
    pub partition: i32,
    pub offset: i64,
}

/// Decodes one message's payload, or says why it can never be applied.
pub fn decode(payload: &[u8], partition: i32, offset: i64) -> Result<Decoded, ApplyError> {
    let envelope = Envelope::from_json(payload)
        .map_err(|e| ApplyError::Poison(format!("undecodable event: {e}")))?;
    if envelope.v > SCHEMA_VERSION {
        return Err(ApplyError::Poison(format!(
            "event schema v{} is newer than this consumer",
            envelope.v
        )));
    }
    let data = envelope.event.data();
    timestamp(envelope.at_ms)?;
    timestamp(data.reserved_at_ms)?;
    timestamp(data.hold_expires_at_ms)?;
    if data.seats == 0 || i32::try_from(data.seats).is_err() || i64::try_from(data.ticket).is_err()
    {
        return Err(ApplyError::Poison(format!(
            "event {} has an impossible seat count or ticket",
            envelope.id
        )));
    }
    Ok(Decoded {
        envelope,
        partition,
        offset,
    })
}

fn timestamp(ms: i64) -> Result<OffsetDateTime, ApplyError> {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .map_err(|_| ApplyError::Poison(format!("timestamp {ms} out of range")))
}

/// What a batch did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct BatchOutcome {
    /// Booking rows created or moved forward.
    pub rows_written: u64,
    /// Events recorded in the audit trail (redeliveries of recorded events are not counted).
    pub events_recorded: u64,
}

// The two statements of a batch that look rows up are written as one index probe per key,
// whatever the planner believes of the tables' sizes. Written as `where reservation_id =
// any($1)` and as a join, their cached plans, made while the tables were nearly empty (a
// sale's first minutes, before autovacuum's first analyze), scanned every row for every batch:
// 20 ms a batch at 6,000 bookings and growing, which is why a batch of 100 events took longer
// than one of 500 (BENCHMARKS.md, "The consumer's small batches"). A locking subquery, and one
// with a limit, is never flattened into a join, so each stays a per-key lookup.

/// Locks the rows of the batch's reservations that exist, with their status (`$1`: the ids).
pub const LOCK_BOOKINGS: &str =
    "select b.reservation_id, b.status from unnest($1::text[]) as k(id),
   lateral (select reservation_id, status from bookings where reservation_id = k.id for update) b";

/// Marks the pools of which another event already holds a sequence number of the batch (`$1`..
/// `$4`: sale, pool, sequence and event id of each event) as diverged.
pub const MARK_DIVERGED: &str =
    "update pool_sequences ps set diverged_at = coalesce(ps.diverged_at, now())
   from (select distinct n.s, n.p
         from unnest($1::text[], $2::text[], $3::int8[], $4::text[]) as n(s, p, q, id),
           lateral (select 1 from booking_events e
                    where e.sale_id = n.s and e.pool_id = n.p and e.seq = n.q
                      and e.event_id <> n.id limit 1) other) d
   where ps.sale_id = d.s and ps.pool_id = d.p";

/// Applies `events` in one transaction, in their order per reservation, and in the same
/// transaction moves the stored offsets as `advance` says (unless this member lost one of the
/// partitions: then nothing is written).
pub async fn apply_batch(
    db: &PgPool,
    events: &[Decoded],
    advance: Option<&Advance<'_>>,
) -> Result<BatchOutcome, ApplyError> {
    // Each reservation's events, in arrival order; round r applies the r-th of each.
    let mut queues: HashMap<&str, Vec<&Decoded>> = HashMap::new();
    for event in events {
        queues
            .entry(event.envelope.event.data().reservation_id.as_str())
            .or_default()
            .push(event);
    }
    let rounds = queues.values().map(Vec::len).max().unwrap_or(0);
    let mut outcome = BatchOutcome::default();
    let mut tx = db.begin().await?;
    for round in 0..rounds {
        let batch: Vec<&Decoded> = queues
            .values()
            .filter_map(|q| q.get(round).copied())
            .collect();
        let (rows, recorded) = apply_round(&mut tx, &batch).await.map_err(classify)?;
        outcome.rows_written += rows;
        outcome.events_recorded += recorded;
    }
    record_sequences(&mut tx, events).await.map_err(classify)?;
    if let Some(advance) = advance {
        for (&partition, &next) in advance.next {
            if !crate::membership::advance(&mut tx, advance.fence, partition, next).await? {
                return Err(ApplyError::Fenced(partition));
            }
        }
    }
    tx.commit().await?;
    Ok(outcome)
}

/// Moves the stored offsets as `advance` says, alone (after a batch applied one event at a time
/// to set its poison aside): `Fenced` if this member lost one of the partitions.
pub async fn advance_offsets(db: &PgPool, advance: &Advance<'_>) -> Result<(), ApplyError> {
    let mut tx = db.begin().await?;
    for (&partition, &next) in advance.next {
        if !crate::membership::advance(&mut tx, advance.fence, partition, next).await? {
            return Err(ApplyError::Fenced(partition));
        }
    }
    tx.commit().await?;
    Ok(())
}

/// A constraint violation fails the same way on every retry: poison. Anything else is the
/// database's trouble: retry.
fn classify(err: sqlx::Error) -> ApplyError {
    match &err {
        sqlx::Error::Database(d) if d.constraint().is_some() => {
            ApplyError::Poison(format!("violates {}: {d}", d.constraint().unwrap_or("?")))
        }
        _ => ApplyError::Db(err),
    }
}

/// One round: every reservation appears at most once.
async fn apply_round(
    tx: &mut sqlx::PgConnection,
    events: &[&Decoded],
) -> Result<(u64, u64), sqlx::Error> {
    let ids: Vec<&str> = events
        .iter()
        .map(|e| e.envelope.event.data().reservation_id.as_str())
        .collect();
    // Locked for the transaction: another consumer (during a rebalance) waits, then sees ours.
    let current: HashMap<String, String> = sqlx::query_as::<_, (String, String)>(LOCK_BOOKINGS)
        .bind(&ids)
        .fetch_all(&mut *tx)
        .await?
        .into_iter()
        .collect();

    let mut rows = Rows::default();
    let mut log = Log::default();
    for event in events {
        let data = event.envelope.event.data();
        let before = current
            .get(&data.reservation_id)
            .and_then(|s| ReservationState::from_db(s));
        let after =
            status_after(&event.envelope.event).and_then(|target| transition(before, target));
        if let Some(after) = after {
            rows.push(event, after);
        }
        log.push(event, before, after);
    }
    let written = rows.write(tx).await?;
    let recorded = log.write(tx).await?;
    Ok((written, recorded))
}

/// Keeps each pool's highest event sequence number, and marks a pool whose Redis handed out a
/// number twice (to two different events): it lost the writes that first had that number. The
/// booking service refuses such a pool until it is reconciled (booking/src/worker.rs).
async fn record_sequences(
    tx: &mut sqlx::PgConnection,
    events: &[Decoded],
) -> Result<(), sqlx::Error> {
    let (mut sale, mut pool, mut seq, mut id) = (vec![], vec![], vec![], vec![]);
    for event in events {
        if let Some(n) = event.envelope.seq {
            sale.push(event.envelope.sale.as_str());
            pool.push(event.envelope.pool.as_str());
            seq.push(n);
            id.push(event.envelope.id.as_str());
        }
    }
    if seq.is_empty() {
        return Ok(());
    }
    sqlx::query(
        "insert into pool_sequences (sale_id, pool_id, seq)
         select s, p, max(q) from unnest($1::text[], $2::text[], $3::int8[]) as t(s, p, q)
         group by s, p
         on conflict (sale_id, pool_id) do update
           set seq = greatest(pool_sequences.seq, excluded.seq)",
    )
    .bind(&sale)
    .bind(&pool)
    .bind(&seq)
    .execute(&mut *tx)
    .await?;
    sqlx::query(MARK_DIVERGED)
        .bind(&sale)
        .bind(&pool)
        .bind(&seq)
        .bind(&id)
        .execute(&mut *tx)
        .await?;
    Ok(())
}

mod rows;

use rows::{Log, Rows};

#[cfg(test)]
mod tests {
    use super::ReservationState::*;
    use super::*;

    const ALL: [ReservationState; 6] = ReservationState::ALL;

    #[test]
    fn bookings_only_move_forward() {
        for target in ALL {
            assert_eq!(
                transition(None, target),
                Some(target),
                "any event may come first"
            );
        }
        for target in [Confirmed, Cancelled, Expired, Aborted] {
            assert_eq!(transition(Some(Held), target), Some(target));
        }
        assert_eq!(transition(Some(Held), Held), None);
        assert_eq!(
            transition(Some(Held), Refunded),
            None,
            "a stray payment refunded on a live hold leaves the hold be"
        );
        for dead in [Expired, Cancelled, Aborted] {
            assert_eq!(transition(Some(dead), Refunded), Some(Refunded));
        }
        // Nothing else moves: no way back, no way sideways, nothing out of a final state.
        for current in [Confirmed, Cancelled, Expired, Aborted, Refunded] {
            for target in ALL {
                let allowed =
                    target == Refunded && matches!(current, Expired | Cancelled | Aborted);
                assert_eq!(
                    transition(Some(current), target).is_some(),
                    allowed,
                    "{current:?} -> {target:?}"
                );
            }
        }
    }

    #[test]
    fn impossible_events_are_poison() {
        assert!(matches!(decode(b"{", 0, 0), Err(ApplyError::Poison(_))));
        assert!(matches!(
            decode(b"{\"v\":99}", 0, 0),
            Err(ApplyError::Poison(_))
        ));
    }
}
