//! The Kafka client's crash under the consumer. Tansu 0.6 answers a Fetch for a topic it cannot
//! find (one just deleted, or, on its sqlite engine, the consumer's own topic while other topics
//! are deleted) with an all-zero topic id and a partition leader, and librdkafka 2.12.1
//! dereferences a null topic name on it: SIGSEGV in `rd_kafka_metadata_update_op`
//! (docs/upstream.md has the backtrace and the reports). Its surest trigger, used here: the
//! consumer's own topic deleted under it, on Tansu's memory engine. The consumer's supervisor
//! starts the worker again, which takes its partitions back.

use std::time::Duration;

use floodgate_protocol::events::Event;
use floodgate_tests::broker::PrivateBroker;
use floodgate_tests::gateways::free_port;
use floodgate_tests::{create_topic, ensure_topics, eventually, fresh_database, produce, unique};
use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use rdkafka::ClientConfig;

use super::{consumer_process_on, count, encoded};

const EVENTS: usize = 50;
const WAIT: Duration = Duration::from_secs(60);

/// The members holding the group's partitions now.
async fn owners(db: &sqlx::PgPool, group: &str) -> Vec<String> {
    sqlx::query_scalar(
        "select distinct owner from consumer_partitions where group_id = $1 and owner is not null",
    )
    .bind(group)
    .fetch_all(db)
    .await
    .unwrap()
}

/// Kills the process (the supervisor, and with it its worker) however the test ends.
struct Stopped(std::process::Child);

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_consumer_outlives_its_kafka_clients_crash() {
    let broker = PrivateBroker::start().await;
    let brokers = broker.address();
    let topic = unique("floodgate.crash-test.");
    ensure_topics(&brokers, &topic, 3).await;
    let (url, db) = fresh_database().await;
    let admin_listener = free_port().to_string();
    let group = unique("crash-");
    let mut consumer = Stopped(consumer_process_on(
        (&brokers, &admin_listener),
        &topic,
        &group,
        &url,
    ));
    let events: Vec<_> = (0..EVENTS)
        .map(|i| encoded(&format!("r{i}"), Event::SeatReserved))
        .collect();
    produce(&brokers, &topic, &events).await;
    eventually("the events applied", WAIT, async || {
        count(&db, "select count(*) from bookings").await == EVENTS as i64
    })
    .await;
    let first = owners(&db, &group).await;
    assert_eq!(first.len(), 1, "{first:?}");

    // The topic goes under the reading consumer: its Kafka client crashes on the broker's answer.
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", &brokers)
        .create()
        .expect("an admin client");
    admin
        .delete_topics(&[topic.as_str()], &AdminOptions::new())
        .await
        .expect("the topic deleted");
    let url = format!("http://{admin_listener}/metrics");
    let restarts = eventually("the worker started again", WAIT, async || {
        if let Some(status) = consumer.0.try_wait().unwrap() {
            panic!("the consumer died: {status}");
        }
        let text = reqwest::get(&url).await.ok()?.text().await.ok()?;
        text.lines()
            .find_map(|l| l.strip_prefix("floodgate_consumer_worker_restarts "))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|n| *n >= 1.0)
    })
    .await;
    assert!(restarts >= 1.0);

    // The topic is back: the new worker (a new run of the same instance) holds the partitions.
    create_topic(&brokers, &topic, 3).await;
    let second = eventually("the new worker holds the partitions", WAIT, async || {
        let now = owners(&db, &group).await;
        (now.len() == 1 && now != first).then_some(now)
    })
    .await;
    let instance = |member: &str| member.split('/').next().unwrap_or_default().to_owned();
    assert_eq!(instance(&second[0]), instance(&first[0]));
    assert!(
        consumer.0.try_wait().unwrap().is_none(),
        "the consumer is still running"
    );
}
