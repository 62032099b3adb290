//! Floodgate's consumer: reads the reservations topic and writes every decision to PostgreSQL.
//!
//! # Layout
//! - [`lib.rs`](self): [`Config`] and [`run`], the consume-apply-commit loop, in batches, and
//!   the one way a step is retried until it is done.
//! - `intake`: the group membership, batching, and committing offsets.
//! - [`store`]: the state machine and applying a batch of events to the database, idempotently.
//! - `dead_letter`: the topic where events that can never be applied are set aside.
//! - `lag`: the group's lag, published as metrics.
//!
//! Order of effects, which is what makes delivery at-least-once and the result exactly-once: a
//! batch's rows (and its poison messages, to the dead-letter topic) are committed first, the Kafka
//! offsets after. A crash between the two redelivers the batch, and the writes keyed on the
//! reservation id and the event id absorb the repeat.

mod dead_letter;
mod intake;
mod lag;
pub mod store;

use std::time::Duration;

use floodgate_contract::runtime::KafkaArgs;
use rdkafka::message::{Message, OwnedMessage};
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use dead_letter::DeadLetters;
use intake::{next_batch, Next, Offsets};

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
    /// How long the group waits for a member it has not heard from before it gives the
    /// member's partitions to the others (`session.timeout.ms`). A killed instance's partitions
    /// wait this long; 45 s is librdkafka's default, a few seconds suit a test.
    #[arg(
        long,
        env = "FLOODGATE_CONSUMER_SESSION_TIMEOUT_MS",
        default_value_t = 45_000
    )]
    pub session_timeout_ms: u64,
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
pub(crate) const RETRY_DELAY: Duration = Duration::from_millis(500);

/// Consumes until `shutdown` is cancelled, then commits the offsets of everything already
/// written to the database.
pub async fn run(config: &Config, db: PgPool, shutdown: CancellationToken) -> anyhow::Result<()> {
    floodgate_contract::runtime::metrics();
    let consumer = intake::subscribe(config)?;
    let dead_letters = DeadLetters::new(&config.kafka.kafka_brokers, config.dlq_topic())?;
    let lag = tokio::spawn(lag::report_lag(
        config.kafka.kafka_brokers.clone(),
        config.group.clone(),
        config.kafka.reservations_topic.clone(),
        shutdown.clone(),
    ));
    let linger = Duration::from_millis(config.batch_linger_ms);
    let mut offsets = Offsets::new(Duration::from_millis(config.commit_interval_ms));
    loop {
        let max = config.batch_max.max(1);
        let next = next_batch(&consumer, max, linger, &shutdown, offsets.idle_after()).await;
        let batch = match next {
            Next::Shutdown => break,
            Next::Idle => {
                offsets.commit_idle(&consumer);
                continue;
            }
            Next::Batch(batch) => batch,
        };
        // Shut down while retrying: the batch is not committed, so it is read again.
        if handle(&db, &dead_letters, &batch, &shutdown)
            .await
            .is_none()
        {
            break;
        }
        offsets.applied(&batch, &consumer);
    }
    lag.abort();
    offsets.commit_final(&consumer);
    Ok(())
}

/// Puts one batch in the database, and its poison messages on the dead-letter topic, retrying
/// each until it is done; `None` if shut down first.
async fn handle(
    db: &PgPool,
    dead_letters: &DeadLetters,
    batch: &[OwnedMessage],
    shutdown: &CancellationToken,
) -> Option<()> {
    metrics::histogram!("floodgate_consumer_batch_size").record(batch.len() as f64);
    let mut events = Vec::with_capacity(batch.len());
    let mut poison = Vec::new();
    for message in batch {
        let payload = message.payload().unwrap_or_default();
        match store::decode(payload, message.partition(), message.offset()) {
            Ok(event) => events.push(event),
            Err(e) => poison.push((message, e.to_string())),
        }
    }
    let applying = std::time::Instant::now();
    let applied = until_done(
        shutdown,
        || apply(db, &events),
        |e| {
            metrics::counter!("floodgate_consumer_db_retries_total").increment(1);
            tracing::warn!(error = %e, "database write failed; retrying without committing");
        },
    )
    .await?;
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
        until_done(
            shutdown,
            || dead_letters.send(message, reason),
            |e| {
                tracing::warn!(error = %e, "dead-letter topic unreachable; retrying");
            },
        )
        .await?;
        metrics::counter!("floodgate_consumer_poison_total").increment(1);
        tracing::error!(%reason, partition = message.partition(), offset = message.offset(), topic = %dead_letters.topic(), "poison message sent to the dead-letter topic");
    }
    // Each event that moved a booking wrote one row; the rest (late, repeated, refund
    // progress) changed nothing but the audit trail.
    let outcome = &applied.outcome;
    metrics::counter!("floodgate_consumer_events_total", "outcome" => "changed")
        .increment(outcome.rows_written);
    metrics::counter!("floodgate_consumer_events_total", "outcome" => "unchanged")
        .increment(outcome.events_recorded.saturating_sub(outcome.rows_written));
    metrics::counter!("floodgate_consumer_rows_written_total").increment(outcome.rows_written);
    tracing::debug!(
        events = batch.len(),
        rows = outcome.rows_written,
        apply_ms = applying.elapsed().as_millis() as u64,
        "batch applied"
    );
    Some(())
}

/// Runs `attempt` until it succeeds, telling `failed` of each failure and waiting
/// [`RETRY_DELAY`] before the next; `None` if `shutdown` comes first. Nothing is committed past
/// an attempt that has not succeeded, so giving up at shutdown loses nothing.
async fn until_done<T, E, Attempt>(
    shutdown: &CancellationToken,
    mut attempt: impl FnMut() -> Attempt,
    failed: impl Fn(&E),
) -> Option<T>
where
    Attempt: std::future::Future<Output = Result<T, E>>,
{
    loop {
        match attempt().await {
            Ok(done) => return Some(done),
            Err(e) => failed(&e),
        }
        tokio::select! {
            _ = shutdown.cancelled() => return None,
            _ = tokio::time::sleep(RETRY_DELAY) => {}
        }
    }
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
