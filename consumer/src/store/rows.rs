//! The column arrays one round of a batch writes with a statement each (`UNNEST`): the
//! booking rows ([`Rows`]) and their audit trail ([`Log`]).

use floodgate_protocol::reservation::ReservationState;
use time::OffsetDateTime;

use super::{timestamp, Decoded};

/// Decoding checked every timestamp, so this cannot fail here.
fn ms(ms: i64) -> OffsetDateTime {
    timestamp(ms).unwrap_or(OffsetDateTime::UNIX_EPOCH)
}

/// Column arrays of the booking rows a round writes.
#[derive(Default)]
pub(super) struct Rows {
    reservation_id: Vec<String>,
    sale_id: Vec<String>,
    pool_id: Vec<String>,
    token_id: Vec<String>,
    ticket: Vec<i64>,
    seats: Vec<i32>,
    status: Vec<&'static str>,
    reserved_at: Vec<OffsetDateTime>,
    hold_expires_at: Vec<OffsetDateTime>,
    created_event_id: Vec<String>,
    payment_id: Vec<Option<String>>,
    buyer: Vec<Option<String>>,
}

impl Rows {
    pub(super) fn push(&mut self, event: &Decoded, after: ReservationState) {
        let (envelope, data) = (&event.envelope, event.envelope.event.data());
        self.reservation_id.push(data.reservation_id.clone());
        self.sale_id.push(envelope.sale.clone());
        self.pool_id.push(envelope.pool.clone());
        self.token_id.push(data.token_id.clone());
        self.ticket.push(data.ticket as i64);
        self.seats.push(data.seats as i32);
        self.status.push(after.db());
        self.reserved_at.push(ms(data.reserved_at_ms));
        self.hold_expires_at.push(ms(data.hold_expires_at_ms));
        self.created_event_id.push(envelope.id.clone());
        let paid = after == ReservationState::Confirmed;
        self.payment_id
            .push(data.payment_id.clone().filter(|_| paid));
        self.buyer.push(data.buyer.clone());
    }

    /// Inserts or moves every row in one statement: rows written.
    pub(super) async fn write(self, tx: &mut sqlx::PgConnection) -> Result<u64, sqlx::Error> {
        if self.reservation_id.is_empty() {
            return Ok(0);
        }
        Ok(sqlx::query(
            "insert into bookings (reservation_id, sale_id, pool_id, token_id, ticket, seats,
               status, reserved_at, hold_expires_at, created_event_id, payment_id, buyer)
             select * from unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int8[],
               $6::int4[], $7::text[], $8::timestamptz[], $9::timestamptz[], $10::text[],
               $11::text[], $12::text[])
             on conflict (reservation_id) do update
               set status = excluded.status,
                   payment_id = coalesce(excluded.payment_id, bookings.payment_id),
                   buyer = coalesce(bookings.buyer, excluded.buyer),
                   updated_at = now()",
        )
        .bind(&self.reservation_id)
        .bind(&self.sale_id)
        .bind(&self.pool_id)
        .bind(&self.token_id)
        .bind(&self.ticket)
        .bind(&self.seats)
        .bind(&self.status)
        .bind(&self.reserved_at)
        .bind(&self.hold_expires_at)
        .bind(&self.created_event_id)
        .bind(&self.payment_id)
        .bind(&self.buyer)
        .execute(&mut *tx)
        .await?
        .rows_affected())
    }
}

/// Column arrays of the audit-trail entries a round writes.
#[derive(Default)]
pub(super) struct Log {
    event_id: Vec<String>,
    reservation_id: Vec<String>,
    sale_id: Vec<String>,
    pool_id: Vec<String>,
    event_type: Vec<&'static str>,
    occurred_at: Vec<OffsetDateTime>,
    status_before: Vec<Option<&'static str>>,
    status_after: Vec<Option<&'static str>>,
    changed: Vec<bool>,
    payment_id: Vec<Option<String>>,
    partition: Vec<i32>,
    offset: Vec<i64>,
    seq: Vec<Option<i64>>,
}

impl Log {
    pub(super) fn push(
        &mut self,
        event: &Decoded,
        before: Option<ReservationState>,
        after: Option<ReservationState>,
    ) {
        let (envelope, data) = (&event.envelope, event.envelope.event.data());
        self.event_id.push(envelope.id.clone());
        self.reservation_id.push(data.reservation_id.clone());
        self.sale_id.push(envelope.sale.clone());
        self.pool_id.push(envelope.pool.clone());
        self.event_type.push(envelope.event.kind());
        self.occurred_at.push(ms(envelope.at_ms));
        self.status_before.push(before.map(ReservationState::db));
        self.status_after
            .push(after.or(before).map(ReservationState::db));
        self.changed.push(after.is_some());
        self.payment_id.push(data.payment_id.clone());
        self.partition.push(event.partition);
        self.offset.push(event.offset);
        self.seq.push(envelope.seq);
    }

    /// Records every event in the audit trail in one statement (once: keyed on the event id):
    /// entries recorded.
    pub(super) async fn write(self, tx: &mut sqlx::PgConnection) -> Result<u64, sqlx::Error> {
        Ok(sqlx::query(
            "insert into booking_events (event_id, reservation_id, sale_id, pool_id, event_type,
               occurred_at, status_before, status_after, changed, payment_id, kafka_partition,
               kafka_offset, seq)
             select * from unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[],
               $6::timestamptz[], $7::text[], $8::text[], $9::bool[], $10::text[], $11::int4[],
               $12::int8[], $13::int8[])
             on conflict (event_id) do nothing",
        )
        .bind(&self.event_id)
        .bind(&self.reservation_id)
        .bind(&self.sale_id)
        .bind(&self.pool_id)
        .bind(&self.event_type)
        .bind(&self.occurred_at)
        .bind(&self.status_before)
        .bind(&self.status_after)
        .bind(&self.changed)
        .bind(&self.payment_id)
        .bind(&self.partition)
        .bind(&self.offset)
        .bind(&self.seq)
        .execute(&mut *tx)
        .await?
        .rows_affected())
    }
}
