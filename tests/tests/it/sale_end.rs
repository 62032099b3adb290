//! The end of a sale, through the real commands (issue 15, "ended sales leave"): `sale end`
//! stops new reservations at once and ends each pool once nothing is in flight there; the sale
//! then leaves the relay's and reaper's walk; `sale purge` deletes its Redis state only once
//! PostgreSQL has everything, and PostgreSQL keeps every booking.

use std::time::Duration;

use floodgate_tests::{assert_refused, eventually, fresh_database, unique, SaleSpec, TestApp};

const WAIT: Duration = Duration::from_secs(30);

/// Seconds since `key` was last read or written (Redis' `OBJECT IDLETIME`).
async fn idle_secs(app: &TestApp, key: &str) -> i64 {
    redis::cmd("OBJECT")
        .arg("IDLETIME")
        .arg(key)
        .query_async(&mut app.redis.clone())
        .await
        .expect("the key exists")
}

async fn is_member(app: &TestApp, set: &str, sale: &str) -> bool {
    redis::cmd("SISMEMBER")
        .arg(set)
        .arg(sale)
        .query_async(&mut app.redis.clone())
        .await
        .unwrap()
}

/// Every key under the app's prefix that names `sale`, with its time to live (-1: none).
async fn keys_of(app: &TestApp, sale: &str) -> Vec<(String, i64)> {
    let mut conn = app.redis.clone();
    let mut cursor = 0u64;
    let mut found = Vec::new();
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(format!("{}*", app.keys.prefix()))
            .arg("COUNT")
            .arg(1000)
            .query_async(&mut conn)
            .await
            .unwrap();
        for key in keys.into_iter().filter(|k| k.contains(sale)) {
            let ttl: i64 = redis::cmd("PTTL")
                .arg(&key)
                .query_async(&mut conn)
                .await
                .unwrap();
            found.push((key, ttl));
        }
        if next == 0 {
            return found;
        }
        cursor = next;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ended_sale_sells_nothing_leaves_the_walk_and_is_purged_once_postgres_has_everything() {
    let (url, db) = fresh_database().await;
    let app = TestApp::spawn(db.clone()).await;
    let sale = unique("end-");
    let spec = SaleSpec {
        pools: vec![("p1".into(), 10), ("p2".into(), 10)],
        opens_in: Duration::from_millis(500),
        max_seats: 2,
        ..SaleSpec::default()
    };
    app.create_sale(&sale, &spec).await;
    app.until_open(&sale).await;
    // Two seats sold in p1, one held in p2.
    let first = app.token(&sale, 1, 2, 60_000);
    let sold = app
        .reserve(&sale, &first, "k1", "p1", 2)
        .await
        .expect("201");
    app.pay(&sale, &sold.reservation_id, &sold.secret, "succeed")
        .await;
    let token = app.token(&sale, 2, 2, 60_000);
    let held = app
        .reserve(&sale, &token, "k2", "p2", 1)
        .await
        .expect("201");

    let (code, said) = app.booking_command(&url, &["sale", "purge", &sale]);
    assert_eq!(code, 2, "{said}");
    assert!(said.contains("has not ended"), "{said}");

    // Ending while a hold is live: new reservations stop at once, the end waits for the hold.
    let (code, said) = app.booking_command(&url, &["sale", "end", &sale]);
    assert_eq!(code, 2, "{said}");
    assert!(said.contains("pool p2: 1 seat(s) in live holds"), "{said}");
    let token = app.token(&sale, 3, 2, 60_000);
    assert_refused(
        app.reserve(&sale, &token, "k3", "p1", 1).await,
        409,
        "sale_ended",
    );
    // A retry of a reservation made before the end still gets its answer.
    let replay = app.reserve(&sale, &first, "k1", "p1", 2).await;
    assert_eq!(
        replay.expect("the earlier answer").reservation_id,
        sold.reservation_id
    );
    // The live hold is still paid for.
    app.pay(&sale, &held.reservation_id, &held.secret, "succeed")
        .await;
    eventually("both bookings confirmed in PostgreSQL", WAIT, || async {
        app.bookings(&sale, "CONFIRMED").await == 2
    })
    .await;
    let said = eventually("the sale ends", WAIT, || async {
        let (code, said) = app.booking_command(&url, &["sale", "end", &sale]);
        (code == 0).then_some(said)
    })
    .await;
    assert!(said.contains("ended"), "{said}");
    assert!(!is_member(&app, &app.keys.sales(), &sale).await);
    assert!(is_member(&app, &app.keys.ended_sales(), &sale).await);
    let ended: bool = sqlx::query_scalar("select ended_at is not null from sales where id = $1")
        .bind(&sale)
        .fetch_one(&db)
        .await
        .unwrap();
    assert!(ended);

    // The relay read p1's outbox on every pass (100 ms); now it looks only every few seconds.
    let outbox = app.keys.pool(&sale, "p1").outbox();
    eventually("the relay leaves the ended sale alone", WAIT, || async {
        idle_secs(&app, &outbox).await >= 2
    })
    .await;

    let (code, said) = app.booking_command(&url, &["sale", "purge", &sale]);
    assert_eq!(code, 0, "{said}");
    assert!(said.contains("purged"), "{said}");
    // Nothing of the sale is left in Redis but what expires by itself.
    let left = keys_of(&app, &sale).await;
    assert!(
        left.iter().all(|(_, ttl)| *ttl > 0),
        "keys left without a lifetime: {left:?}"
    );
    assert!(!is_member(&app, &app.keys.ended_sales(), &sale).await);
    // PostgreSQL keeps everything; a second purge is harmless; the sale is still over.
    assert_eq!(app.bookings(&sale, "CONFIRMED").await, 2);
    let (code, said) = app.booking_command(&url, &["sale", "purge", &sale]);
    assert_eq!(code, 0, "{said}");
    let token = app.token(&sale, 4, 2, 60_000);
    assert_refused(
        app.reserve(&sale, &token, "k4", "p1", 1).await,
        409,
        "sale_ended",
    );
}
