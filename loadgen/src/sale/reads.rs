//! What a run reads back at its end to check itself: each pool's counters in Redis, the booking
//! rows in PostgreSQL, and everyone's place in line (the lottery's, for pre-queue tickets).

use std::net::SocketAddr;

use anyhow::Context as _;
use floodgate_platform::keys::Keys;
use floodgate_platform::state::PoolCounts;
use floodgate_protocol::api::room::DrawRecord;
use serde::Serialize;

use super::person::{Outcome, Person};

/// One pool's counters in Redis (`None`: missing).
#[derive(Clone, Debug, Serialize)]
pub struct PoolCounters {
    pub pool: String,
    pub capacity: i64,
    pub available: Option<i64>,
    pub held: i64,
    pub sold: Option<i64>,
}

pub(crate) async fn pool_counters(
    redis: &mut redis::aio::MultiplexedConnection,
    keys: &Keys,
    sale: &str,
    pools: &[(String, i32)],
) -> anyhow::Result<Vec<PoolCounters>> {
    let mut counters = Vec::with_capacity(pools.len());
    for (pool, capacity) in pools {
        let counts = PoolCounts::read(redis, &keys.pool(sale, pool)).await?;
        counters.push(PoolCounters {
            pool: pool.clone(),
            capacity: i64::from(*capacity),
            available: counts.available,
            held: counts.held.unwrap_or(0),
            sold: counts.sold,
        });
    }
    Ok(counters)
}

/// A booking row as the consumer wrote it.
#[derive(Clone, Debug)]
pub struct Row {
    pub id: String,
    pub pool: String,
    pub seats: i64,
    pub status: String,
}

pub(crate) async fn bookings(db: &sqlx::PgPool, sale: &str) -> anyhow::Result<Vec<Row>> {
    let rows: Vec<(String, String, i32, String)> = sqlx::query_as(
        "select reservation_id, pool_id, seats, status from bookings where sale_id = $1",
    )
    .bind(sale)
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(id, pool, seats, status)| Row {
            id,
            pool,
            seats: i64::from(seats),
            status,
        })
        .collect())
}

/// Each admitted or refused person's place in line (the lottery's for pre-queue tickets), with
/// their admission batch. The draw is read from the first gateway that answers.
pub(crate) async fn placed_order(
    http: &reqwest::Client,
    gateways: &[SocketAddr],
    sale: &str,
    people: &[Person],
) -> anyhow::Result<Vec<(u64, Option<i64>)>> {
    let draw = if people.iter().any(|p| p.prequeue) {
        let mut record = None;
        for gateway in gateways {
            let answer = http
                .get(format!("http://{gateway}/v1/sales/{sale}/draw"))
                .send()
                .await;
            if let Ok(answer) = answer {
                record = Some(answer.json::<DrawRecord>().await?);
                break;
            }
        }
        let record = record.context("no gateway answers for the draw")?;
        let DrawRecord::Drawn {
            draw_seed,
            prequeue_size,
            ..
        } = record
        else {
            anyhow::bail!("the pre-queue was not drawn: {record:?}");
        };
        let seed: [u8; 32] = hex::decode(&draw_seed)?
            .try_into()
            .map_err(|_| anyhow::anyhow!("the draw seed is not 32 bytes: {draw_seed}"))?;
        Some(floodgate_protocol::lottery::Draw::new(seed, prequeue_size))
    } else {
        None
    };
    Ok(people
        .iter()
        .filter(|p| !matches!(p.outcome, Outcome::Failed(_)) && p.ticket > 0)
        .map(|p| {
            let place = draw.as_ref().map_or(p.ticket, |d| d.place(p.ticket));
            (place, p.batch)
        })
        .collect())
}
