//! A producer that is replaced after a failed send: every producer Floodgate runs (the booking
//! service's events, the consumer's dead letters) holds one.
//!
//! Why: an idempotent producer whose send failed may be unable to send again, and may carry a
//! raised epoch. librdkafka raises its own epoch after a failed batch (a broker error, a message
//! timing out in its queue) and sends the next batch under it. A broker that forgot the producer
//! (restarted empty) then refuses every send, and Tansu 0.6's sqlite engine panics on the first
//! batch of an epoch it never issued, leaving a broker whose port answers while every request
//! fails (docs/runbook.md, "The broker's storage died"). A fresh producer asks the broker for a
//! new id, and the old one is dropped with its queue purged, so no batch of the raised epoch
//! reaches a broker restarted meanwhile. Nothing is lost: the caller keeps what it sent until it
//! is acknowledged (the booking service's outboxes; the consumer does not move past a poison
//! message until its dead letter is acknowledged).

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::producer::FutureProducer;

/// Least age of a producer before a failure replaces it: a burst of failures (every send in
/// flight when the broker went) replaces it once, and a broker that stays down sees a new
/// producer at most this often.
pub const RENEW_AFTER: Duration = Duration::from_secs(1);

struct Current {
    producer: FutureProducer,
    created: Instant,
    generation: u64,
}

/// A cheap-to-clone handle on one shared, replaceable producer.
#[derive(Clone)]
pub struct RenewableProducer {
    config: Arc<ClientConfig>,
    current: Arc<RwLock<Current>>,
}

impl RenewableProducer {
    /// Creates the first producer from `config` (kept to create the next ones).
    pub fn new(config: ClientConfig) -> rdkafka::error::KafkaResult<Self> {
        let producer: FutureProducer = config.create()?;
        Ok(Self {
            config: Arc::new(config),
            current: Arc::new(RwLock::new(Current {
                producer,
                created: Instant::now(),
                generation: 0,
            })),
        })
    }

    /// The producer to send with now, and its generation (to name it to [`Self::renew`]).
    pub fn get(&self) -> (FutureProducer, u64) {
        let current = self.current.read().unwrap_or_else(|e| e.into_inner());
        (current.producer.clone(), current.generation)
    }

    /// A send with the producer of `generation` failed: replaces it with a fresh one, unless it
    /// is younger than [`RENEW_AFTER`] or already replaced. Call it from a Tokio runtime: the old
    /// producer is dropped on a blocking thread (dropping purges its queue and waits a moment
    /// for the purge to be reported).
    pub fn renew(&self, generation: u64) {
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
            metrics::counter!("floodgate_kafka_producers_renewed_total").increment(1);
            std::mem::replace(
                &mut *current,
                Current {
                    producer,
                    created: Instant::now(),
                    generation: generation + 1,
                },
            )
        };
        tokio::task::spawn_blocking(move || drop(old));
    }
}
