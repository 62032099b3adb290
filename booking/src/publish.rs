//! Publishing events to Kafka, answering only once the broker has acknowledged them.
//!
//! The producer is idempotent with `acks=all`: a retried send inside librdkafka can neither
//! duplicate nor reorder one pool's events, and an ack means every in-sync replica has the event.
//!
//! The producer is also disposable: after a failed send it is replaced by a fresh one
//! ([`RenewableProducer`] says why). Nothing is lost by the swap: every event is in its pool's
//! outbox until acknowledged, and a request whose send failed has already been answered 503.
//!
//! A send waits for its acknowledgement at most the delivery timeout; the message itself may
//! stay in the producer's queue far longer (librdkafka's `message.timeout.ms`, five minutes in
//! Floodgate's producer defaults) and reach the broker late, which is harmless (the outbox and
//! the consumer's idempotence absorb a repeat). Why not drop it when its request gives up: a
//! message timing out in the queue makes librdkafka raise the idempotent producer's epoch, which
//! Tansu 0.6's sqlite engine cannot take (docs/runbook.md, "The broker's storage died"). Each
//! send also tells [`BrokerHealth`] how it went, and [`Publisher::watch`] probes a broker known
//! to be down.

use std::sync::Arc;
use std::time::{Duration, Instant};

use floodgate_platform::autopilot::window::Window;
use floodgate_platform::autopilot::MIN_REQUESTS;
use floodgate_platform::kafka::{KafkaArgs, RenewableProducer, Role};
use floodgate_platform::keys::pool_partition_key;
use rdkafka::error::KafkaError;
use rdkafka::producer::{FutureRecord, Producer};
use rdkafka::util::Timeout;
use tokio_util::sync::CancellationToken;

use crate::broker_health::{BrokerHealth, SendStarted, PROBE_EVERY};

/// How often a broker known to be down gets a fresh producer: well within librdkafka's five
/// minutes of `message.timeout.ms`, after which a queued message would raise the epoch.
const RENEW_WHILE_DOWN: Duration = Duration::from_secs(60);

/// How often a probe topic not found is looked for again (a metadata request for one topic).
const PROBE_TOPIC_RECHECK: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    #[error("the broker did not acknowledge the event: {0}")]
    NotAcked(#[from] KafkaError),
    #[error("the broker did not acknowledge the event within {0:?}")]
    TimedOut(Duration),
}

/// A cheap-to-clone handle on one shared, replaceable producer.
#[derive(Clone)]
pub struct Publisher {
    producer: RenewableProducer,
    topic: Arc<str>,
    /// Where the probe of a broker known to be down writes (see [`crate::broker_health`]).
    probe_topic: Arc<str>,
    /// How long a send waits for its acknowledgement.
    delivery_timeout: Duration,
    health: BrokerHealth,
    /// How long the broker took to acknowledge, for the admission autopilot (crate::health).
    acks: Arc<std::sync::Mutex<Window>>,
}

impl Publisher {
    /// `delivery_timeout` bounds how long one send waits for its ack, retries included;
    /// `probe_topic` takes the probes of a broker known to be down. The producer is configured
    /// by [`KafkaArgs::client`] (acks=all and idempotence among Floodgate's fixed defaults).
    pub fn new(
        kafka: &KafkaArgs,
        delivery_timeout: Duration,
        probe_topic: &str,
    ) -> anyhow::Result<Self> {
        let producer = RenewableProducer::new(kafka.client(Role::Producer, &[])?)?;
        let topic = kafka.reservations_topic.as_str();
        Ok(Self {
            producer,
            topic: Arc::from(topic),
            probe_topic: Arc::from(probe_topic),
            delivery_timeout,
            health: BrokerHealth::default(),
            acks: Arc::new(std::sync::Mutex::new(Window::new(
                floodgate_platform::autopilot::window::SPAN,
                floodgate_protocol::now_millis(),
            ))),
        })
    }

    /// The broker's p99 acknowledgement time over the last 5 to 10 s, once enough events were
    /// sent to judge one by.
    pub fn ack_p99_ms(&self, now_ms: i64) -> Option<f64> {
        let reading = self.acks.lock().expect("lock").read(now_ms);
        reading.p99_ms.filter(|_| reading.count >= MIN_REQUESTS)
    }

    /// What this instance knows of the broker's health.
    pub fn health(&self) -> &BrokerHealth {
        &self.health
    }

    /// Sends one event (an envelope's JSON, as the pool script wrote it to the outbox) keyed by
    /// its pool, and waits for the broker's acknowledgement.
    #[tracing::instrument(skip_all, fields(%sale, %pool))]
    pub async fn publish(&self, sale: &str, pool: &str, event: &str) -> Result<(), PublishError> {
        let key = pool_partition_key(sale, pool);
        let mut record = FutureRecord::to(&self.topic).key(&key).payload(event);
        // The request's trace goes on with the event, to the consumer's write (platform::trace).
        if let Some(headers) = floodgate_platform::trace::kafka_headers() {
            record = record.headers(headers);
        }
        let started = Instant::now();
        let sent = self.send(record).await;
        // From the send to the broker's acknowledgement (or the give-up), per outcome.
        let outcome = if sent.is_ok() { "acked" } else { "failed" };
        metrics::histogram!("floodgate_kafka_produce_duration_seconds", "outcome" => outcome)
            .record(started.elapsed().as_secs_f64());
        self.acks.lock().expect("lock").record(
            floodgate_protocol::now_millis(),
            started.elapsed(),
            sent.is_err(),
        );
        sent
    }

    /// Sends `record` and waits at most the delivery timeout for its acknowledgement, telling the
    /// broker's health how it went. An acknowledgement that comes after the timeout still tells
    /// it (the broker is slow, not down).
    async fn send<K, P>(&self, record: FutureRecord<'_, K, P>) -> Result<(), PublishError>
    where
        K: rdkafka::message::ToBytes + ?Sized,
        P: rdkafka::message::ToBytes + ?Sized,
    {
        let (producer, generation) = self.producer.get();
        let started = self.health.started();
        let mut delivery = match producer.send_result(record) {
            Ok(delivery) => delivery,
            Err((e, _)) => return Err(self.failed(started, generation, e)),
        };
        match tokio::time::timeout(self.delivery_timeout, &mut delivery).await {
            Ok(Ok(Ok(_))) => {
                self.health.acked(started);
                Ok(())
            }
            Ok(Ok(Err((e, _)))) => Err(self.failed(started, generation, e)),
            Ok(Err(_canceled)) => Err(self.failed(started, generation, KafkaError::Canceled)),
            Err(_) => {
                let e = PublishError::TimedOut(self.delivery_timeout);
                if self.health.failed(started, &e.to_string()) {
                    // Found down: a fresh producer, so nothing of this one ages in its queue
                    // to the epoch-raising timeout (RenewableProducer says why).
                    self.producer.renew(generation);
                }
                let health = self.health.clone();
                tokio::spawn(async move {
                    if let Ok(Ok(_)) = delivery.await {
                        health.acked(started);
                    }
                });
                Err(e)
            }
        }
    }

    /// A send that failed with `e`: the broker's health is told (unless the broker itself
    /// refused it, which shows it answers: a topic it does not have, a write not allowed), and
    /// the producer is replaced.
    fn failed(&self, started: SendStarted, generation: u64, e: KafkaError) -> PublishError {
        use rdkafka::types::RDKafkaErrorCode as Code;
        let answered = matches!(
            e.rdkafka_error_code(),
            Some(Code::UnknownTopicOrPartition | Code::TopicAuthorizationFailed)
        );
        if answered {
            tracing::warn!(error = %e, "the broker refused a send (a topic missing or not allowed)");
            self.health.acked(started);
        } else {
            self.health.failed(started, &e.to_string());
            self.producer.renew(generation);
        }
        PublishError::NotAcked(e)
    }

    /// While the broker is known to be down, a small record to the probe topic every
    /// [`PROBE_EVERY`]: its acknowledgement brings the broker back (runs until `shutdown`). The
    /// producer is replaced every [`RENEW_WHILE_DOWN`] meanwhile, so no message waits in its
    /// queue long enough to time out there. A probe topic not found is looked for again every
    /// [`PROBE_TOPIC_RECHECK`] until it is: on a first install the setup Job makes it after the
    /// services start.
    pub async fn watch(self, shutdown: CancellationToken) {
        let mut probe_topic = self.check_probe_topic(true).await;
        let mut checked = Instant::now();
        let mut every = floodgate_platform::service::Every::new(PROBE_EVERY, shutdown);
        let mut renewed = Instant::now();
        while every.tick().await {
            // Not while the broker is down: the look would wait out its timeout and hold up
            // the probes that notice the broker's return.
            let due = checked.elapsed() >= PROBE_TOPIC_RECHECK;
            if !probe_topic && due && !self.health.is_down() {
                probe_topic = self.check_probe_topic(false).await;
                checked = Instant::now();
            }
            if !self.health.is_down() {
                renewed = Instant::now();
                continue;
            }
            if renewed.elapsed() >= RENEW_WHILE_DOWN {
                let (_, generation) = self.producer.get();
                self.producer.renew(generation);
                renewed = Instant::now();
            }
            let payload = format!(r#"{{"probe_at_ms":{}}}"#, floodgate_protocol::now_millis());
            let record = FutureRecord::to(&self.probe_topic)
                .key("probe")
                .payload(payload.as_str());
            match self.send(record).await {
                Ok(()) => metrics::counter!("floodgate_kafka_probes_total", "outcome" => "acked")
                    .increment(1),
                Err(e) => {
                    metrics::counter!("floodgate_kafka_probes_total", "outcome" => "failed")
                        .increment(1);
                    tracing::debug!(error = %e, "broker probe failed");
                }
            }
        }
    }

    /// Whether the probe topic exists (a broker that does not answer at start is taken to have
    /// it: only a topic the broker says it lacks is looked for again); says loudly at start
    /// (`first`) if it is missing: a broker found down could then only be found back by
    /// requests let through again (`crate::broker_health::HALF_OPEN_AFTER`).
    async fn check_probe_topic(&self, first: bool) -> bool {
        let (producer, _) = self.producer.get();
        let topic = self.probe_topic.clone();
        let found = tokio::task::spawn_blocking(move || {
            producer
                .client()
                .fetch_metadata(Some(&topic), Duration::from_secs(10))
                .map(|m| {
                    m.topics()
                        .iter()
                        .any(|t| t.name() == &*topic && t.error().is_none())
                })
        })
        .await
        .map_err(|e| e.to_string())
        .and_then(|checked| checked.map_err(|e| e.to_string()));
        if let Ok(exists) = found {
            let missing = if exists { 0.0 } else { 1.0 };
            metrics::gauge!("floodgate_kafka_probe_topic_missing").set(missing);
        }
        match found {
            Ok(true) => {
                if !first {
                    tracing::info!(topic = %self.probe_topic, "the probe topic exists now");
                }
                true
            }
            Ok(false) => {
                if first {
                    tracing::error!(
                        topic = %self.probe_topic,
                        "the probe topic does not exist: run `floodgate-booking topics ensure` (a broker found down is then noticed back only by a trial request every 30 s)"
                    );
                }
                false
            }
            Err(e) if first => {
                tracing::warn!(error = %e, "could not check the probe topic");
                metrics::gauge!("floodgate_kafka_probe_topic_missing").set(0.0);
                true
            }
            // Still missing, as far as anyone knows: looked for again.
            Err(e) => {
                tracing::debug!(error = %e, "could not check the probe topic");
                false
            }
        }
    }

    /// Whether the broker takes events (readiness): known down, or its metadata not answered
    /// within `timeout`, is an `Err` saying why.
    pub async fn reachable(&self, timeout: Duration) -> Result<(), String> {
        if let Some(cause) = self.health.down_because() {
            return Err(format!("the broker does not acknowledge events: {cause}"));
        }
        let (producer, _) = self.producer.get();
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
        let (producer, _) = self.producer.get();
        if let Err(e) = producer.flush(Timeout::After(timeout)) {
            tracing::warn!(error = %e, "producer flush incomplete at shutdown");
        }
    }
}
