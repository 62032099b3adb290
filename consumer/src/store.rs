//! Applying one event to PostgreSQL. Every write is idempotent on a natural key, so a redelivered
//! event changes nothing, and the booking state machine only moves forward, so events that arrive
//! late or out of order change nothing either.
//!
//! ```text
//! (none) ──▶ PENDING_PAYMENT ──▶ CONFIRMED
//!    │              ├──────────▶ CANCELLED ─┐
//!    │              ├──────────▶ EXPIRED ───┼──▶ REFUNDED   (money that came too late, returned)
//!    │              └──────────▶ ABORTED ───┘
//!    └──▶ any of them directly (every event carries the whole reservation)
//! ```

use floodgate_contract::events::{Envelope, Event, SCHEMA_VERSION};
use sqlx::PgPool;
use time::OffsetDateTime;

#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The event can never be applied (undecodable, unknown version, violates a constraint).
    #[error("{0}")]
    Poison(String),
    /// The database is unreachable or failed transiently: retry the same event.
    #[error("database: {0}")]
    Db(#[from] sqlx::Error),
}

/// What applying an event did.
#[derive(Debug, PartialEq, Eq)]
pub enum Applied {
    /// The booking row was created or moved forward.
    Changed,
    /// Nothing to do: a redelivery, a late event, or one that does not move a booking.
    Unchanged,
}

fn timestamp(ms: i64) -> Result<OffsetDateTime, ApplyError> {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .map_err(|_| ApplyError::Poison(format!("timestamp {ms} out of range")))
}

/// The booking status an event moves a row to, if any.
pub fn status_after(event: &Event) -> Option<&'static str> {
    match event {
        Event::SeatReserved(_) => Some("PENDING_PAYMENT"),
        Event::ReservationAborted(_) => Some("ABORTED"),
        Event::PaymentConfirmed(_) => Some("CONFIRMED"),
        Event::PaymentFailed(_) => Some("CANCELLED"),
        Event::HoldExpired(_) => Some("EXPIRED"),
        Event::RefundSucceeded(_) => Some("REFUNDED"),
        // The refund is under way or needs a person; the booking's own state does not change.
        Event::RefundRequired(_) | Event::RefundFailed(_) => None,
    }
}

pub async fn apply(db: &PgPool, payload: &[u8]) -> Result<Applied, ApplyError> {
    let envelope = Envelope::from_json(payload)
        .map_err(|e| ApplyError::Poison(format!("undecodable event: {e}")))?;
    if envelope.v > SCHEMA_VERSION {
        return Err(ApplyError::Poison(format!(
            "event schema v{} is newer than this consumer",
            envelope.v
        )));
    }
    let Some(status) = status_after(&envelope.event) else {
        tracing::info!(event = %envelope.id, kind = envelope.event.kind(), "event recorded in the log only");
        return Ok(Applied::Unchanged);
    };
    let e = envelope.event.data();
    // Insert, or move forward: from PENDING_PAYMENT to anything else, and from a dead hold to
    // REFUNDED. Every other combination (a redelivery, a late SeatReserved after its abort, ...)
    // leaves the row as it is.
    let result = sqlx::query(
        "insert into bookings (reservation_id, sale_id, pool_id, token_id, ticket, seats,
           status, reserved_at, hold_expires_at, created_event_id, payment_id)
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
         on conflict (reservation_id) do update
           set status = excluded.status,
               payment_id = coalesce(excluded.payment_id, bookings.payment_id),
               updated_at = now()
         where (bookings.status = 'PENDING_PAYMENT' and excluded.status <> 'PENDING_PAYMENT')
            or (excluded.status = 'REFUNDED'
                and bookings.status in ('EXPIRED', 'CANCELLED', 'ABORTED'))",
    )
    .bind(&e.reservation_id)
    .bind(&envelope.sale)
    .bind(&envelope.pool)
    .bind(&e.token_id)
    .bind(e.ticket as i64)
    .bind(e.seats as i32)
    .bind(status)
    .bind(timestamp(e.reserved_at_ms)?)
    .bind(timestamp(e.hold_expires_at_ms)?)
    .bind(&envelope.id)
    .bind(
        status
            .eq("CONFIRMED")
            .then_some(e.payment_id.as_deref())
            .flatten(),
    )
    .execute(db)
    .await
    .map_err(|err| match &err {
        // A constraint violation will fail the same way on every retry.
        sqlx::Error::Database(d) if d.constraint().is_some() => ApplyError::Poison(format!(
            "event {} violates {}: {d}",
            envelope.id,
            d.constraint().unwrap_or("?")
        )),
        _ => ApplyError::Db(err),
    })?;
    Ok(if result.rows_affected() == 1 {
        Applied::Changed
    } else {
        Applied::Unchanged
    })
}
