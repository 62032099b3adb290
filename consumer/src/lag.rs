//! The consumer group's lag (high watermark minus committed offset, per partition), published
//! as metrics every few seconds: how far PostgreSQL is behind the decisions.

use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Offset, TopicPartitionList};
use tokio_util::sync::CancellationToken;

/// Publishes the group's lag (high watermark minus committed offset, per partition) every few
/// seconds, from a client of its own so the consuming loop never waits for it.
pub async fn report_lag(
    brokers: String,
    group: String,
    topic: String,
    shutdown: CancellationToken,
) {
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
