-- Each pool's event sequence as Kafka delivered it (contract/src/events.rs, `seq`), to tell a pool
-- whose Redis lost writes in a failover: its own counter is then behind the highest number here,
-- or it hands out a number again that an earlier event already had (docs/runbook.md, "A pool lost
-- writes"). The booking service compares, refuses such a pool, and `sale reconcile --repair`
-- rebuilds it from what PostgreSQL knows.
alter table booking_events add column seq bigint;

create index booking_events_seq_idx on booking_events (sale_id, pool_id, seq) where seq is not null;

create table pool_sequences (
    sale_id text not null,
    pool_id text not null,
    seq bigint not null,               -- the highest sequence number applied
    diverged_at timestamptz,           -- when a number first came with two different events
    primary key (sale_id, pool_id)
);
