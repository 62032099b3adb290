//! The broker as a test prepares it: topics made as `topics ensure` makes them, events produced
//! as the booking service writes them.

use super::*;

/// The reservations topic `topic` (with `partitions`) and its dead-letter topic, made as
/// `floodgate-booking topics ensure` makes them (and asserted new).
pub async fn ensure_topics(brokers: &str, topic: &str, partitions: i32) {
    use floodgate_booking::topics::{ensure, TopicSettings, TopicState};
    let settings = TopicSettings {
        partitions,
        dlq_partitions: 1,
        replication_factor: 1,
        min_insync_replicas: None,
    };
    let kafka = floodgate_platform::kafka::KafkaArgs::plaintext(brokers, topic);
    let (dlq, probe) = (kafka.dead_letter_topic(None), format!("{topic}.probe"));
    let states = ensure(&kafka, (&dlq, &probe), &settings)
        .await
        .expect("topics ensure");
    assert!(
        states
            .iter()
            .all(|(_, state)| *state == TopicState::Created),
        "{states:?}"
    );
}

/// Creates one topic on the real broker (Tansu does not auto-create topics), bypassing
/// `topics ensure` (to make one that differs from the settings, say).
pub async fn create_topic(brokers: &str, topic: &str, partitions: i32) {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .create()
        .expect("admin client");
    let results = admin
        .create_topics(
            &[NewTopic::new(topic, partitions, TopicReplication::Fixed(1))],
            &AdminOptions::new().operation_timeout(Some(Duration::from_secs(10))),
        )
        .await
        .expect("create_topics request");
    for result in results {
        result.unwrap_or_else(|(t, e)| panic!("creating topic {t}: {e}"));
    }
}

/// Publishes each `(key, payload)` to `topic`, in order, and waits for every acknowledgement.
pub async fn produce(brokers: &str, topic: &str, messages: &[(String, Vec<u8>)]) {
    use rdkafka::producer::{FutureProducer, FutureRecord};
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .set("linger.ms", "5")
        .create()
        .expect("a producer");
    let deliveries: Vec<_> = messages
        .iter()
        .map(|(key, payload)| {
            producer.send(
                FutureRecord::to(topic).key(key).payload(payload),
                Duration::from_secs(30),
            )
        })
        .collect();
    for delivery in futures::future::join_all(deliveries).await {
        delivery.expect("the broker acknowledges");
    }
}

/// An event as the booking service would publish it, for tests of the consumer alone.
pub fn event(
    sale: &str,
    pool: &str,
    reservation: &str,
    make: fn(ReservationData) -> Event,
) -> Envelope {
    let now = floodgate_protocol::now_millis();
    let event = make(ReservationData {
        reservation_id: reservation.to_owned(),
        token_id: format!("tok-{reservation}"),
        ticket: 1,
        seats: 1,
        reserved_at_ms: now,
        hold_expires_at_ms: now + 300_000,
        payment_id: None,
        buyer: None,
    });
    Envelope {
        v: floodgate_protocol::events::SCHEMA_VERSION,
        id: format!("{reservation}.{}", event.kind()),
        at_ms: now,
        sale: sale.to_owned(),
        pool: pool.to_owned(),
        seq: None,
        event,
    }
}
