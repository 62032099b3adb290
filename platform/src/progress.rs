//! How far the consumer group has applied the reservations topic, as PostgreSQL keeps it
//! (`consumer_partitions`, written by the consumer in each batch's own transaction). Read by the
//! consumer's lag and by the booking service's commands that wait for the Kafka tail.

use std::collections::HashMap;

/// Each partition's next offset to apply, for the partitions the group has applied anything of.
pub async fn stored_offsets(
    db: &sqlx::PgPool,
    group: &str,
    topic: &str,
) -> sqlx::Result<HashMap<i32, i64>> {
    let rows: Vec<(i32, Option<i64>)> = sqlx::query_as(
        "select kafka_partition, next_offset from consumer_partitions
         where group_id = $1 and topic = $2",
    )
    .bind(group)
    .bind(topic)
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .filter_map(|(p, o)| o.map(|o| (p, o)))
        .collect())
}
