-- Bookings: the durable record of every reservation decision, written by the consumer from the
-- reservations topic. This table, not Redis, is what survives a restart, an audit or a dispute.

create table bookings (
    -- The natural idempotency key: a redelivered SeatReserved hits the same row.
    reservation_id text primary key,
    sale_id text not null,
    pool_id text not null,
    -- One reservation per admission token, enforced here as well as in Redis.
    token_id text not null,
    ticket bigint not null,                 -- the waiting-room ticket that was admitted
    seats integer not null,
    status text not null,
    reserved_at timestamptz not null,       -- when Redis granted the hold (Redis clock)
    hold_expires_at timestamptz not null,
    created_event_id text not null,         -- the SeatReserved event that created the row
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now(),
    constraint bookings_token_unique unique (token_id),
    constraint bookings_seats_positive check (seats > 0),
    -- Every state the lifecycle can reach; the consumer only ever moves a row forward.
    constraint bookings_status_known check (
        status in ('PENDING_PAYMENT', 'CONFIRMED', 'CANCELLED', 'EXPIRED', 'ABORTED', 'REFUNDED')
    )
);

-- Per-pool counts by status: reconciliation against Redis and the "confirmed <= capacity" check.
create index bookings_pool_status_idx on bookings (sale_id, pool_id, status);
