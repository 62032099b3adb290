//! The health that steers admission (booking::health) counts what the backend did, each pass
//! once: a flood of cheap refusals (seats the pass may not take, refused before any Redis work)
//! and a pass replaying its own reservation neither dilute nor drag the sale's window, so a
//! stranger can neither hide the backend's strain from the autopilot nor fake it.

use floodgate_tests::{unique, SaleSpec, TestApp};

const MINUTE: i64 = 60_000;

#[sqlx::test(migrations = "../migrations")]
async fn refusals_before_redis_and_a_passs_own_replays_do_not_count(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let sale = unique("honest-");
    let spec = SaleSpec {
        pools: vec![("p1".into(), 100)],
        max_seats: 2,
        ..SaleSpec::default()
    };
    app.create_sale(&sale, &spec).await;

    // Fifty requests the booking service refuses at once (no Redis work): a pass asking for
    // more seats than it may, or none.
    let cheap = app.token(&sale, 100, 2, MINUTE);
    for (n, seats) in (0..50).map(|n| (n, if n % 2 == 0 { 0 } else { 3 })) {
        let refused = app
            .reserve(&sale, &cheap, &format!("c{n}"), "p1", seats)
            .await;
        assert!(refused.is_err());
    }
    // One pass replaying its own reservation thirty times.
    let token = app.token(&sale, 1, 1, MINUTE);
    for _ in 0..31 {
        app.reserve(&sale, &token, "k1", "p1", 1)
            .await
            .expect("201");
    }
    // Four more people, once each.
    for ticket in 2..=5 {
        let token = app.token(&sale, ticket, 1, MINUTE);
        app.reserve(&sale, &token, &format!("k{ticket}"), "p1", 1)
            .await
            .expect("201");
    }

    let reading = app.health_when(&sale, |h| h.requests >= 5).await;
    // Five people; the replaying pass once more at most, if a half-window turned during it.
    assert!(
        (5..=6).contains(&reading.requests),
        "{} requests counted for five people: {reading:?}",
        reading.requests
    );
    assert_eq!(reading.error_share, Some(0.0));
}

/// PostgreSQL's pool is the booking service's requests' too: when the consumer group's lag
/// cannot be read (the pool busy, its table locked), the sale's health still goes out each
/// second, the lag as last read, so the autopilot keeps steering by a fresh summary.
#[sqlx::test(migrations = "../migrations")]
async fn a_lag_that_cannot_be_read_holds_up_no_health_summary(db: sqlx::PgPool) {
    let app = TestApp::spawn(db.clone()).await;
    let sale = unique("lagless-");
    let spec = SaleSpec {
        pools: vec![("p1".into(), 10)],
        ..SaleSpec::default()
    };
    app.create_sale(&sale, &spec).await;
    let token = app.token(&sale, 1, 1, MINUTE);
    app.reserve(&sale, &token, "k1", "p1", 1)
        .await
        .expect("201");
    app.health_when(&sale, |h| h.requests == 1).await;

    // Every read of the lag now waits for this transaction.
    let mut lock = db.begin().await.unwrap();
    sqlx::query("lock table consumer_lag in access exclusive mode")
        .execute(&mut *lock)
        .await
        .unwrap();
    let (secs, micros): (i64, i64) = redis::cmd("TIME")
        .query_async(&mut app.redis.clone())
        .await
        .unwrap();
    let locked_at = secs * 1000 + micros / 1000;
    let fresh = app
        .health_when(&sale, |h| h.at_ms > locked_at + 3_000)
        .await;
    // The lag went out as it was before the lock (or not at all): never a figure made up.
    assert!(
        fresh.consumer_lag_at_ms.is_none_or(|at| at <= locked_at),
        "{fresh:?}"
    );
    lock.rollback().await.unwrap();
}
