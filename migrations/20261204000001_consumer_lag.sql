-- The consumer group's lag (events written to the topic and not yet applied here), as the
-- consumers measure it every second (issue 33). The booking services read it into each sale's
-- health summary, which the sale's admission autopilot judges: PostgreSQL falling behind the
-- decisions is a reason to admit fewer people. One row per group; a row whose measured_at is old
-- means no consumer of that group is measuring (the autopilot then holds the rate).
create table if not exists consumer_lag (
    consumer_group text primary key,
    lag bigint not null check (lag >= 0),
    measured_at timestamptz not null
);
