//! The consumer's batch lookups stay index probes as its tables grow (the plans PostgreSQL caches).

/// The plan the consumer's statement gets once it is cached, as PostgreSQL shows it: prepared
/// and run once while the tables are empty (a sale's first batch), then explained after they
/// have grown, before any analyze.
async fn cached_plan(
    conn: &mut sqlx::PgConnection,
    name: &str,
    statement: &str,
    args: &str,
    grow: &str,
) -> String {
    use sqlx::Executor as _;
    // The generic plan is what a statement settles on after its first executions.
    conn.execute("set plan_cache_mode = force_generic_plan")
        .await
        .unwrap();
    conn.execute(format!("prepare {name} as {statement}").as_str())
        .await
        .unwrap();
    conn.execute(format!("execute {name}{args}").as_str())
        .await
        .unwrap();
    conn.execute(grow).await.unwrap();
    let plan: Vec<String> = sqlx::query_scalar(&format!("explain execute {name}{args}"))
        .fetch_all(&mut *conn)
        .await
        .unwrap();
    plan.join("\n")
}

#[sqlx::test(migrations = "../migrations")]
async fn the_batch_lookups_stay_index_probes_as_the_tables_grow(db: sqlx::PgPool) {
    use floodgate_consumer::store::{LOCK_BOOKINGS, MARK_DIVERGED};
    let mut conn = db.acquire().await.unwrap();
    let bookings = "insert into bookings (reservation_id, sale_id, pool_id, token_id, ticket,
          seats, status, reserved_at, hold_expires_at, created_event_id)
        select 'r' || i, 's', 'p', 't' || i, i, 1, 'PENDING_PAYMENT', now(), now(), 'e' || i
        from generate_series(1, 20000) i";
    let plan = cached_plan(
        &mut conn,
        "lock_bookings",
        LOCK_BOOKINGS,
        "(array['r1', 'r2'])",
        bookings,
    )
    .await;
    // `where reservation_id = any($1)` planned on the empty table scanned all 20,000 rows.
    assert!(!plan.contains("Seq Scan on bookings"), "{plan}");
    assert!(plan.contains("Index Scan using bookings_pkey"), "{plan}");

    let events = "insert into booking_events (event_id, reservation_id, sale_id, pool_id,
          event_type, occurred_at, changed, kafka_partition, kafka_offset, seq)
        select 'e' || i, 'r' || i, 's', 'p', 'SeatReserved', now(), true, 0, i, i
        from generate_series(1, 20000) i";
    let plan = cached_plan(
        &mut conn,
        "mark_diverged",
        MARK_DIVERGED,
        "(array['s'], array['p'], array[7::int8], array['x'])",
        events,
    )
    .await;
    assert!(!plan.contains("Seq Scan on booking_events"), "{plan}");
    assert!(plan.contains("booking_events_seq_idx"), "{plan}");
}
