//! The consumer group's lag (high watermark minus the stored offset, per partition), published
//! every second as metrics and as the group's row of `consumer_lag`: how far PostgreSQL is behind
//! the decisions. The booking services read that row into each sale's health summary, for the
//! sale's admission autopilot (`floodgate_platform::autopilot`).

use std::time::Duration;

use floodgate_platform::kafka::{KafkaArgs, Role};
use rdkafka::consumer::{BaseConsumer, Consumer};
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

/// Publishes the group's lag every second, from a Kafka client of its own so the consuming
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
                if let Err(e) = record(&db, &group, total).await {
                    tracing::debug!(error = %e, "lag not recorded");
                }
            }
            Ok(Err(e)) => tracing::debug!(error = %e, "lag not available"),
            Err(_) => {}
        }
    }
}

/// Every second: the autopilot judges a summary older than a few seconds stale.
const LAG_INTERVAL: Duration = Duration::from_secs(1);

/// Writes the group's lag, measured now, as its row of `consumer_lag` (every consumer of the
/// group measures the same whole-group figure, so the last writer's is as good as any).
async fn record(db: &PgPool, group: &str, lag: i64) -> Result<(), sqlx::Error> {
    sqlx::query(
        "insert into consumer_lag (consumer_group, lag, measured_at) values ($1, $2, now())
         on conflict (consumer_group) do update set lag = excluded.lag, measured_at = excluded.measured_at",
    )
    .bind(group)
    .bind(lag.max(0))
    .execute(db)
    .await
    .map(|_| ())
}

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
