//! The consumer group's lag: back to zero after a kill and a database restart (defect 24).

use super::*;

/// The group's lag on `topic`: high watermark (as Kafka says) minus the offset the group stored
/// in PostgreSQL, summed over the partitions.
async fn committed_lag(db: &PgPool, topic: &str, group: &str) -> i64 {
    let stored = floodgate_platform::progress::stored_offsets(db, group, topic)
        .await
        .unwrap();
    let topic = topic.to_owned();
    tokio::task::spawn_blocking(move || {
        use rdkafka::consumer::BaseConsumer;
        let client: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", kafka_brokers())
            .set("enable.auto.commit", "false")
            .create()
            .unwrap();
        let timeout = Duration::from_secs(5);
        (0..3)
            .map(|partition| {
                let (low, high) = client.fetch_watermarks(&topic, partition, timeout).unwrap();
                (high - stored.get(&partition).copied().unwrap_or(low)).max(0)
            })
            .sum()
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn defect_24_lag_returns_to_zero_after_a_kill_and_a_database_restart() {
    let topic = topics().await;
    let (url, db) = fresh_database().await;
    let upstream: std::net::SocketAddr = "127.0.0.1:5432".parse().unwrap();
    let proxy = ChaosProxy::start(upstream).await;
    let proxied = url.replace("127.0.0.1:5432", &proxy.addr.to_string());
    let group = unique("floodgate-lag-");
    let metrics = floodgate_tests::gateways::free_port();
    let start = || {
        Command::new(binary("floodgate-consumer"))
            .env("FLOODGATE_DATABASE_URL", &proxied)
            .env("FLOODGATE_KAFKA_BROKERS", kafka_brokers())
            .env("FLOODGATE_RESERVATIONS_TOPIC", &topic)
            .env("FLOODGATE_CONSUMER_GROUP", &group)
            .env("FLOODGATE_CONSUMER_INSTANCE_ID", "lagging-consumer")
            .env("FLOODGATE_CONSUMER_METRICS_LISTEN", metrics.to_string())
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .spawn()
            .expect("the consumer binary starts")
    };
    let events = |from: usize, to: usize| -> Vec<(String, Vec<u8>)> {
        (from..to)
            .map(|i| encoded(&format!("l{i}"), Event::SeatReserved))
            .collect()
    };
    let rows_become = |n: i64| {
        let db = db.clone();
        async move {
            eventually(&format!("{n} rows"), Duration::from_secs(60), async || {
                count(&db, "select count(*) from bookings").await == n
            })
            .await
        }
    };

    // A sale in full flow; the consumer is killed outright in the middle of it.
    let mut first = start();
    produce(&kafka_brokers(), &topic, &events(0, 200)).await;
    rows_become(200).await;
    first.kill().unwrap();
    first.wait().unwrap();

    // It comes back, and PostgreSQL restarts under it while the sale goes on.
    let mut consumer = start();
    produce(&kafka_brokers(), &topic, &events(200, 300)).await;
    rows_become(300).await;
    proxy.cut();
    produce(&kafka_brokers(), &topic, &events(300, 400)).await;
    eventually(
        "the consumer retries",
        Duration::from_secs(30),
        async || {
            floodgate_tests::scrape(metrics, "floodgate_consumer_db_retries_total")
                .await
                .is_some_and(|r| r >= 1.0)
        },
    )
    .await;
    proxy.restore();
    rows_become(400).await;
    eventually(
        "the backlog is committed",
        Duration::from_secs(30),
        async || committed_lag(&db, &topic, &group).await == 0,
    )
    .await;

    // The sale's last few events arrive just after that commit, then nothing more.
    produce(&kafka_brokers(), &topic, &events(400, 403)).await;
    rows_become(403).await;
    eventually(
        "the last events are committed",
        Duration::from_secs(30),
        async || committed_lag(&db, &topic, &group).await == 0,
    )
    .await;
    eventually(
        "the lag metric reads zero",
        Duration::from_secs(30),
        async || {
            floodgate_tests::scrape(metrics, "floodgate_consumer_lag_all_partitions").await
                == Some(0.0)
        },
    )
    .await;
    consumer.kill().unwrap();
    consumer.wait().unwrap();
}
