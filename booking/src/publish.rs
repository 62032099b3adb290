//! Publishing events to Kafka, answering only once the broker has acknowledged them.
//!
//! The producer is idempotent with `acks=all`: a retried send inside librdkafka can neither
//! duplicate nor reorder one pool's events, and an ack means every in-sync replica has the event.
//!
//! The producer is also disposable. After a failed send it is replaced by a fresh one (at most
//! once per [`RENEW_AFTER`]): an idempotent producer can be left unable to send after its broker
//! restarts and forgets its producer id (seen with Tansu: every send then fails at once with an
//! unknown broker error). Nothing is lost by the swap: every event is in its pool's outbox until
//! acknowledged, and a request whose send failed has already been answered 503.

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use floodgate_contract::kafka::{KafkaArgs, Role};
use floodgate_contract::keys::pool_partition_key;
use rdkafka::config::ClientConfig;
use rdkafka::error::KafkaError;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::util::Timeout;

/// Least age of a producer before a failure replaces it: keeps an outage from churning clients.
const RENEW_AFTER: Duration = Duration::from_secs(2);

#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    #[error("the broker did not acknowledge the event: {0}")]
    NotAcked(#[from] KafkaError),
}

struct Current {
    producer: FutureProducer,
    created: Instant,
    generation: u64,
}

/// A cheap-to-clone handle on one shared, replaceable producer.
#[derive(Clone)]
pub struct Publisher {
    config: Arc<ClientConfig>,
    current: Arc<RwLock<Current>>,
    topic: Arc<str>,
}

impl Publisher {
    /// `delivery_timeout` bounds how long one event may wait for its ack, retries included.
    /// The producer is configured by [`KafkaArgs::client`] (acks=all and idempotence among
    /// Floodgate's fixed defaults).
    pub fn new(kafka: &KafkaArgs, delivery_timeout: Duration) -> anyhow::Result<Self> {
        let own = [(
            "message.timeout.ms",
            delivery_timeout.as_millis().to_string(),
        )];
        let config = kafka.client(Role::Producer, &own)?;
        let producer: FutureProducer = config.create()?;
        let topic = kafka.reservations_topic.as_str();
        Ok(Self {
            config: Arc::new(config),
            current: Arc::new(RwLock::new(Current {
                producer,
                created: Instant::now(),
                generation: 0,
            })),
            topic: Arc::from(topic),
        })
    }

    fn producer(&self) -> (FutureProducer, u64) {
        let current = self.current.read().unwrap_or_else(|e| e.into_inner());
        (current.producer.clone(), current.generation)
    }

    /// Sends one event (an envelope's JSON, as the pool script wrote it to the outbox) keyed by
    /// its pool, and waits for the broker's acknowledgement.
    #[tracing::instrument(skip_all, fields(%sale, %pool))]
    pub async fn publish(&self, sale: &str, pool: &str, event: &str) -> Result<(), PublishError> {
        let key = pool_partition_key(sale, pool);
        let (producer, generation) = self.producer();
        let mut record = FutureRecord::to(&self.topic).key(&key).payload(event);
        // The request's trace goes on with the event, to the consumer's write (contract::trace).
        if let Some(headers) = floodgate_contract::trace::kafka_headers() {
            record = record.headers(headers);
        }
        let started = Instant::now();
        let sent = producer.send(record, Timeout::Never).await;
        // From the send to the broker's acknowledgement (or the give-up), per outcome.
        let outcome = if sent.is_ok() { "acked" } else { "failed" };
        metrics::histogram!("floodgate_kafka_produce_duration_seconds", "outcome" => outcome)
            .record(started.elapsed().as_secs_f64());
        match sent {
            Ok(_) => Ok(()),
            Err((e, _)) => {
                self.renew(generation);
                Err(PublishError::NotAcked(e))
            }
        }
    }

    /// Replaces the producer of `generation` with a fresh one, unless it is young or already
    /// replaced.
    fn renew(&self, generation: u64) {
        let old = {
            let mut current = self.current.write().unwrap_or_else(|e| e.into_inner());
            if current.generation != generation || current.created.elapsed() < RENEW_AFTER {
                return;
            }
            let producer: FutureProducer = match self.config.create() {
                Ok(p) => p,
                Err(e) => {
                    tracing::warn!(error = %e, "could not create a fresh producer");
                    return;
                }
            };
            tracing::info!(
                generation = generation + 1,
                "replacing the Kafka producer after a failed send"
            );
            std::mem::replace(
                &mut *current,
                Current {
                    producer,
                    created: Instant::now(),
                    generation: generation + 1,
                },
            )
        };
        // Dropping a producer waits for its queue to drain: never on an async worker thread.
        tokio::task::spawn_blocking(move || drop(old));
    }

    /// Whether the broker answers with the topic's metadata within `timeout` (readiness).
    pub async fn reachable(&self, timeout: Duration) -> Result<(), String> {
        let (producer, _) = self.producer();
        let topic = self.topic.clone();
        tokio::task::spawn_blocking(move || {
            producer
                .client()
                .fetch_metadata(Some(&topic), timeout)
                .map(drop)
                .map_err(|e| e.to_string())
        })
        .await
        .map_err(|e| e.to_string())?
    }

    /// Waits up to `timeout` for every queued event to be acknowledged (graceful shutdown).
    pub fn flush(&self, timeout: Duration) {
        let (producer, _) = self.producer();
        if let Err(e) = producer.flush(Timeout::After(timeout)) {
            tracing::warn!(error = %e, "producer flush incomplete at shutdown");
        }
    }
}
