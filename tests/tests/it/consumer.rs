//! The consumer against the real broker and PostgreSQL: batches, the audit trail, poison to the
//! dead-letter topic, a `kill -9` in the middle of a batch, and PostgreSQL going away.
//! [`churn`]: the Kafka client's crash while other topics come and go on the broker; [`lag`]: the
//! group's lag after a kill and a database restart; [`plans`]: the batch lookups' query plans.

mod churn;
mod lag;
mod plans;

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use floodgate_platform::keys::pool_partition_key;
use floodgate_protocol::events::Event;
use floodgate_tests::chaos::ChaosProxy;
use floodgate_tests::{
    binary, ensure_topics, event, eventually, fresh_database, kafka_brokers, produce, unique,
};
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::message::{Headers, Message};
use rdkafka::ClientConfig;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

const SALE: &str = "consumer-sale";
const POOL: &str = "p1";

/// A fresh topic with its dead-letter topic.
async fn topics() -> String {
    let topic = unique("floodgate.consumer-test.");
    ensure_topics(&kafka_brokers(), &topic, 3).await;
    topic
}

fn config(topic: &str) -> floodgate_consumer::Config {
    floodgate_tests::settings(&[
        ("FLOODGATE_KAFKA_BROKERS", kafka_brokers()),
        ("FLOODGATE_RESERVATIONS_TOPIC", topic.into()),
        (
            "FLOODGATE_CONSUMER_GROUP",
            unique("floodgate-consumer-test-"),
        ),
        ("FLOODGATE_CONSUMER_INSTANCE_ID", "consumer-1".into()),
        ("FLOODGATE_CONSUMER_BATCH", "100".into()),
    ])
}

fn encoded(
    reservation: &str,
    make: fn(floodgate_protocol::events::ReservationData) -> Event,
) -> (String, Vec<u8>) {
    (
        pool_partition_key(SALE, POOL),
        event(SALE, POOL, reservation, make).to_json(),
    )
}

pub(crate) async fn count(db: &PgPool, sql: &str) -> i64 {
    sqlx::query_scalar(sql).fetch_one(db).await.unwrap()
}

/// One booking row per reservation, `confirmed` of them paid.
pub(crate) async fn assert_bookings(db: &PgPool, reservations: usize, confirmed: usize) {
    assert_eq!(
        count(db, "select count(*) from bookings").await as usize,
        reservations
    );
    assert_eq!(
        count(
            db,
            "select count(*) from bookings where status = 'CONFIRMED'"
        )
        .await as usize,
        confirmed
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poison_goes_to_the_dead_letter_topic_and_the_events_behind_it_still_apply() {
    let topic = topics().await;
    let (_, db) = fresh_database().await;
    let stop = CancellationToken::new();
    let consumer = tokio::spawn({
        let (config, db, stop) = (config(&topic), db.clone(), stop.clone());
        async move { floodgate_consumer::run(&config, db, stop).await }
    });
    let key = pool_partition_key(SALE, POOL);
    let mut zero_seats = event(SALE, POOL, "r-zero", Event::SeatReserved);
    if let Event::SeatReserved(d) = &mut zero_seats.event {
        d.seats = 0;
    }
    produce(
        &kafka_brokers(),
        &topic,
        &[
            encoded("r1", Event::SeatReserved),
            (key.clone(), b"{ not an event".to_vec()),
            (key.clone(), zero_seats.to_json()),
            encoded("r2", Event::SeatReserved),
            encoded("r1", Event::PaymentConfirmed),
            // A redelivery of an event already applied changes nothing.
            encoded("r1", Event::SeatReserved),
        ],
    )
    .await;

    eventually("r1 confirmed and r2 held", Duration::from_secs(30), async || {
        count(&db, "select count(*) from bookings where reservation_id = 'r1' and status = 'CONFIRMED'").await == 1
            && count(&db, "select count(*) from bookings where reservation_id = 'r2' and status = 'PENDING_PAYMENT'").await == 1
    })
    .await;
    assert_eq!(count(&db, "select count(*) from bookings").await, 2);

    // The audit trail says what happened to r1, in order, once each.
    let trail: Vec<(String, Option<String>, Option<String>, bool)> = sqlx::query_as(
        "select event_type, status_before, status_after, changed from booking_events
         where reservation_id = 'r1' order by kafka_offset",
    )
    .fetch_all(&db)
    .await
    .unwrap();
    assert_eq!(
        trail,
        vec![
            (
                "SeatReserved".into(),
                None,
                Some("PENDING_PAYMENT".into()),
                true
            ),
            (
                "PaymentConfirmed".into(),
                Some("PENDING_PAYMENT".into()),
                Some("CONFIRMED".into()),
                true
            ),
        ]
    );

    // Both poison messages are in the dead-letter topic, with their reasons and origins.
    let dlq: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", kafka_brokers())
        .set("group.id", unique("dlq-reader-"))
        .set("auto.offset.reset", "earliest")
        .create()
        .unwrap();
    dlq.subscribe(&[&format!("{topic}.dlq")]).unwrap();
    let mut dead = Vec::new();
    while dead.len() < 2 {
        let m = tokio::time::timeout(Duration::from_secs(30), dlq.recv())
            .await
            .expect("dead letters arrive")
            .unwrap();
        let headers = m.headers().expect("dead letters carry headers");
        let reason = (0..headers.count())
            .map(|i| headers.get(i))
            .find(|h| h.key == "floodgate-reason")
            .and_then(|h| h.value)
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .expect("a reason");
        dead.push((m.payload().unwrap_or_default().to_vec(), reason));
    }
    assert_eq!(dead[0].0, b"{ not an event");
    assert!(dead[0].1.contains("undecodable"), "{}", dead[0].1);
    assert!(dead[1].1.contains("seat count"), "{}", dead[1].1);
    // And the metrics say so.
    let rendered = floodgate_platform::runtime::metrics().render();
    assert!(
        rendered.contains("floodgate_consumer_poison_total 2"),
        "{rendered}"
    );
    assert!(
        rendered.contains("floodgate_consumer_batch_size_count"),
        "{rendered}"
    );
    assert!(
        rendered.contains("floodgate_consumer_rows_written_total 3"),
        "r1 created and confirmed, r2 created: {rendered}"
    );
    stop.cancel();
    consumer.await.unwrap().unwrap();
}

/// The consumer binary, reading `topic` on the shared broker and writing to `database_url`.
fn consumer_process(topic: &str, group: &str, database_url: &str) -> Child {
    consumer_process_on(
        (&kafka_brokers(), "127.0.0.1:0"),
        topic,
        group,
        database_url,
    )
}

/// The consumer binary, reading `topic` on the broker at `brokers`, its admin listener (metrics,
/// probes) on `admin`.
fn consumer_process_on(
    (brokers, admin): (&str, &str),
    topic: &str,
    group: &str,
    database_url: &str,
) -> Child {
    Command::new(binary("floodgate-consumer"))
        .env("FLOODGATE_DATABASE_URL", database_url)
        .env("FLOODGATE_KAFKA_BROKERS", brokers)
        .env("FLOODGATE_RESERVATIONS_TOPIC", topic)
        .env("FLOODGATE_CONSUMER_GROUP", group)
        .env("FLOODGATE_CONSUMER_INSTANCE_ID", "killed-consumer")
        .env("FLOODGATE_CONSUMER_METRICS_LISTEN", admin)
        .env("FLOODGATE_CONSUMER_BATCH", "50")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .spawn()
        .expect("the consumer binary starts")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_killed_mid_batch_leaves_exactly_one_row_per_reservation() {
    const RESERVATIONS: usize = 3_000;
    let topic = topics().await;
    let (url, db) = fresh_database().await;
    let mut messages: Vec<_> = (0..RESERVATIONS)
        .map(|i| encoded(&format!("k{i}"), Event::SeatReserved))
        .collect();
    messages
        .extend((0..RESERVATIONS / 2).map(|i| encoded(&format!("k{i}"), Event::PaymentConfirmed)));
    produce(&kafka_brokers(), &topic, &messages).await;

    let group = unique("floodgate-killed-");
    let mut doomed = consumer_process(&topic, &group, &url);
    eventually(
        "the first batches are in",
        Duration::from_secs(60),
        async || count(&db, "select count(*) from booking_events").await >= 100,
    )
    .await;
    doomed.kill().unwrap(); // SIGKILL, mid-stream: whatever batch was open is lost with it
    doomed.wait().unwrap();
    let before = count(&db, "select count(*) from booking_events").await;
    assert!(
        (before as usize) < messages.len(),
        "killed before the end ({before} of {})",
        messages.len()
    );

    let mut again = consumer_process(&topic, &group, &url);
    eventually(
        "every event applied",
        Duration::from_secs(120),
        async || count(&db, "select count(*) from booking_events").await as usize == messages.len(),
    )
    .await;
    again.kill().unwrap();
    again.wait().unwrap();
    assert_bookings(&db, RESERVATIONS, RESERVATIONS / 2).await;
    assert_eq!(
        count(&db, "select count(distinct reservation_id) from bookings").await as usize,
        RESERVATIONS,
        "one row per reservation"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_going_away_under_load_loses_and_doubles_nothing() {
    const RESERVATIONS: usize = 600;
    let topic = topics().await;
    let (url, db) = fresh_database().await;
    // The consumer reaches this test's database through a proxy that the test can cut.
    let upstream: std::net::SocketAddr = "127.0.0.1:5432".parse().unwrap();
    let proxy = ChaosProxy::start(upstream).await;
    let proxied = url.replace("127.0.0.1:5432", &proxy.addr.to_string());
    assert_ne!(proxied, url, "the database URL goes through the proxy");
    let consumer_db = sqlx::postgres::PgPoolOptions::new()
        .max_connections(2)
        .acquire_timeout(Duration::from_secs(1))
        .connect(&proxied)
        .await
        .unwrap();
    let stop = CancellationToken::new();
    let consumer = tokio::spawn({
        let (config, stop) = (config(&topic), stop.clone());
        async move { floodgate_consumer::run(&config, consumer_db, stop).await }
    });

    let first: Vec<_> = (0..RESERVATIONS / 2)
        .map(|i| encoded(&format!("o{i}"), Event::SeatReserved))
        .collect();
    produce(&kafka_brokers(), &topic, &first).await;
    eventually(
        "the first half is in",
        Duration::from_secs(60),
        async || count(&db, "select count(*) from bookings").await as usize == RESERVATIONS / 2,
    )
    .await;

    // PostgreSQL vanishes for the consumer while the second half arrives.
    proxy.cut();
    let second: Vec<_> = (RESERVATIONS / 2..RESERVATIONS)
        .map(|i| encoded(&format!("o{i}"), Event::SeatReserved))
        .collect();
    produce(&kafka_brokers(), &topic, &second).await;
    eventually(
        "the consumer is retrying",
        Duration::from_secs(30),
        async || retries() >= 2.0,
    )
    .await;
    assert_eq!(
        count(&db, "select count(*) from bookings").await as usize,
        RESERVATIONS / 2,
        "nothing written while the database is away"
    );

    proxy.restore();
    eventually("everything is in", Duration::from_secs(60), async || {
        count(&db, "select count(*) from booking_events").await as usize == RESERVATIONS
    })
    .await;
    assert_eq!(
        count(&db, "select count(*) from bookings").await as usize,
        RESERVATIONS
    );
    stop.cancel();
    consumer.await.unwrap().unwrap();
}

/// The consumer's database retries so far, from this process' own metrics.
fn retries() -> f64 {
    floodgate_platform::runtime::metrics()
        .render()
        .lines()
        .find_map(|l| l.strip_prefix("floodgate_consumer_db_retries_total "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}
