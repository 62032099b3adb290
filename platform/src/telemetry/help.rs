//! The help text of every metric (Prometheus' `# HELP`), kept apart from the recorder: a list
//! that grows with every measurement.

/// Every metric a Floodgate service records, with its help text (Prometheus' `# HELP`; docs/runbook.md,
/// "Metrics", says what to do about each).
pub(super) const METRICS: &[(&str, &str)] = &[
    (
        "floodgate_http_requests_total",
        "HTTP requests answered, by listener, route, method and status",
    ),
    (
        "floodgate_http_request_duration_seconds",
        "Time to answer an HTTP request, by listener, route and method",
    ),
    (
        "floodgate_redis_script_duration_seconds",
        "Round trip of a Lua script to Redis, by script",
    ),
    (
        "floodgate_redis_command_duration_seconds",
        "Round trip of a Redis command or pipeline, by command",
    ),
    (
        "floodgate_kafka_produce_duration_seconds",
        "From sending an event to the broker's acknowledgement, by outcome",
    ),
    (
        "floodgate_consumer_worker_restarts",
        "Times the consumer's supervisor started its worker again after a crash",
    ),
    (
        "floodgate_kafka_available",
        "1 while the broker acknowledges events, 0 while it is known to be down (reservations are refused at once)",
    ),
    (
        "floodgate_kafka_down_total",
        "Times the broker became known to be down",
    ),
    (
        "floodgate_kafka_probes_total",
        "Probes of a broker known to be down, by outcome",
    ),
    (
        "floodgate_kafka_probe_topic_missing",
        "1 when the booking service found no probe topic at start (run topics ensure)",
    ),
    (
        "floodgate_kafka_producers_renewed_total",
        "Kafka producers replaced by a fresh one after a failed send",
    ),
    (
        "floodgate_ws_sessions",
        "WebSocket sessions open on this gateway",
    ),
    (
        "floodgate_redis_primaries_known",
        "1 while this process can read which Redis process serves each slot, 0 while it cannot",
    ),
    (
        "floodgate_buyer_records_restored_total",
        "Buyers' records written again from their sessions after a change of primary, by outcome",
    ),
    (
        "floodgate_ws_messages_sent_total",
        "Messages sent to waiting clients, by type",
    ),
    (
        "floodgate_ws_closes_total",
        "Close frames sent to waiting clients, by close code",
    ),
    (
        "floodgate_rooms",
        "Sales this gateway holds a waiting room for",
    ),
    (
        "floodgate_tickets_issued_total",
        "Waiting-room tickets handed out",
    ),
    (
        "floodgate_tickets_resumed_total",
        "Tickets taken back on a new session",
    ),
    (
        "floodgate_tickets_skipped_total",
        "Tickets the frontier skipped because their holder left",
    ),
    (
        "floodgate_memory_trims_total",
        "Times the gateway gave freed memory back to the system after a join ramp",
    ),
    (
        "floodgate_tickets_abandoned_total",
        "Tickets given back because the joining client stopped waiting",
    ),
    (
        "floodgate_joins_refused_total",
        "Joins refused before the upgrade, by reason",
    ),
    (
        "floodgate_draw_reads_refused_total",
        "Requests for the draw's record refused because the gateway's read budget was spent",
    ),
    (
        "floodgate_join_batches_total",
        "Batches of joins sent to the sale's Redis slot",
    ),
    (
        "floodgate_joins_in_flight",
        "Joins waiting for their batch's reply",
    ),
    (
        "floodgate_admissions_total",
        "Tickets admitted by the controller, by sale",
    ),
    (
        "floodgate_admissions_pushed_total",
        "Admission tokens pushed to waiting clients",
    ),
    (
        "floodgate_admission_rate",
        "The sale's set admission rate (admissions per second), by sale",
    ),
    (
        "floodgate_autopilot_changes_total",
        "Moves of the admission rate by the sale's autopilot, by sale and action (cut, raised, bounded)",
    ),
    (
        "floodgate_admission_frontier",
        "The last ticket admitted, by sale",
    ),
    (
        "floodgate_admission_issued",
        "Tickets issued in the sale, by sale",
    ),
    (
        "floodgate_admission_unspent",
        "Admission tokens handed out and not yet spent or expired, by sale",
    ),
    (
        "floodgate_admission_active_cap",
        "The cap on admitted users with a live token or hold, by sale",
    ),
    (
        "floodgate_admission_paused",
        "1 while the sale's admission is paused, by sale",
    ),
    (
        "floodgate_ready",
        "1 when this process's latest readiness check found it ready (in its Services' endpoints), 0 when not",
    ),
    (
        "floodgate_dependency_up",
        "1 when the dependency answered this process's latest readiness check, 0 when not, by dependency (redis, postgres, kafka)",
    ),
    (
        "floodgate_admission_leading",
        "1 on the gateway leading the sale's admission, 0 on the others, by sale",
    ),
    (
        "floodgate_admission_allowed",
        "Waiting people the cap and the stock would let in now, the rate aside (0 off the leader), by sale",
    ),
    (
        "floodgate_pool_available",
        "Seats a pool can still sell, by sale and pool",
    ),
    (
        "floodgate_pool_held",
        "Seats held and not yet paid for, by sale and pool",
    ),
    ("floodgate_pool_sold", "Seats sold, by sale and pool"),
    (
        "floodgate_ws_session_budget",
        "Sessions this gateway may hold (its open-files budget or setting)",
    ),
    (
        "floodgate_process_resident_memory_bytes",
        "Resident memory of this process",
    ),
    (
        "floodgate_seat_snapshot_requests_total",
        "Seat-count snapshots read from Redis",
    ),
    (
        "floodgate_reservations_total",
        "Reservation requests decided, by outcome",
    ),
    (
        "floodgate_reservations_aborted_total",
        "Holds taken back because their event was not acknowledged",
    ),
    (
        "floodgate_outbox_relayed_total",
        "Outbox events the relay published",
    ),
    ("floodgate_holds_expired_total", "Holds that expired unpaid"),
    (
        "floodgate_webhooks_total",
        "Payment webhooks received, by outcome",
    ),
    (
        "floodgate_unmatched_payments_total",
        "Payments naming no reservation, refunded",
    ),
    (
        "floodgate_pools_lost_writes_total",
        "Pools found to have lost writes in a failover",
    ),
    ("floodgate_api_errors_total", "Booking API errors, by code"),
    (
        "floodgate_reconcile_drift_pools",
        "Pools whose Redis and PostgreSQL disagree, at the last reconcile pass",
    ),
    (
        "floodgate_reconcile_failures_total",
        "Reconcile passes that could not read a sale",
    ),
    (
        "floodgate_consumer_events_total",
        "Events the consumer applied, by outcome",
    ),
    (
        "floodgate_consumer_rows_written_total",
        "Rows the consumer wrote",
    ),
    (
        "floodgate_consumer_db_retries_total",
        "Batches retried after a PostgreSQL error",
    ),
    (
        "floodgate_consumer_poison_total",
        "Events set aside to the dead-letter topic",
    ),
    (
        "floodgate_consumer_batch_size",
        "Events applied per database transaction",
    ),
    (
        "floodgate_consumer_partitions",
        "Partitions this consumer holds",
    ),
    (
        "floodgate_consumer_lag",
        "Events not yet applied, by partition",
    ),
    (
        "floodgate_consumer_lag_all_partitions",
        "Events not yet applied, all partitions",
    ),
];
