//! Floodgate's consumer: reads the reservations topic and writes every decision to PostgreSQL.
//!
//! # Layout
//! - [`lib.rs`](self): [`Config`] and [`run`], the consume-apply-commit loop.
//! - [`store`]: applying one event to the database, idempotently.
//!
//! Order of effects, which is what makes delivery at-least-once and the result exactly-once: the
//! event's row is committed in PostgreSQL first, the Kafka offset after. A crash between the two
//! redelivers the event, and the insert keyed on the reservation id absorbs the repeat.

pub mod store;

use std::time::Duration;

use anyhow::Context as _;
use floodgate_contract::runtime::KafkaArgs;
use rdkafka::client::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{
    BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance, StreamConsumer,
};
use rdkafka::message::Message;
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
        // A new group starts from the beginning: every retained decision must reach the database.
        .set("auto.offset.reset", "earliest")
        .create_with_context(GroupLog)
        .context("creating the Kafka consumer")?;
    consumer
        .subscribe(&[&config.kafka.reservations_topic])
        .context("subscribing to the reservations topic")?;
    tracing::info!(topic = %config.kafka.reservations_topic, group = %config.group, "consumer started");

    loop {
        let message = tokio::select! {
            _ = shutdown.cancelled() => break,
            message = consumer.recv() => message,
        };
        let message = match message {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!(error = %e, "kafka receive failed; retrying");
                tokio::time::sleep(RETRY_DELAY).await;
                continue;
            }
        };
        let payload = message.payload().unwrap_or_default();
        loop {
            match store::apply(&db, payload).await {
                Ok(outcome) => {
                    tracing::debug!(?outcome, offset = message.offset(), "event applied");
                    let label = if outcome == store::Applied::Changed {
                        "changed"
                    } else {
                        "unchanged"
                    };
                    metrics::counter!("floodgate_consumer_events_total", "outcome" => label)
                        .increment(1);
                    break;
                }
                Err(store::ApplyError::Poison(reason)) => {
                    metrics::counter!("floodgate_consumer_poison_total").increment(1);
                    // A dead-letter topic takes these in a later step; for now the reason is
                    // logged loudly and the partition moves on rather than stalling every pool
                    // behind one unreadable message.
                    tracing::error!(%reason, partition = message.partition(), offset = message.offset(), "poison message skipped");
                    break;
                }
                Err(store::ApplyError::Db(e)) => {
                    metrics::counter!("floodgate_consumer_db_retries_total").increment(1);
                    tracing::warn!(error = %e, "database write failed; retrying without committing");
                    tokio::select! {
                        _ = shutdown.cancelled() => return commit_final(&consumer),
                        _ = tokio::time::sleep(RETRY_DELAY) => {}
                    }
                }
            }
        }
        if let Err(e) = consumer.commit_message(&message, CommitMode::Async) {
            // Not fatal: the next commit covers this offset, and a redelivery is absorbed.
            tracing::warn!(error = %e, "offset commit failed");
        }
    }
    commit_final(&consumer)
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

fn commit_final(consumer: &StreamConsumer<GroupLog>) -> anyhow::Result<()> {
    // Only offsets of events already committed to the database were ever stored.
    match consumer.commit_consumer_state(CommitMode::Sync) {
        Ok(()) => {}
        // Nothing consumed yet: there is no offset to commit.
        Err(rdkafka::error::KafkaError::ConsumerCommit(
            rdkafka::types::RDKafkaErrorCode::NoOffset,
        )) => {}
        Err(e) => {
            tracing::warn!(error = %e, "final offset commit failed; events since the last commit will be redelivered")
        }
    }
    tracing::info!("consumer stopped");
    Ok(())
}
