//! Reconciliation: each pool's Redis counters against PostgreSQL's rows, reported as a table,
//! with an optional repair of the drifts that are safe to fix. The command an on-call engineer
//! runs at 3 a.m. (`floodgate-booking reconcile <sale> [--repair]`, docs/runbook.md).
//!
//! What is compared, per pool:
//! - Redis: `capacity`, `available`, `held`, `sold`, and the live holds (count and seats).
//! - PostgreSQL: seats of `CONFIRMED` rows (sold for good) and of `PENDING_PAYMENT` rows.
//!
//! A repair may only ever make fewer seats sellable, never more: lowering `available` can at worst
//! leave a seat unsold, raising it could sell one twice. Everything else is reported for a person.

use std::fmt::Write as _;

use floodgate_platform::keys::Keys;
use floodgate_platform::runtime::RedisConn;
use sqlx::PgPool;

use crate::gatekeeper::repair::{read_pool, repair_pool};

/// One pool's figures on both sides and what disagrees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolReport {
    pub pool: String,
    pub capacity: i64,
    /// `None`: Redis has no state for this pool (lost; it is refused until rebuilt).
    pub redis: Option<RedisCounts>,
    pub confirmed_seats: i64,
    pub pending_seats: i64,
    /// The highest event sequence number of the pool the consumer has applied (0 for none).
    pub applied_seq: i64,
    pub drifts: Vec<Drift>,
}

/// A pool's Redis counters, as the gatekeeper reads them for a reconciliation.
pub use crate::gatekeeper::repair::PoolState as RedisCounts;

mod drift;

pub use drift::{drifts, lost_writes, safe_repair, Drift};

/// The highest event sequence number of `pool` the consumer has applied from Kafka (0 for none),
/// and whether PostgreSQL saw one of its numbers twice (the lost-writes check's inputs).
pub async fn applied_sequence(db: &PgPool, sale: &str, pool: &str) -> sqlx::Result<(i64, bool)> {
    sqlx::query_as(
        "select coalesce(max(seq), 0)::int8, coalesce(bool_or(diverged_at is not null), false)
         from pool_sequences where sale_id = $1 and pool_id = $2",
    )
    .bind(sale)
    .bind(pool)
    .fetch_one(db)
    .await
}

/// Reads both sides of every pool of `sale`.
pub async fn report(
    db: &PgPool,
    redis: &RedisConn,
    keys: &Keys,
    sale: &str,
) -> anyhow::Result<Vec<PoolReport>> {
    let pools: Vec<(String, i32)> =
        sqlx::query_as("select id, capacity from pools where sale_id = $1 order by id")
            .bind(sale)
            .fetch_all(db)
            .await?;
    anyhow::ensure!(!pools.is_empty(), "sale {sale} has no pools in the catalog");
    let mut conn = redis.clone();
    let mut reports = Vec::new();
    for (pool, capacity) in pools {
        let (confirmed_seats, pending_seats): (i64, i64) = sqlx::query_as(
            "select coalesce(sum(seats) filter (where status = 'CONFIRMED'), 0)::int8,
                    coalesce(sum(seats) filter (where status = 'PENDING_PAYMENT'), 0)::int8
             from bookings where sale_id = $1 and pool_id = $2",
        )
        .bind(sale)
        .bind(&pool)
        .fetch_one(db)
        .await?;
        let (kafka_seq, reused) = applied_sequence(db, sale, &pool).await?;
        let redis_counts = read_pool(&mut conn, &keys.pool(sale, &pool)).await?;
        let capacity = i64::from(capacity);
        let mut drifts = drifts(capacity, redis_counts, confirmed_seats);
        drifts.extend(
            redis_counts
                .as_ref()
                .and_then(|r| lost_writes(r, kafka_seq, reused)),
        );
        reports.push(PoolReport {
            drifts,
            pool,
            capacity,
            redis: redis_counts,
            confirmed_seats,
            pending_seats,
            applied_seq: kafka_seq,
        });
    }
    Ok(reports)
}

/// Reconciles every armed sale every `interval` while the service runs (read only) and sets
/// `floodgate_reconcile_drift_pools` to the number of pools whose two sides disagree, for the
/// "drift found by reconcile" alert; each drifting pool is logged with what disagrees. During a
/// rush the consumer may be a little behind (Redis sold above PostgreSQL confirmed for a
/// moment): the alert waits for a drift to last (deploy/observability/alerts.yaml).
pub async fn watch(
    db: PgPool,
    gatekeeper: crate::gatekeeper::Gatekeeper,
    interval: std::time::Duration,
    shutdown: tokio_util::sync::CancellationToken,
) {
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        let sales: std::collections::BTreeSet<String> = match gatekeeper.armed_pools().await {
            Ok(pools) => pools.into_iter().map(|(sale, _)| sale).collect(),
            Err(e) => {
                tracing::warn!(error = %e, "reconcile: the armed sales are unreadable");
                metrics::counter!("floodgate_reconcile_failures_total").increment(1);
                continue;
            }
        };
        let mut drifting = 0usize;
        for sale in sales {
            match report(&db, gatekeeper.redis(), gatekeeper.keys(), &sale).await {
                Ok(reports) => {
                    for report in reports.iter().filter(|r| !r.drifts.is_empty()) {
                        drifting += 1;
                        let found: Vec<String> =
                            report.drifts.iter().map(Drift::describe).collect();
                        tracing::warn!(%sale, pool = %report.pool, drift = ?found, "reconcile found drift");
                    }
                }
                Err(e) => {
                    tracing::warn!(%sale, error = %e, "reconcile failed");
                    metrics::counter!("floodgate_reconcile_failures_total").increment(1);
                }
            }
        }
        metrics::gauge!("floodgate_reconcile_drift_pools").set(drifting as f64);
    }
}

/// Applies the safe repair of every pool that has one; a line per pool saying what was done.
pub async fn repair(
    redis: &RedisConn,
    keys: &Keys,
    sale: &str,
    reports: &[PoolReport],
) -> anyhow::Result<Vec<String>> {
    let mut conn = redis.clone();
    let mut done = Vec::new();
    for report in reports {
        let Some(r) = report.redis else {
            done.push(format!(
                "{}: not repaired: its state must be rebuilt",
                report.pool
            ));
            continue;
        };
        if report.lost_writes() {
            // Its counters are not to be trusted: the caller rebuilds it (lost_writes_rebuilt).
            continue;
        }
        let Some((available, sold)) = safe_repair(report.capacity, r, report.confirmed_seats)
        else {
            continue;
        };
        let k = keys.pool(sale, &report.pool);
        let repaired = repair_pool(&mut conn, &k, (r.available, r.sold), (available, sold)).await?;
        let line = if repaired {
            format!(
                "{}: available {} -> {available}, sold {} -> {sold}",
                report.pool, r.available, r.sold
            )
        } else {
            format!(
                "{}: changed while being read; not repaired (run again)",
                report.pool
            )
        };
        tracing::warn!(sale, pool = %report.pool, %line, "reconciliation repair");
        done.push(line);
    }
    Ok(done)
}

impl PoolReport {
    /// Refused for lost writes: only a rebuild from PostgreSQL puts it right.
    pub fn lost_writes(&self) -> bool {
        self.drifts
            .iter()
            .any(|d| matches!(d, Drift::LostWrites { .. }))
    }
}

/// The report as a table for a terminal.
pub fn render(sale: &str, reports: &[PoolReport]) -> String {
    let mut out = format!("reconciliation of sale {sale}\n\n");
    let _ = writeln!(
        out,
        "{:<28} {:>8} | {:>9} {:>6} {:>6} {:>10} | {:>9} {:>9} | drift",
        "pool", "capacity", "available", "held", "sold", "hold seats", "confirmed", "pending"
    );
    for r in reports {
        let redis = match r.redis {
            Some(c) => format!(
                "{:>9} {:>6} {:>6} {:>10}",
                c.available, c.held, c.sold, c.hold_seats
            ),
            None => format!("{:>9} {:>6} {:>6} {:>10}", "-", "-", "-", "-"),
        };
        let drift = if r.drifts.is_empty() {
            "none".to_owned()
        } else {
            r.drifts
                .iter()
                .map(Drift::describe)
                .collect::<Vec<_>>()
                .join("; ")
        };
        let _ = writeln!(
            out,
            "{:<28} {:>8} | {redis} | {:>9} {:>9} | {drift}",
            r.pool, r.capacity, r.confirmed_seats, r.pending_seats
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(available: i64, held: i64, sold: i64) -> RedisCounts {
        RedisCounts {
            available,
            held,
            sold,
            hold_seats: held,
            seq: 0,
            diverged: false,
        }
    }

    #[test]
    fn a_pool_behind_kafka_lost_writes() {
        let r = counts(5, 3, 2);
        assert_eq!(lost_writes(&r, 0, false), None);
        let ahead = RedisCounts { seq: 9, ..r };
        assert_eq!(lost_writes(&ahead, 9, false), None);
        assert_eq!(
            lost_writes(&ahead, 10, false),
            Some(Drift::LostWrites {
                redis_seq: 9,
                kafka_seq: 10
            })
        );
        assert!(
            lost_writes(&ahead, 3, true).is_some(),
            "a number came twice"
        );
        let refused = RedisCounts {
            diverged: true,
            ..ahead
        };
        assert!(lost_writes(&refused, 3, false).is_some());
    }

    #[test]
    fn a_consistent_pool_has_no_drift_and_no_repair() {
        assert!(drifts(10, Some(counts(5, 3, 2)), 2).is_empty());
        assert_eq!(safe_repair(10, counts(5, 3, 2), 2), None);
    }

    #[test]
    fn lost_sales_are_taken_from_available() {
        let r = counts(10, 0, 0);
        assert_eq!(
            drifts(10, Some(r), 2),
            vec![Drift::SoldBelowConfirmed { missing: 2 }]
        );
        assert_eq!(safe_repair(10, r, 2), Some((8, 2)));
    }

    #[test]
    fn too_much_available_is_lowered_and_too_little_is_left_alone() {
        assert_eq!(
            drifts(10, Some(counts(9, 1, 2)), 2),
            vec![Drift::OverCapacity { excess: 2 }]
        );
        assert_eq!(safe_repair(10, counts(9, 1, 2), 2), Some((7, 2)));
        assert_eq!(
            drifts(10, Some(counts(5, 1, 2)), 2),
            vec![Drift::UnderCapacity { missing: 2 }]
        );
        assert_eq!(
            safe_repair(10, counts(5, 1, 2), 2),
            None,
            "never adds seats"
        );
    }

    #[test]
    fn sales_postgres_has_not_seen_yet_are_reported_not_repaired() {
        let r = counts(7, 0, 3);
        assert_eq!(
            drifts(10, Some(r), 1),
            vec![Drift::SoldAboveConfirmed { extra: 2 }]
        );
        assert_eq!(safe_repair(10, r, 1), None);
    }

    #[test]
    fn a_lost_pool_needs_a_rebuild() {
        assert_eq!(drifts(10, None, 0), vec![Drift::StateLost]);
    }

    #[test]
    fn a_repair_never_makes_more_seats_sellable() {
        for available in 0..12 {
            for held in 0..4 {
                for sold in 0..4 {
                    for confirmed in 0..5 {
                        let r = counts(available, held, sold);
                        if let Some((a, s)) = safe_repair(10, r, confirmed) {
                            assert!(a <= available && s >= sold, "{r:?} {confirmed} -> {a} {s}");
                            assert!(a + held + s <= 10.max(available + held + sold));
                        }
                    }
                }
            }
        }
    }
}
