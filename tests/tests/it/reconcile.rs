//! Reconciliation of Redis against PostgreSQL, through the real command: an injected drift is
//! reported in its table, and `--repair` fixes what is safe to fix.

use std::time::Duration;

use floodgate_tests::eventually;
use floodgate_tests::{fresh_database, unique, SaleSpec, TestApp};

fn reconcile(app: &TestApp, database_url: &str, sale: &str, repair: bool) -> (i32, String) {
    let mut args = vec!["sale", "reconcile", sale];
    if repair {
        args.push("--repair");
    }
    app.booking_command(database_url, &args)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_injected_drift_is_reported_and_repair_fixes_it() {
    let (url, db) = fresh_database().await;
    let app = TestApp::spawn(db.clone()).await;
    let sale = unique("recon-");
    let spec = SaleSpec {
        pools: vec![("p1".into(), 10)],
        opens_in: Duration::from_millis(500),
        max_seats: 2,
        ..SaleSpec::default()
    };
    app.create_sale(&sale, &spec).await;
    tokio::time::sleep(Duration::from_millis(600)).await; // past the opening
                                                          // Two seats sold (one booking of two), one held.
    let token = app.token(&sale, 1, 2, 60_000);
    let sold = app
        .reserve(&sale, &token, "k1", "p1", 2)
        .await
        .expect("201");
    app.pay(&sale, &sold.reservation_id, &sold.secret, "succeed")
        .await;
    let token = app.token(&sale, 2, 2, 60_000);
    app.reserve(&sale, &token, "k2", "p1", 1)
        .await
        .expect("201");
    eventually(
        "the sale in PostgreSQL",
        Duration::from_secs(30),
        || async {
            sqlx::query_scalar::<_, i64>(
                "select count(*) from bookings where status in ('CONFIRMED', 'PENDING_PAYMENT')",
            )
            .fetch_one(&db)
            .await
            .unwrap()
                == 2
                && sqlx::query_scalar::<_, i64>(
                    "select count(*) from bookings where status = 'CONFIRMED'",
                )
                .fetch_one(&db)
                .await
                .unwrap()
                    == 1
        },
    )
    .await;

    let (code, clean) = reconcile(&app, &url, &sale, false);
    assert_eq!(code, 0, "a healthy sale has no drift:\n{clean}");
    // The booking service's own pass agrees, and says so on its metrics.
    drift_pools_become(&app, 0).await;
    assert!(clean.contains("| none"), "{clean}");

    // Redis forgets the sale (a restore from an old snapshot, say, and a hand edit on top): sold
    // back to 0 and more than the capacity available, so seats could be sold twice.
    let pool = app.keys.pool(&sale, "p1");
    let mut conn = app.redis.clone();
    let _: () = redis::pipe()
        .set(pool.sold(), 0)
        .set(pool.available(), 11)
        .query_async(&mut conn)
        .await
        .unwrap();

    let (code, report) = reconcile(&app, &url, &sale, false);
    assert_eq!(code, 2, "drift is an exit status:\n{report}");
    // The service's periodic pass finds it too, for the FloodgateReconcileDrift alert.
    drift_pools_become(&app, 1).await;
    assert!(
        report.contains("PostgreSQL confirms 2 more sold seat(s)"),
        "{report}"
    );
    assert!(report.contains("2 seat(s) more than capacity"), "{report}");
    assert_eq!(
        app.redis_int(&pool.available()).await,
        11,
        "a report changes nothing"
    );

    let (code, repaired) = reconcile(&app, &url, &sale, true);
    assert_eq!(code, 0, "repaired:\n{repaired}");
    assert!(
        repaired.contains("p1: available 11 -> 7, sold 0 -> 2"),
        "{repaired}"
    );
    assert_eq!(app.redis_int(&pool.available()).await, 7);
    assert_eq!(app.redis_int(&pool.sold()).await, 2);
    assert_eq!(app.redis_int(&pool.held()).await, 1);
}

/// Waits until the booking service's `floodgate_reconcile_drift_pools` reads `pools`.
async fn drift_pools_become(app: &TestApp, pools: u64) {
    let line = format!("floodgate_reconcile_drift_pools {pools}");
    eventually(&line, Duration::from_secs(20), async || {
        let metrics = reqwest::get(format!("http://{}/metrics", app.admin))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        metrics.lines().any(|l| l == line)
    })
    .await;
}
