//! Applying one event to PostgreSQL. Every write is idempotent on a natural key, so a redelivered
//! event changes nothing.

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
    /// A new row was written.
    Inserted,
    /// The event had already been applied (a redelivery).
    Duplicate,
}

fn timestamp(ms: i64) -> Result<OffsetDateTime, ApplyError> {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .map_err(|_| ApplyError::Poison(format!("timestamp {ms} out of range")))
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
    match &envelope.event {
        Event::SeatReserved(e) => {
            let result = sqlx::query(
                "insert into bookings (reservation_id, sale_id, pool_id, token_id, ticket, seats,
                   status, reserved_at, hold_expires_at, created_event_id)
                 values ($1, $2, $3, $4, $5, $6, 'PENDING_PAYMENT', $7, $8, $9)
                 on conflict (reservation_id) do nothing",
            )
            .bind(&e.reservation_id)
            .bind(&envelope.sale)
            .bind(&envelope.pool)
            .bind(&e.token_id)
            .bind(e.ticket as i64)
            .bind(e.seats as i32)
            .bind(timestamp(envelope.at_ms)?)
            .bind(timestamp(e.hold_expires_at_ms)?)
            .bind(&envelope.id)
            .execute(db)
            .await
            .map_err(|err| match &err {
                // A constraint violation will fail the same way on every retry.
                sqlx::Error::Database(d) if d.constraint().is_some() => {
                    ApplyError::Poison(format!(
                        "event {} violates {}: {d}",
                        envelope.id,
                        d.constraint().unwrap_or("?")
                    ))
                }
                _ => ApplyError::Db(err),
            })?;
            Ok(if result.rows_affected() == 1 {
                Applied::Inserted
            } else {
                Applied::Duplicate
            })
        }
        #[allow(unreachable_patterns)]
        other => Err(ApplyError::Poison(format!(
            "event type {} is not handled by this consumer",
            other.kind()
        ))),
    }
}
