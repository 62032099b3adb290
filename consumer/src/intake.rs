//! Taking events from the reservations topic: the partitions this member holds (read from
//! the offsets the group stored in PostgreSQL, `membership`), and batches (one message, then
//! whatever else arrives within the linger).

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use floodgate_platform::kafka::Role;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::message::{Message, OwnedMessage};
use rdkafka::{Offset, TopicPartitionList};
use tokio_util::sync::CancellationToken;

use crate::membership::Lease;
use crate::{Config, RETRY_DELAY};

/// A Kafka client that reads only the partitions it is given ([`assign`]): no Kafka group
/// membership, no offsets committed to Kafka (PostgreSQL keeps them).
pub fn connect(config: &Config) -> anyhow::Result<StreamConsumer> {
    // group.id is required by the client even unsubscribed; nothing is ever committed under it.
    // The rest (no auto commit, Nagle off, earliest on a lapsed offset) are the consumer
    // defaults of floodgate_platform::kafka.
    config
        .kafka
        .client(Role::Consumer, &[("group.id", config.group.clone())])?
        .create()
        .context("creating the Kafka consumer")
}

/// The number of partitions of the reservations topic (asked on a blocking thread: the client's
/// metadata call waits for the broker).
pub async fn partitions(consumer: &Arc<StreamConsumer>, topic: &str) -> anyhow::Result<i32> {
    let (client, name) = (consumer.clone(), topic.to_owned());
    let metadata = tokio::task::spawn_blocking(move || {
        client.fetch_metadata(Some(&name), Duration::from_secs(10))
    })
    .await?
    .context("reading the topic's partitions")?;
    let count = metadata
        .topics()
        .iter()
        .find(|t| t.name() == topic)
        .map_or(0, |t| t.partitions().len());
    anyhow::ensure!(
        count > 0,
        "topic {topic} has no partitions (does it exist?)"
    );
    Ok(count as i32)
}

/// Reads exactly `owned`, each from the offset the group stored for it: what was fetched before
/// and not applied is read again, so a batch rolled back is never skipped.
pub fn assign(
    consumer: &StreamConsumer,
    topic: &str,
    owned: &std::collections::BTreeMap<i32, Lease>,
) -> anyhow::Result<()> {
    let mut list = TopicPartitionList::new();
    for (partition, lease) in owned {
        let from = lease.next_offset.map_or(Offset::Beginning, Offset::Offset);
        list.add_partition_offset(topic, *partition, from)
            .context("listing a partition")?;
    }
    consumer.assign(&list).context("assigning partitions")?;
    tracing::info!(partitions = ?owned.keys().collect::<Vec<_>>(), "reading partitions");
    Ok(())
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
    consumer: &StreamConsumer,
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

/// The offset after `batch`'s last message, per partition: where each partition's stored
/// offset moves once the batch is applied.
pub fn next_offsets(batch: &[OwnedMessage]) -> std::collections::HashMap<i32, i64> {
    let mut next = std::collections::HashMap::new();
    for m in batch {
        let entry = next.entry(m.partition()).or_insert(0);
        *entry = (*entry).max(m.offset() + 1);
    }
    next
}
