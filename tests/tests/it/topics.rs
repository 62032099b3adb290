//! `floodgate-booking topics ensure` (issue 16) against the real broker: it makes the
//! reservations, dead-letter and probe topics as the settings say, leaves them be when they are, and
//! reports (without touching) a topic that exists with other settings. The settings are a floor
//! (issue 49): a topic an operator grew, or one not grown yet after the settings were raised,
//! never stops a Pod from starting; fewer copies than asked for does. The services started
//! before the topics exist (the setup Job is a Job no Pod waits for) find them once made.

use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::Duration;

use floodgate_platform::keys::pool_partition_key;
use floodgate_protocol::events::Event;
use floodgate_tests::gateways::free_port;
use floodgate_tests::services::{booking_serve, start_service, Stopped};
use floodgate_tests::{
    binary, create_topic, ensure_topics, event, eventually, fresh_database, kafka_brokers, produce,
    run_to_end, scrape, unique, TestApp,
};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::ClientConfig;

/// `topics ensure` for `topic` with `partitions`: its exit code and what it printed.
fn ensure(topic: &str, partitions: i32) -> (i32, String) {
    run_to_end(
        Command::new(binary("floodgate-booking"))
            .args(["topics", "ensure"])
            .env("FLOODGATE_KAFKA_BROKERS", kafka_brokers())
            .env("FLOODGATE_RESERVATIONS_TOPIC", topic)
            .env("FLOODGATE_TOPIC_PARTITIONS", partitions.to_string()),
    )
}

/// The partitions of `topic` as the broker describes it.
fn partitions(topic: &str) -> usize {
    let client: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", kafka_brokers())
        .create()
        .unwrap();
    let metadata = client
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .unwrap();
    metadata
        .topics()
        .iter()
        .find(|t| t.name() == topic)
        .map_or(0, |t| t.partitions().len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topics_are_made_as_set_left_as_they_are_and_a_difference_is_reported() {
    let topic = unique("floodgate.topics-test.");
    let (dlq, probe) = (format!("{topic}.dlq"), format!("{topic}.probe"));
    let (code, said) = ensure(&topic, 4);
    assert_eq!(code, 0, "{said}");
    assert_eq!(said.matches(": created").count(), 3, "{said}");
    assert_eq!(
        (partitions(&topic), partitions(&dlq), partitions(&probe)),
        (4, 1, 1)
    );

    // Again: nothing to do.
    let (code, said) = ensure(&topic, 4);
    assert_eq!(code, 0, "{said}");
    assert_eq!(said.matches(": as set").count(), 3, "{said}");

    // The settings raised before the topic is grown (a new release's ConfigMap): reported, left
    // alone, and the command succeeds, so a Pod added at an opening still starts.
    let other = unique("floodgate.topics-test.");
    create_topic(&kafka_brokers(), &other, 3).await;
    let (code, said) = ensure(&other, 6);
    assert_eq!(code, 0, "{said}");
    assert!(
        said.contains(&format!(
            "topic {other}: 3 partitions, the settings ask for 6: left as it is"
        )),
        "{said}"
    );
    assert!(said.contains("Growing the topic"), "{said}");
    assert_eq!(partitions(&other), 3, "an existing topic is never changed");
    assert_eq!(
        partitions(&format!("{other}.dlq")),
        1,
        "the missing one is still made"
    );

    // A topic grown past the settings (by the broker's own tools, between sales): as set.
    let grown = unique("floodgate.topics-test.");
    create_topic(&kafka_brokers(), &grown, 8).await;
    let (code, said) = ensure(&grown, 6);
    assert_eq!(code, 0, "{said}");
    assert!(said.contains(&format!("topic {grown}: as set")), "{said}");
    assert_eq!(partitions(&grown), 8);

    // Fewer copies than the settings ask for: a difference, and the command fails (exit 2).
    let (code, said) = run_to_end(
        Command::new(binary("floodgate-booking"))
            .args(["topics", "ensure"])
            .env("FLOODGATE_KAFKA_BROKERS", kafka_brokers())
            .env("FLOODGATE_RESERVATIONS_TOPIC", &grown)
            .env("FLOODGATE_TOPIC_PARTITIONS", "6")
            .env("FLOODGATE_TOPIC_REPLICATION_FACTOR", "3"),
    );
    assert_eq!(code, 2, "{said}");
    assert!(said.contains(&format!("topic {grown}: differs")), "{said}");
    assert!(
        said.contains("a partition has 1 replica(s), the settings ask for 3"),
        "{said}"
    );
}

/// On a first install the floodgate-setup Job makes the topics while the services start, and no
/// Pod waits for it: a booking service started before its probe topic exists finds it once made
/// (it is how a broker found down is noticed back), and a consumer started before its topic
/// exists applies the events written to it once it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn services_started_before_the_setup_job_find_the_topics_once_made() {
    const EVENTS: usize = 20;
    const WAIT: Duration = Duration::from_secs(60);
    let (url, db) = fresh_database().await;
    let app = TestApp::spawn(db.clone()).await;
    let probe = unique("floodgate.probe-later.");
    let env = [
        ("FLOODGATE_PROBE_TOPIC", probe.clone()),
        ("FLOODGATE_OPS_TOKEN", floodgate_tests::secret("ops_")),
        (
            "FLOODGATE_WEBHOOK_SECRET",
            floodgate_tests::secret("whsec_"),
        ),
    ];
    let (mut command, admin, _) = booking_serve(&app, &url, &env);
    let _booking = Stopped(start_service(&mut command, &admin).await);
    let admin: SocketAddr = admin.trim_start_matches("http://").parse().unwrap();
    let missing = "floodgate_kafka_probe_topic_missing";
    eventually("the probe topic reported missing", WAIT, async || {
        scrape(admin, missing).await == Some(1.0)
    })
    .await;

    let topic = unique("floodgate.topic-later.");
    let metrics = free_port();
    let _consumer = Stopped(
        Command::new(binary("floodgate-consumer"))
            .env("FLOODGATE_DATABASE_URL", &url)
            .env("FLOODGATE_KAFKA_BROKERS", kafka_brokers())
            .env("FLOODGATE_RESERVATIONS_TOPIC", &topic)
            .env("FLOODGATE_CONSUMER_GROUP", unique("topic-later-"))
            .env("FLOODGATE_CONSUMER_METRICS_LISTEN", metrics.to_string())
            .env("RUST_LOG", "error")
            .stdin(Stdio::null())
            .spawn()
            .expect("the consumer binary starts"),
    );
    eventually("the consumer is up, with no topic", WAIT, async || {
        reqwest::get(format!("http://{metrics}/healthz"))
            .await
            .is_ok_and(|r| r.status() == 200)
    })
    .await;

    // The setup Job's work, late.
    create_topic(&kafka_brokers(), &probe, 1).await;
    ensure_topics(&kafka_brokers(), &topic, 2).await;
    let messages: Vec<(String, Vec<u8>)> = (0..EVENTS)
        .map(|i| {
            let reservation = format!("later-{i}");
            let event = event("later-sale", "p1", &reservation, Event::SeatReserved);
            (pool_partition_key("later-sale", "p1"), event.to_json())
        })
        .collect();
    produce(&kafka_brokers(), &topic, &messages).await;

    eventually("the probe topic found", WAIT, async || {
        scrape(admin, missing).await == Some(0.0)
    })
    .await;
    eventually("every event applied", WAIT, async || {
        let applied: i64 = sqlx::query_scalar("select count(*) from booking_events")
            .fetch_one(&db)
            .await
            .unwrap();
        applied as usize == EVENTS
    })
    .await;
}
