//! Floodgate's consumer: reads the reservations topic and writes every decision to PostgreSQL.
//!
//! # Layout
//! - [`lib.rs`](self): [`Config`] and [`run`], the consume-apply-commit loop, in batches.
//! - [`store`]: the state machine and applying a batch of events to the database, idempotently.
//!
//! Order of effects, which is what makes delivery at-least-once and the result exactly-once: a
//! batch's rows (and its poison messages, to the dead-letter topic) are committed first, the Kafka
//! offsets after. A crash between the two redelivers the batch, and the writes keyed on the
//! reservation id and the event id absorb the repeat.

pub mod store;

use std::collections::HashMap;
use std::time::Duration;

use anyhow::Context as _;
use floodgate_contract::runtime::KafkaArgs;
use rdkafka::client::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{
    BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance, StreamConsumer,
};
use rdkafka::message::{Header, Message, OwnedHeaders, OwnedMessage};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

/// The migrations this service's tables come from (applied at start-up; idempotent).
///
/// Migrations a newer release already applied are tolerated, so that during a rolling upgrade an
/// instance of the previous release can still restart against the migrated database (every
/// migration here is additive for that reason).
pub fn migrator() -> sqlx::migrate::Migrator {
    let mut migrator = sqlx::migrate!("../migrations");
    migrator.set_ignore_missing(true);
    migrator
}

#[derive(Clone, Debug, clap::Args)]
pub struct Config {
    #[command(flatten)]
    pub kafka: KafkaArgs,
    /// Consumer group; instances in one group share the topic's partitions.
    #[arg(
        long,
        env = "FLOODGATE_CONSUMER_GROUP",
        default_value = "floodgate-consumer"
    )]
    pub group: String,
    /// Static group membership id (`group.instance.id`), stable across restarts and unique per
    /// instance. A restarted instance takes its partitions straight back instead of waiting for
    /// the broker to expire its previous incarnation; checked against Tansu, which otherwise
    /// keeps a `kill -9`ed member in the group and assigns it partitions no one reads.
    #[arg(long, env = "FLOODGATE_CONSUMER_INSTANCE_ID")]
    pub instance_id: Option<String>,
    /// librdkafka debug contexts (e.g. `cgrp,fetch`) for diagnosing the broker conversation.
    #[arg(long, env = "FLOODGATE_KAFKA_DEBUG")]
    pub kafka_debug: Option<String>,
    /// Where events that can never be applied go, with the reason in a header (default: the
    /// reservations topic's name with `.dlq`).
    #[arg(long, env = "FLOODGATE_DLQ_TOPIC")]
    pub dlq_topic: Option<String>,
    /// Most events applied in one database transaction.
    #[arg(long, env = "FLOODGATE_CONSUMER_BATCH", default_value_t = 500)]
    pub batch_max: usize,
    /// How long a batch waits for more events once it has one: a few milliseconds buy large
    /// batches under load and cost nothing when idle.
    #[arg(long, env = "FLOODGATE_CONSUMER_LINGER_MS", default_value_t = 10)]
    pub batch_linger_ms: u64,
    /// Least time between two offset commits. Each commit is a write on the broker; committing
    /// after every batch made the broker, not PostgreSQL, the bottleneck (BENCHMARKS.md). After
    /// a crash, at most this much is consumed again, and absorbed.
    #[arg(
        long,
        env = "FLOODGATE_CONSUMER_COMMIT_INTERVAL_MS",
        default_value_t = 1_000
    )]
    pub commit_interval_ms: u64,
}

impl Config {
    pub fn dlq_topic(&self) -> String {
        self.dlq_topic
            .clone()
            .unwrap_or_else(|| format!("{}.dlq", self.kafka.reservations_topic))
    }
}

/// How long to wait before retrying after PostgreSQL or the broker failed. Short enough to catch
/// up quickly after a blip; the offset is not committed meanwhile, so nothing is skipped.
const RETRY_DELAY: Duration = Duration::from_millis(500);

/// Consumes until `shutdown` is cancelled, then commits the offsets of everything already
/// written to the database.
pub async fn run(config: &Config, db: PgPool, shutdown: CancellationToken) -> anyhow::Result<()> {
    floodgate_contract::runtime::metrics();
    let mut client = ClientConfig::new();
    if let Some(id) = &config.instance_id {
        client.set("group.instance.id", id);
    }
    if let Some(debug) = &config.kafka_debug {
        client.set("debug", debug);
    }
    let consumer: StreamConsumer<GroupLog> = client
        .set("bootstrap.servers", &config.kafka.kafka_brokers)
        .set("group.id", &config.group)
        // Offsets are committed by hand, after the database commit, never on a timer.
        .set("enable.auto.commit", "false")
        // Small requests (fetches, commits) go out at once: with Nagle's algorithm each waited
        // for the previous one's delayed ACK, ~40 ms a batch (BENCHMARKS.md).
        .set("socket.nagle.disable", "true")
        // A new group starts from the beginning: every retained decision must reach the database.
        .set("auto.offset.reset", "earliest")
        .create_with_context(GroupLog)
        .context("creating the Kafka consumer")?;
    consumer
        .subscribe(&[&config.kafka.reservations_topic])
        .context("subscribing to the reservations topic")?;
    tracing::info!(topic = %config.kafka.reservations_topic, group = %config.group, "consumer started");

    let dlq: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", &config.kafka.kafka_brokers)
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .create()
        .context("creating the dead-letter producer")?;
    let dlq_topic = config.dlq_topic();
    let lag = tokio::spawn(report_lag(
        config.kafka.kafka_brokers.clone(),
        config.group.clone(),
        config.kafka.reservations_topic.clone(),
        shutdown.clone(),
    ));
    let linger = Duration::from_millis(config.batch_linger_ms);
    // Every offset whose batch is in the database, for the last (synchronous) commit at shutdown.
    let mut applied_offsets: HashMap<(String, i32), i64> = HashMap::new();
    let commit_interval = Duration::from_millis(config.commit_interval_ms);
    let mut last_commit = tokio::time::Instant::now();

    // Whether some applied offsets are not committed yet.
    let mut uncommitted = false;
    loop {
        // With offsets waiting, wait for more events only until they are due: a sale's last few
        // events must not stay uncommitted because nothing came after them (the lag would never
        // return to zero, and a restart would read them again).
        let idle_after = uncommitted.then(|| commit_interval.saturating_sub(last_commit.elapsed()));
        let batch = match next_batch(
            &consumer,
            config.batch_max.max(1),
            linger,
            &shutdown,
            idle_after,
        )
        .await
        {
            Next::Shutdown => break,
            Next::Idle => {
                last_commit = tokio::time::Instant::now();
                match consumer.commit(&offset_list(&applied_offsets), CommitMode::Sync) {
                    Ok(()) => uncommitted = false,
                    // Tried again after another interval.
                    Err(e) => tracing::warn!(error = %e, "offset commit failed"),
                }
                continue;
            }
            Next::Batch(batch) => batch,
        };
        metrics::histogram!("floodgate_consumer_batch_size").record(batch.len() as f64);
        let mut events = Vec::with_capacity(batch.len());
        let mut poison = Vec::new();
        for message in &batch {
            match store::decode(
                message.payload().unwrap_or_default(),
                message.partition(),
                message.offset(),
            ) {
                Ok(event) => events.push(event),
                Err(e) => poison.push((message, e.to_string())),
            }
        }
        let applying = std::time::Instant::now();
        let applied = loop {
            match apply(&db, &events).await {
                Ok(applied) => break applied,
                Err(e) => {
                    metrics::counter!("floodgate_consumer_db_retries_total").increment(1);
                    tracing::warn!(error = %e, "database write failed; retrying without committing");
                    tokio::select! {
                        _ = shutdown.cancelled() => {
                            lag.abort();
                            return commit_final(&consumer, &applied_offsets);
                        }
                        _ = tokio::time::sleep(RETRY_DELAY) => {}
                    }
                }
            }
        };
        for (index, reason) in applied.poison {
            let event = &events[index];
            let message = batch
                .iter()
                .find(|m| m.partition() == event.partition && m.offset() == event.offset)
                .expect("every event comes from a message of the batch");
            poison.push((message, reason));
        }
        for (message, reason) in &poison {
            // Not committed past until the dead-letter topic has it: a poison message is set
            // aside, never lost.
            loop {
                match dead_letter(&dlq, &dlq_topic, message, reason).await {
                    Ok(()) => break,
                    Err(e) => {
                        tracing::warn!(error = %e, "dead-letter topic unreachable; retrying");
                        tokio::select! {
                            _ = shutdown.cancelled() => {
                                lag.abort();
                                return commit_final(&consumer, &applied_offsets);
                            }
                            _ = tokio::time::sleep(RETRY_DELAY) => {}
                        }
                    }
                }
            }
            metrics::counter!("floodgate_consumer_poison_total").increment(1);
            tracing::error!(%reason, partition = message.partition(), offset = message.offset(), topic = %dlq_topic, "poison message sent to the dead-letter topic");
        }
        // Each event that moved a booking wrote one row; the rest (late, repeated, refund
        // progress) changed nothing but the audit trail.
        let outcome = &applied.outcome;
        metrics::counter!("floodgate_consumer_events_total", "outcome" => "changed")
            .increment(outcome.rows_written);
        metrics::counter!("floodgate_consumer_events_total", "outcome" => "unchanged")
            .increment(outcome.events_recorded.saturating_sub(outcome.rows_written));
        metrics::counter!("floodgate_consumer_rows_written_total")
            .increment(applied.outcome.rows_written);
        tracing::debug!(
            events = batch.len(),
            rows = applied.outcome.rows_written,
            apply_ms = applying.elapsed().as_millis() as u64,
            "batch applied"
        );
        for (partition, offset) in next_offsets(&batch) {
            let next = applied_offsets.entry(partition).or_insert(0);
            *next = (*next).max(offset);
        }
        uncommitted = true;
        // Offsets are committed at most once per interval, not per batch: each commit is a
        // write on the broker, and a redelivery after a crash is absorbed anyway. What is left
        // when events stop is committed once the consumer has been idle for the interval.
        if last_commit.elapsed() >= commit_interval {
            last_commit = tokio::time::Instant::now();
            // An asynchronous commit can still fail after it was queued, so `uncommitted` stays
            // set: once events stop, the idle commit (synchronous) makes sure of them.
            if let Err(e) = consumer.commit(&offset_list(&applied_offsets), CommitMode::Async) {
                // Not fatal: the next commit covers these offsets, and a redelivery is absorbed.
                tracing::warn!(error = %e, "offset commit failed");
            }
        }
    }
    lag.abort();
    commit_final(&consumer, &applied_offsets)
}

/// The outcome of applying a batch, with the events that turned out to be poison.
struct Applied {
    outcome: store::BatchOutcome,
    /// Index into the batch's events, and why.
    poison: Vec<(usize, String)>,
}

/// Applies the batch in one transaction. If that hits an event no retry can apply (a constraint
/// it violates), the events are applied one at a time instead, to set exactly that one aside.
async fn apply(db: &PgPool, events: &[store::Decoded]) -> Result<Applied, sqlx::Error> {
    match store::apply_batch(db, events).await {
        Ok(outcome) => Ok(Applied {
            outcome,
            poison: Vec::new(),
        }),
        Err(store::ApplyError::Db(e)) => Err(e),
        Err(store::ApplyError::Poison(_)) => {
            let mut applied = Applied {
                outcome: store::BatchOutcome::default(),
                poison: Vec::new(),
            };
            for (index, event) in events.iter().enumerate() {
                match store::apply_batch(db, std::slice::from_ref(event)).await {
                    Ok(one) => {
                        applied.outcome.rows_written += one.rows_written;
                        applied.outcome.events_recorded += one.events_recorded;
                    }
                    Err(store::ApplyError::Db(e)) => return Err(e),
                    Err(store::ApplyError::Poison(reason)) => applied.poison.push((index, reason)),
                }
            }
            Ok(applied)
        }
    }
}

/// What waiting for the next batch came to.
enum Next {
    Batch(Vec<OwnedMessage>),
    /// Nothing arrived within the idle time given.
    Idle,
    Shutdown,
}

/// Waits for one message (for at most `idle_after`, if given), then takes whatever else
/// arrives within `linger`, up to `max`.
async fn next_batch(
    consumer: &StreamConsumer<GroupLog>,
    max: usize,
    linger: Duration,
    shutdown: &CancellationToken,
    idle_after: Option<Duration>,
) -> Next {
    let idle = async {
        match idle_after {
            Some(after) => tokio::time::sleep(after).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(idle);
    let mut batch = Vec::new();
    while batch.is_empty() {
        let received = tokio::select! {
            _ = shutdown.cancelled() => return Next::Shutdown,
            _ = &mut idle => return Next::Idle,
            m = consumer.recv() => m,
        };
        match received {
            Ok(m) => batch.push(m.detach()),
            Err(e) => {
                tracing::warn!(error = %e, "kafka receive failed; retrying");
                tokio::time::sleep(RETRY_DELAY).await;
            }
        }
    }
    let until = tokio::time::Instant::now() + linger;
    while batch.len() < max {
        match tokio::time::timeout_at(until, consumer.recv()).await {
            Ok(Ok(m)) => batch.push(m.detach()),
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "kafka receive failed");
                break;
            }
            Err(_) => break,
        }
    }
    Next::Batch(batch)
}

/// The offsets to commit after `batch`: one past its last message, per partition.
fn next_offsets(batch: &[OwnedMessage]) -> HashMap<(String, i32), i64> {
    let mut next: HashMap<(String, i32), i64> = HashMap::new();
    for m in batch {
        let entry = next
            .entry((m.topic().to_owned(), m.partition()))
            .or_insert(0);
        *entry = (*entry).max(m.offset() + 1);
    }
    next
}

fn offset_list(next: &HashMap<(String, i32), i64>) -> TopicPartitionList {
    let mut list = TopicPartitionList::new();
    for ((topic, partition), offset) in next {
        let _ = list.add_partition_offset(topic, *partition, Offset::Offset(*offset));
    }
    list
}

/// Copies a poison message to the dead-letter topic, same key and payload, with why and where
/// from in headers; waits for the broker's acknowledgement.
async fn dead_letter(
    producer: &FutureProducer,
    topic: &str,
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
    let mut record = FutureRecord::to(topic)
        .payload(message.payload().unwrap_or_default())
        .headers(headers);
    if let Some(key) = message.key() {
        record = record.key(key);
    }
    producer
        .send(record, Duration::from_secs(10))
        .await
        .map(|_| ())
        .map_err(|(e, _)| e)
}

/// Publishes the group's lag (high watermark minus committed offset, per partition) every few
/// seconds, from a client of its own so the consuming loop never waits for it.
async fn report_lag(brokers: String, group: String, topic: String, shutdown: CancellationToken) {
    let client: Result<BaseConsumer, _> = ClientConfig::new()
        .set("bootstrap.servers", &brokers)
        .set("group.id", &group)
        .set("enable.auto.commit", "false")
        .create();
    let Ok(client) = client else {
        tracing::warn!("lag reporting unavailable");
        return;
    };
    let client = std::sync::Arc::new(client);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(LAG_INTERVAL) => {}
        }
        let (client, topic) = (client.clone(), topic.clone());
        let lags = tokio::task::spawn_blocking(move || lag_of(&client, &topic)).await;
        match lags {
            Ok(Ok(lags)) => {
                let mut total = 0;
                for (partition, lag) in lags {
                    total += lag;
                    metrics::gauge!("floodgate_consumer_lag", "partition" => partition.to_string())
                        .set(lag as f64);
                }
                metrics::gauge!("floodgate_consumer_lag_total").set(total as f64);
            }
            Ok(Err(e)) => tracing::debug!(error = %e, "lag not available"),
            Err(_) => {}
        }
    }
}

const LAG_INTERVAL: Duration = Duration::from_secs(5);

fn lag_of(
    client: &BaseConsumer,
    topic: &str,
) -> Result<Vec<(i32, i64)>, rdkafka::error::KafkaError> {
    let timeout = Duration::from_secs(5);
    let metadata = client.fetch_metadata(Some(topic), timeout)?;
    let mut list = TopicPartitionList::new();
    for t in metadata.topics() {
        for p in t.partitions() {
            list.add_partition(topic, p.id());
        }
    }
    let committed = client.committed_offsets(list, timeout)?;
    let mut lags = Vec::new();
    for element in committed.elements() {
        let (low, high) = client.fetch_watermarks(topic, element.partition(), timeout)?;
        let position = match element.offset() {
            Offset::Offset(o) => o,
            _ => low,
        };
        lags.push((element.partition(), (high - position).max(0)));
    }
    Ok(lags)
}

/// Logs the partitions this instance is given and loses, so an operator can see the group
/// spread over its members (and notice a group that never settles).
struct GroupLog;

impl ClientContext for GroupLog {}

impl ConsumerContext for GroupLog {
    fn post_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Assign(partitions) => {
                tracing::info!(partitions = partitions.count(), "partitions assigned")
            }
            Rebalance::Revoke(partitions) => {
                tracing::info!(partitions = partitions.count(), "partitions revoked")
            }
            Rebalance::Error(e) => tracing::warn!(error = %e, "rebalance failed"),
        }
    }
}

/// Commits, and waits for, the offsets of every batch already in the database: never the
/// consumer's position, which may be past a batch that was still being retried.
fn commit_final(
    consumer: &StreamConsumer<GroupLog>,
    applied: &HashMap<(String, i32), i64>,
) -> anyhow::Result<()> {
    if !applied.is_empty() {
        if let Err(e) = consumer.commit(&offset_list(applied), CommitMode::Sync) {
            tracing::warn!(error = %e, "final offset commit failed; events since the last commit will be redelivered");
        }
    }
    tracing::info!("consumer stopped");
    Ok(())
}
