//! Taking events from the reservations topic: the group membership, batches (one message,
//! then whatever else arrives within the linger), and committing the offsets of batches that are
//! in the database, at most once per interval.

use std::collections::HashMap;
use std::time::Duration;

use anyhow::Context as _;
use rdkafka::client::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{
    BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance, StreamConsumer,
};
use rdkafka::message::{Message, OwnedMessage};
use rdkafka::{Offset, TopicPartitionList};
use tokio_util::sync::CancellationToken;

use crate::{Config, RETRY_DELAY};

/// Joins the consumer group and subscribes to the reservations topic.
pub fn subscribe(config: &Config) -> anyhow::Result<StreamConsumer<GroupLog>> {
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
        .set("session.timeout.ms", config.session_timeout_ms.to_string())
        // Heartbeats well inside the session, so one late heartbeat never costs the partitions.
        .set(
            "heartbeat.interval.ms",
            (config.session_timeout_ms / 3)
                .clamp(100, 3_000)
                .to_string(),
        )
        .create_with_context(GroupLog)
        .context("creating the Kafka consumer")?;
    consumer
        .subscribe(&[&config.kafka.reservations_topic])
        .context("subscribing to the reservations topic")?;
    tracing::info!(topic = %config.kafka.reservations_topic, group = %config.group, "consumer started");
    Ok(consumer)
}

/// What waiting for the next batch came to.
pub enum Next {
    Batch(Vec<OwnedMessage>),
    /// Nothing arrived within the idle time given.
    Idle,
    Shutdown,
}

/// Waits for one message (for at most `idle_after`, if given), then takes whatever else
/// arrives within `linger`, up to `max`.
pub async fn next_batch(
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

/// Keeps only the offsets of partitions in `assigned`. A partition taken away in a rebalance may
/// have moved on under its new owner; committing this instance's older offset for it later would
/// move the group back (the events would be applied again: harmless, but the lag would jump).
fn keep_assigned(
    applied: &mut HashMap<(String, i32), i64>,
    assigned: &std::collections::HashSet<(String, i32)>,
) {
    applied.retain(|partition, _| assigned.contains(partition));
}

/// The partitions this instance holds now.
fn assignment(
    consumer: &StreamConsumer<GroupLog>,
) -> Option<std::collections::HashSet<(String, i32)>> {
    match consumer.assignment() {
        Ok(list) => Some(
            list.elements()
                .iter()
                .map(|e| (e.topic().to_owned(), e.partition()))
                .collect(),
        ),
        Err(e) => {
            tracing::warn!(error = %e, "the partitions assigned are unknown; commit postponed");
            None
        }
    }
}

fn offset_list(next: &HashMap<(String, i32), i64>) -> TopicPartitionList {
    let mut list = TopicPartitionList::new();
    for ((topic, partition), offset) in next {
        let _ = list.add_partition_offset(topic, *partition, Offset::Offset(*offset));
    }
    list
}

/// The offsets of every batch already in the database, and when they were last committed.
pub struct Offsets {
    applied: HashMap<(String, i32), i64>,
    interval: Duration,
    last_commit: tokio::time::Instant,
    /// Whether some applied offsets are not committed yet.
    uncommitted: bool,
}

impl Offsets {
    pub fn new(interval: Duration) -> Self {
        Self {
            applied: HashMap::new(),
            interval,
            last_commit: tokio::time::Instant::now(),
            uncommitted: false,
        }
    }

    /// How long to wait for more events before committing what is waiting: a sale's last few
    /// events must not stay uncommitted because nothing came after them (the lag would never
    /// return to zero, and a restart would read them again). `None`: nothing is waiting.
    pub fn idle_after(&self) -> Option<Duration> {
        self.uncommitted
            .then(|| self.interval.saturating_sub(self.last_commit.elapsed()))
    }

    /// Commits what is waiting, and waits for the broker (the consumer is idle).
    pub fn commit_idle(&mut self, consumer: &StreamConsumer<GroupLog>) {
        self.last_commit = tokio::time::Instant::now();
        let Some(assigned) = assignment(consumer) else {
            return;
        };
        keep_assigned(&mut self.applied, &assigned);
        match consumer.commit(&offset_list(&self.applied), CommitMode::Sync) {
            Ok(()) => self.uncommitted = false,
            // Tried again after another interval.
            Err(e) => tracing::warn!(error = %e, "offset commit failed"),
        }
    }

    /// Records that `batch` is in the database, and commits if the interval has passed.
    ///
    /// Offsets are committed at most once per interval, not per batch: each commit is a write
    /// on the broker, and a redelivery after a crash is absorbed anyway. What is left when
    /// events stop is committed once the consumer has been idle for the interval.
    pub fn applied(&mut self, batch: &[OwnedMessage], consumer: &StreamConsumer<GroupLog>) {
        for (partition, offset) in next_offsets(batch) {
            let next = self.applied.entry(partition).or_insert(0);
            *next = (*next).max(offset);
        }
        self.uncommitted = true;
        if self.last_commit.elapsed() >= self.interval {
            self.last_commit = tokio::time::Instant::now();
            let Some(assigned) = assignment(consumer) else {
                return;
            };
            keep_assigned(&mut self.applied, &assigned);
            // An asynchronous commit can still fail after it was queued, so `uncommitted` stays
            // set: once events stop, the idle commit (synchronous) makes sure of them.
            if let Err(e) = consumer.commit(&offset_list(&self.applied), CommitMode::Async) {
                // Not fatal: the next commit covers these offsets, and a redelivery is absorbed.
                tracing::warn!(error = %e, "offset commit failed");
            }
        }
    }

    /// Commits, and waits for, the offsets of every batch already in the database: never the
    /// consumer's position, which may be past a batch that was still being retried.
    pub fn commit_final(&mut self, consumer: &StreamConsumer<GroupLog>) {
        if let Some(assigned) = assignment(consumer) {
            keep_assigned(&mut self.applied, &assigned);
        }
        if !self.applied.is_empty() {
            if let Err(e) = consumer.commit(&offset_list(&self.applied), CommitMode::Sync) {
                tracing::warn!(error = %e, "final offset commit failed; events since the last commit will be redelivered");
            }
        }
        tracing::info!("consumer stopped");
    }
}

/// Logs the partitions this instance is given and loses, so an operator can see the group
/// spread over its members (and notice a group that never settles).
pub struct GroupLog;

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_of_partitions_taken_away_are_never_committed() {
        let part = |p: i32| ("t".to_owned(), p);
        let mut applied: HashMap<(String, i32), i64> =
            [(part(0), 10), (part(1), 20), (part(2), 30)].into();
        // A rebalance gave partition 1 to another member, and this one got partition 3.
        let assigned = [part(0), part(2), part(3)].into();
        keep_assigned(&mut applied, &assigned);
        assert_eq!(applied, [(part(0), 10), (part(2), 30)].into());
        let list = offset_list(&applied);
        assert_eq!(list.count(), 2);
        assert!(list.find_partition("t", 1).is_none());
    }
}
