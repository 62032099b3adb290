//! The dead-letter topic: where events that can never be applied are set aside, key and payload
//! unchanged, with why and where from in headers (docs/protocol.md 5).

use std::time::Duration;

use anyhow::Context as _;
use floodgate_platform::kafka::{KafkaArgs, RenewableProducer, Role};
use rdkafka::message::{Header, Message, OwnedHeaders, OwnedMessage};
use rdkafka::producer::FutureRecord;

/// A producer for the dead-letter topic that waits for every copy to be acknowledged, replaced
/// after a failed send (see [`RenewableProducer`]: one that failed may carry a raised epoch to a
/// broker restarted meanwhile).
pub struct DeadLetters {
    producer: RenewableProducer,
    topic: String,
}

impl DeadLetters {
    pub fn new(kafka: &KafkaArgs, topic: String) -> anyhow::Result<Self> {
        let producer = RenewableProducer::new(kafka.client(Role::Producer, &[])?)
            .context("creating the dead-letter producer")?;
        Ok(Self { producer, topic })
    }

    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// Copies a poison message to the dead-letter topic, same key and payload, with why and where
    /// from in headers; waits for the broker's acknowledgement.
    pub async fn send(
        &self,
        message: &OwnedMessage,
        reason: &str,
    ) -> Result<(), rdkafka::error::KafkaError> {
        let partition = message.partition().to_string();
        let offset = message.offset().to_string();
        let headers = OwnedHeaders::new()
            .insert(Header {
                key: "floodgate-reason",
                value: Some(reason),
            })
            .insert(Header {
                key: "floodgate-source-topic",
                value: Some(message.topic()),
            })
            .insert(Header {
                key: "floodgate-source-partition",
                value: Some(&partition),
            })
            .insert(Header {
                key: "floodgate-source-offset",
                value: Some(&offset),
            });
        let mut record = FutureRecord::to(&self.topic)
            .payload(message.payload().unwrap_or_default())
            .headers(headers);
        if let Some(key) = message.key() {
            record = record.key(key);
        }
        let (producer, generation) = self.producer.get();
        let sent = producer
            .send(record, Duration::from_secs(10))
            .await
            .map(|_| ())
            .map_err(|(e, _)| e);
        if sent.is_err() {
            self.producer.renew(generation);
        }
        sent
    }
}
