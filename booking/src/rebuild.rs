//! Rebuilding a pool whose Redis state was lost (a restart without persistence, a failover that
//! dropped writes), from PostgreSQL and the Kafka tail, so it can be served again without selling
//! any seat twice (`floodgate-booking sale rebuild <sale> <pool>`, docs/runbook.md).
//!
//! 1. The Kafka tail: every event published before the rebuild must be in PostgreSQL, so the
//!    command waits until the consumer group has applied past the topic's end as it was at the
//!    start (the group's offsets in PostgreSQL, `floodgate_platform::progress`). (The lost pool is refused meanwhile, so it adds no events of its own.)
//! 2. From PostgreSQL: seats sold are the `CONFIRMED` rows; every `PENDING_PAYMENT` row is a hold
//!    again, until its original expiry (the reaper then expires it as usual, and the consumer
//!    records it). Every reservation's record (with its buyer) and its token's pointer are
//!    restored, so a token cannot reserve a second time, a late payment finds its reservation,
//!    and a buyer's seats come back when their restored hold ends unpaid.
//! 3. One atomic script (`lua/rebuild_pool.lua`) checks first that the pool really lost its
//!    state or was refused for lost writes (it never touches a healthy one), then writes the
//!    records, the pointers, the holds, the counters, the event sequence and the config, all at
//!    once. A refused pool keeps the secrets and keys of the records it still has.
//!
//! What cannot come back: a held reservation's secret (only its holder had it; PostgreSQL keeps
//! none), so its holder can no longer read or pay it through the API, and the Idempotency-Key
//! replay of its 201. Its seat returns at the hold's expiry.

use std::time::Duration;

use floodgate_platform::kafka::{KafkaArgs, Role};
use floodgate_platform::keys::Keys;
use floodgate_platform::progress;
use floodgate_platform::runtime::RedisConn;
use floodgate_protocol::reservation::ReservationState;
use rdkafka::consumer::{BaseConsumer, Consumer};

use sqlx::PgPool;
use time::OffsetDateTime;

use crate::gatekeeper::arming::PoolArming;
use crate::gatekeeper::repair::{rebuild_pool, Rebuild, RestoredHold, RestoredRecord};

/// Where the consumer group reads the reservations topic.
pub struct KafkaTail {
    /// The brokers, how to reach them, and the topic.
    pub kafka: KafkaArgs,
    pub group: String,
    /// How long to wait for the consumer to catch up.
    pub timeout: Duration,
}

#[derive(Debug, PartialEq, Eq)]
pub struct Rebuilt {
    pub available: i64,
    pub held: i64,
    pub sold: i64,
    /// Reservation records restored (every non-aborted row of the pool).
    pub records: usize,
}

/// Waits until the consumer group has applied, on every partition, at least up to the end offset
/// the topic had when this was called (the group's offsets are in PostgreSQL, stored with the
/// rows they produced).
pub async fn wait_for_consumer(db: &PgPool, tail: &KafkaTail) -> anyhow::Result<()> {
    let client: BaseConsumer = tail
        .kafka
        .client(Role::Consumer, &[("group.id", tail.group.clone())])?
        .create()?;
    let topic = tail.kafka.reservations_topic.clone();
    let ends = tokio::task::spawn_blocking(move || {
        let timeout = Duration::from_secs(10);
        let metadata = client.fetch_metadata(Some(&topic), timeout)?;
        let mut ends = Vec::new();
        for t in metadata.topics() {
            for p in t.partitions() {
                let (_, high) = client.fetch_watermarks(&topic, p.id(), timeout)?;
                ends.push((p.id(), high));
            }
        }
        Ok::<_, rdkafka::error::KafkaError>(ends)
    })
    .await??;
    anyhow::ensure!(
        !ends.is_empty(),
        "topic {} has no partitions",
        tail.kafka.reservations_topic
    );
    let deadline = tokio::time::Instant::now() + tail.timeout;
    loop {
        let stored =
            progress::stored_offsets(db, &tail.group, &tail.kafka.reservations_topic).await?;
        let behind: i64 = ends
            .iter()
            .map(|(partition, end)| (end - stored.get(partition).copied().unwrap_or(0)).max(0))
            .sum();
        if behind == 0 {
            return Ok(());
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "the consumer group {} is still {behind} event(s) behind; is it running?",
            tail.group
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Rebuilds `pool` of `sale` from PostgreSQL once the consumer group has applied the Kafka tail.
/// A pool refused for lost writes may still have events to relay (its reaper and webhooks go
/// on): then the tail is awaited again until the relay has sent them, within `tail.timeout`.
pub async fn rebuild(
    db: &PgPool,
    redis: &RedisConn,
    keys: &Keys,
    tail: &KafkaTail,
    sale: &str,
    pool: &str,
) -> anyhow::Result<Rebuilt> {
    let deadline = tokio::time::Instant::now() + tail.timeout;
    loop {
        wait_for_consumer(db, tail).await?;
        if let Some(done) = rebuild_once(db, redis, keys, sale, pool).await? {
            return Ok(done);
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "pool {pool} still has events to relay; is a booking instance running?"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// One attempt: `None` if the pool still has events to relay.
async fn rebuild_once(
    db: &PgPool,
    redis: &RedisConn,
    keys: &Keys,
    sale: &str,
    pool: &str,
) -> anyhow::Result<Option<Rebuilt>> {
    type PoolRow = (i32, i64, String, i32, OffsetDateTime);
    let (capacity, fare_minor, currency, hold_ttl_secs, opens_at): PoolRow = sqlx::query_as(
        "select p.capacity, p.fare_minor, p.currency, s.hold_ttl_secs, s.opens_at
         from pools p join sales s on s.id = p.sale_id where p.sale_id = $1 and p.id = $2",
    )
    .bind(sale)
    .bind(pool)
    .fetch_optional(db)
    .await?
    .ok_or_else(|| anyhow::anyhow!("the catalog has no pool {pool} in sale {sale}"))?;
    let (sold, holds, records) = restore_plan(db, sale, pool).await?;
    let (seq, _) = crate::reconcile::applied_sequence(db, sale, pool).await?;
    let arming = PoolArming {
        sale,
        pool,
        capacity: u32::try_from(capacity).unwrap_or(0),
        hold_ttl_ms: i64::from(hold_ttl_secs) * 1000,
        opens_at_ms: unix_ms(opens_at),
        fare_minor,
        currency: &currency,
    };
    // PostgreSQL's mark of a number that came twice goes first: from here on the pool's own
    // mark (cfg `diverged`, cleared by the script) keeps it refused until it is rebuilt.
    sqlx::query("update pool_sequences set diverged_at = null where sale_id = $1 and pool_id = $2")
        .bind(sale)
        .bind(pool)
        .execute(db)
        .await?;
    // One script writes everything, and only after checking the pool has lost its state.
    let mut conn = redis.clone();
    let rebuilt = rebuild_pool(&mut conn, keys, &arming, sold, seq, &holds, &records).await?;
    match rebuilt {
        Rebuild::Rebuilt {
            available,
            held,
            sold,
        } => Ok(Some(Rebuilt {
            available,
            held,
            sold,
            records: records.len(),
        })),
        Rebuild::Busy => Ok(None),
        Rebuild::Intact => anyhow::bail!("pool {pool} has its Redis state: nothing to rebuild"),
        Rebuild::Overcommitted => anyhow::bail!(
            "PostgreSQL has more seats sold and held than pool {pool}'s capacity: not rebuilt, a person must look"
        ),
    }
}

/// What PostgreSQL says `pool` must hold: seats sold, the live holds, and every record but the
/// aborted ones.
async fn restore_plan(
    db: &PgPool,
    sale: &str,
    pool: &str,
) -> anyhow::Result<(i64, Vec<RestoredHold>, Vec<RestoredRecord>)> {
    type BookingRow = (
        String,
        String,
        i64,
        i32,
        String,
        OffsetDateTime,
        OffsetDateTime,
        Option<String>,
        Option<String>,
    );
    let rows: Vec<BookingRow> = sqlx::query_as(
        "select reservation_id, token_id, ticket, seats, status, reserved_at, hold_expires_at,
                payment_id, buyer
         from bookings where sale_id = $1 and pool_id = $2 order by reserved_at",
    )
    .bind(sale)
    .bind(pool)
    .fetch_all(db)
    .await?;

    let mut sold = 0i64;
    let mut holds = Vec::new();
    let mut records = Vec::new();
    for (id, token, ticket, seats, status, reserved_at, expires_at, payment, buyer) in rows {
        // An unknown status cannot be: the table's check constraint lists them all.
        let Some((state, record_state)) =
            ReservationState::from_db(&status).and_then(|s| Some(s).zip(s.rebuilt()))
        else {
            continue;
        };
        let seats = u32::try_from(seats).unwrap_or(0);
        match state {
            ReservationState::Confirmed => sold += i64::from(seats),
            ReservationState::Held => holds.push(RestoredHold {
                reservation_id: id.clone(),
                seats,
                expires_at_ms: unix_ms(expires_at),
            }),
            _ => {}
        }
        records.push(RestoredRecord {
            reservation_id: id,
            token_id: token,
            // The secret is gone with Redis; a fresh one keeps the record well-formed, and
            // nobody holds it, so the reservation can no longer be read or paid through the API.
            secret: hex::encode(rand::random::<[u8; 16]>()),
            seats,
            ticket,
            expires_at_ms: unix_ms(expires_at),
            reserved_at_ms: unix_ms(reserved_at),
            state: record_state,
            payment_id: payment,
            buyer,
        });
    }
    Ok((sold, holds, records))
}

fn unix_ms(t: OffsetDateTime) -> i64 {
    (t.unix_timestamp_nanos() / 1_000_000) as i64
}
