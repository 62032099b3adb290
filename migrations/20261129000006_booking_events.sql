-- The audit trail: every event the consumer applied, with the booking's status before and after
-- it. A support agent reads one reservation's history with
--   select * from booking_events where reservation_id = '…' order by occurred_at, kafka_offset;
-- Events that changed nothing (a redelivery of an already applied one never gets here: the
-- event id is the key) are kept too, marked changed = false: a late payment on an expired hold,
-- a refund the provider could not make.
create table booking_events (
    event_id text primary key,
    reservation_id text not null,
    sale_id text not null,
    pool_id text not null,
    event_type text not null,                -- the cause: SeatReserved, PaymentConfirmed, ...
    occurred_at timestamptz not null,        -- when Redis decided it (the event's at_ms)
    status_before text,                      -- null: the event created the booking
    status_after text,
    changed boolean not null,
    payment_id text,
    kafka_partition integer not null,
    kafka_offset bigint not null,
    recorded_at timestamptz not null default now()
);

create index booking_events_reservation_idx on booking_events (reservation_id, occurred_at);
