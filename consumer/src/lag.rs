//! The consumer group's lag (high watermark minus the stored offset, per partition), published
//! as metrics every few seconds: how far PostgreSQL is behind the decisions.

use std::time::Duration;

use floodgate_platform::kafka::{KafkaArgs, Role};
use rdkafka::consumer::{BaseConsumer, Consumer};
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

/// Publishes the group's lag every few seconds, from a Kafka client of its own so the consuming
/// loop never waits for it. The offsets are the group's in PostgreSQL (`membership`).
pub async fn report_lag(kafka: KafkaArgs, db: PgPool, group: String, shutdown: CancellationToken) {
    let topic = kafka.reservations_topic.clone();
    let client = kafka
        .client(Role::Admin, &[])
        .map(|c| c.create::<BaseConsumer>());
    let Ok(Ok(client)) = client else {
        tracing::warn!("lag reporting unavailable");
        return;
    };
    let client = std::sync::Arc::new(client);
    let mut first = true;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            // The first report at once, the next ones every interval.
            _ = tokio::time::sleep(if first { Duration::ZERO } else { LAG_INTERVAL }) => {}
        }
        first = false;
        let stored = match floodgate_platform::progress::stored_offsets(&db, &group, &topic).await {
            Ok(stored) => stored,
            Err(e) => {
                tracing::debug!(error = %e, "lag not available");
                continue;
            }
        };
        let (client, topic) = (client.clone(), topic.clone());
        let lags = tokio::task::spawn_blocking(move || lag_of(&client, &topic, &stored)).await;
        match lags {
            Ok(Ok(lags)) => {
                let mut total = 0;
                for (partition, lag) in lags {
                    total += lag;
                    metrics::gauge!("floodgate_consumer_lag", "partition" => partition.to_string())
                        .set(lag as f64);
                }
                metrics::gauge!("floodgate_consumer_lag_all_partitions").set(total as f64);
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
    stored: &std::collections::HashMap<i32, i64>,
) -> Result<Vec<(i32, i64)>, rdkafka::error::KafkaError> {
    let timeout = Duration::from_secs(5);
    let metadata = client.fetch_metadata(Some(topic), timeout)?;
    let mut lags = Vec::new();
    for t in metadata.topics() {
        for p in t.partitions() {
            let (low, high) = client.fetch_watermarks(topic, p.id(), timeout)?;
            let at = stored.get(&p.id()).copied().unwrap_or(low);
            lags.push((p.id(), (high - at).max(0)));
        }
    }
    Ok(lags)
}
