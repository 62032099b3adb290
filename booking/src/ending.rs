//! The last two commands of a sale's life, for its operator:
//!
//! - `sale end`: nothing more is sold. New claims are refused at once (the sale's slot), then
//!   each pool stops taking holds, but only once nothing is in flight there (no seat in a live
//!   hold, no event waiting for the relay); until then the command says what it waits for and
//!   can be run again. Once every pool has ended, PostgreSQL records the end and the sale leaves
//!   the relay's and reaper's walk (the relay still looks at its outboxes now and then, for
//!   late webhooks).
//! - `sale purge`: deletes the sale's Redis state once PostgreSQL has everything: the sale
//!   ended, reconciliation finds no drift, no seat is held or awaiting payment, and the consumer
//!   has applied every event each pool gave (its sequence in PostgreSQL has reached Redis').
//!   PostgreSQL keeps every booking, event and payment; the public record of the draw is gone
//!   from Redis with the rest (publish it first if it must stay online).

use anyhow::Context as _;
use floodgate_platform::keys::Keys;
use floodgate_platform::runtime::RedisConn;
use sqlx::PgPool;

use crate::gatekeeper::ending::{self, PoolEnd, Records};
use crate::reconcile;

/// What `sale end` did.
#[derive(Debug, PartialEq, Eq)]
pub enum Ending {
    /// Every pool has ended and the sale left the walk of live sales.
    Ended,
    /// New claims are refused, but these pools still have something in flight.
    Waiting(Vec<String>),
}

/// What `sale purge` did.
#[derive(Debug, PartialEq, Eq)]
pub enum Purge {
    /// Its Redis state is gone: this many keys deleted.
    Purged { keys: u64 },
    /// Why not yet (nothing was deleted).
    Refused(Vec<String>),
}

async fn catalog_pools(db: &PgPool, sale: &str) -> anyhow::Result<Vec<String>> {
    let pools: Vec<String> =
        sqlx::query_scalar("select id from pools where sale_id = $1 order by id")
            .bind(sale)
            .fetch_all(db)
            .await?;
    anyhow::ensure!(!pools.is_empty(), "sale {sale} has no pools in the catalog");
    Ok(pools)
}

/// `sale end`: see the module's notes.
pub async fn end(
    db: &PgPool,
    redis: &RedisConn,
    keys: &Keys,
    sale: &str,
) -> anyhow::Result<Ending> {
    let pools = catalog_pools(db, sale).await?;
    let mut conn = redis.clone();
    let sale_keys = keys.sale(sale);
    ending::read_meta(&mut conn, &sale_keys)
        .await?
        .with_context(|| format!("sale {sale} is not armed in Redis (never armed, or purged)"))?;
    // No new claim from here on, so no new hold can start while the pools are ended.
    ending::mark_sale_ended(&mut conn, &sale_keys, floodgate_protocol::now_millis()).await?;
    let mut waiting = Vec::new();
    for pool in &pools {
        match ending::end_pool(&mut conn, &keys.pool(sale, pool)).await? {
            PoolEnd::Ended { .. } => {}
            PoolEnd::Holding { seats } => waiting.push(format!(
                "pool {pool}: {seats} seat(s) in live holds; they are paid or expire within the hold's lifetime"
            )),
            PoolEnd::Relaying { events } => waiting.push(format!(
                "pool {pool}: {events} event(s) waiting for the relay to publish them"
            )),
            PoolEnd::NotArmed => waiting.push(format!(
                "pool {pool}: its Redis state is missing; rebuild it first (`sale rebuild`)"
            )),
        }
    }
    if !waiting.is_empty() {
        return Ok(Ending::Waiting(waiting));
    }
    sqlx::query("update sales set ended_at = coalesce(ended_at, now()) where id = $1")
        .bind(sale)
        .execute(db)
        .await?;
    ending::retire_sale(&mut conn, keys, sale).await?;
    Ok(Ending::Ended)
}

/// `sale purge`: see the module's notes.
pub async fn purge(
    db: &PgPool,
    redis: &RedisConn,
    keys: &Keys,
    sale: &str,
) -> anyhow::Result<Purge> {
    let ended: Option<bool> =
        sqlx::query_scalar("select ended_at is not null from sales where id = $1")
            .bind(sale)
            .fetch_optional(db)
            .await?;
    match ended {
        None => anyhow::bail!("sale {sale} is not in the catalog"),
        Some(false) => {
            return Ok(Purge::Refused(vec![format!(
                "sale {sale} has not ended: run `sale end {sale}` first"
            )]))
        }
        Some(true) => {}
    }
    let pools = catalog_pools(db, sale).await?;
    let mut conn = redis.clone();
    // With the meta gone an earlier purge got to its very end: everything was checked then,
    // and what is left (if anything) goes now.
    if ending::read_meta(&mut conn, &keys.sale(sale))
        .await?
        .is_some()
    {
        let problems = unfinished(db, redis, keys, sale).await?;
        if !problems.is_empty() {
            return Ok(Purge::Refused(problems));
        }
    }
    let bookings: Vec<(String, String, String)> =
        sqlx::query_as("select pool_id, reservation_id, token_id from bookings where sale_id = $1")
            .bind(sale)
            .fetch_all(db)
            .await?;
    let deleted = ending::purge(&mut conn, keys, sale, &Records { bookings, pools }).await?;
    sqlx::query("update sales set purged_at = coalesce(purged_at, now()) where id = $1")
        .bind(sale)
        .execute(db)
        .await?;
    Ok(Purge::Purged { keys: deleted })
}

/// Why PostgreSQL may not have everything yet: one line per reason, none when it has.
async fn unfinished(
    db: &PgPool,
    redis: &RedisConn,
    keys: &Keys,
    sale: &str,
) -> anyhow::Result<Vec<String>> {
    let mut problems = Vec::new();
    for report in reconcile::report(db, redis, keys, sale).await? {
        let pool = &report.pool;
        problems.extend(
            report
                .drifts
                .iter()
                .map(|d| format!("pool {pool}: {}", d.describe())),
        );
        if report.pending_seats > 0 {
            problems.push(format!(
                "pool {pool}: PostgreSQL has {} seat(s) awaiting payment",
                report.pending_seats
            ));
        }
        let Some(counts) = report.redis else {
            continue;
        };
        if counts.held > 0 {
            problems.push(format!(
                "pool {pool}: {} seat(s) held in Redis",
                counts.held
            ));
        }
        let applied = report.applied_seq;
        if applied < counts.seq {
            problems.push(format!(
                "pool {pool}: the consumer has applied its events up to {applied} of {}; wait for it",
                counts.seq
            ));
        }
    }
    Ok(problems)
}
