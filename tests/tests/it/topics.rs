//! `floodgate-booking topics ensure` (issue 16) against the real broker: it makes the
//! reservations, dead-letter and probe topics as the settings say, leaves them be when they are, and
//! reports (without touching) a topic that exists with other settings. The settings are a floor
//! (issue 49): a topic an operator grew, or one not grown yet after the settings were raised,
//! never stops a Pod from starting; fewer copies than asked for does.

use std::process::Command;
use std::time::Duration;

use floodgate_tests::{binary, create_topic, kafka_brokers, run_to_end, unique};
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
