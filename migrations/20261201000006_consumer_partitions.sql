-- The consumer group, kept in PostgreSQL (consumer/src/membership.rs): which instance reads
-- which partition of the reservations topic, and how far each partition has been applied.
-- Offsets live here, written in the same transaction as the rows they produced, so an event is
-- applied once however members come and go, and a member that lost a partition cannot move it.

-- The live instances of each group: each renews its row every few seconds; a row older than the
-- session timeout is a dead member, removed by the next live one.
create table consumer_members (
    group_id text not null,
    member_id text not null,          -- '<instance id>/<run id>', new at every start
    seen_at timestamptz not null,
    primary key (group_id, member_id)
);

create table consumer_partitions (
    group_id text not null,
    topic text not null,
    kafka_partition integer not null,
    -- The next offset to apply; null until the first batch (read from the partition's start).
    next_offset bigint,
    owner text,                       -- the member reading it, null while free
    lease_until timestamptz,          -- the owner's claim lapses then unless renewed
    -- Bumped at every hand-over: a batch commits only with the epoch its member claimed, so a
    -- member that lost the partition (stalled past its lease, say) can never write for it.
    epoch bigint not null default 0,
    primary key (group_id, topic, kafka_partition),
    constraint consumer_partitions_lease check ((owner is null) = (lease_until is null))
);
