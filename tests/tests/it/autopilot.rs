//! The admission autopilot against the real services: what each booking instance writes of a
//! sale's health for the sale's admission leader to read; ops turning it on and overriding it;
//! ([`quiet`]) a signal gone quiet; and ([`slow_pool`]) the loop itself under a pool Redis made
//! slow by the chaos proxy.

mod ops;
mod quiet;
mod slow_pool;

use floodgate_platform::state::health;
use floodgate_protocol::now_millis;
use floodgate_tests::{unique, SaleSpec, TestApp};

const MINUTE: i64 = 60_000;

/// Turns `sale`'s autopilot on with `settings` (the body's `autopilot`) through the ops API.
async fn turn_on(app: &TestApp, sale: &str, settings: serde_json::Value) {
    let (status, answer) = app
        .ops(
            reqwest::Method::PATCH,
            &format!("/admin/v1/sales/{sale}"),
            &app.ops_token,
            Some(serde_json::json!({ "autopilot": settings })),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
}

/// Every second the booking service writes, in the sale's health hash, its field with what the
/// sale's reservations took: how many, their p99, the share that failed (the backend's 5xx, not
/// a buyer's refusal), the p99 of its pool scripts, the broker's p99 acknowledgement time and
/// the consumer group's lag. A sale nobody reserves in gets no hash, and the hash expires unless
/// it is written again.
#[sqlx::test(migrations = "../migrations")]
async fn the_booking_service_writes_each_sales_health_every_second(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let spec = SaleSpec {
        pools: vec![("p1".into(), 100)],
        ..SaleSpec::default()
    };
    let (sale, quiet) = (unique("health-"), unique("quiet-"));
    app.create_sale(&sale, &spec).await;
    app.create_sale(&quiet, &spec).await;
    // Enough reservations (and so acknowledged events) to judge a p99 by.
    for ticket in 1..=25 {
        let token = app.token(&sale, ticket, 1, MINUTE);
        app.reserve(&sale, &token, &format!("k{ticket}"), "p1", 1)
            .await
            .expect("201");
    }
    // A buyer's mistake is answered, and counted, but is not the backend failing.
    let token = app.token(&sale, 26, 1, MINUTE);
    assert!(app.reserve(&sale, &token, "k26", "nope", 1).await.is_err());

    app.health_when(&sale, |h| h.requests == 26 && h.consumer_lag.is_some())
        .await;
    let (keys, mut conn) = (app.keys.sale(&sale), app.redis.clone());
    let written = health::read(&mut conn, &keys).await.unwrap();
    assert_eq!(written.len(), 1, "{written:?}");
    let (field, reading) = &written[0];
    assert!(field.starts_with("booking:"), "{field}");
    assert_eq!(reading.error_share, Some(0.0));
    assert!(reading.reservation_p99_ms.is_some_and(|p99| p99 > 0.0));
    assert!(
        reading.produce_p99_ms.is_some_and(|p99| p99 > 0.0),
        "{reading:?}"
    );
    assert!(
        reading.script_p99_ms.is_some_and(|p99| p99 > 0.0),
        "{reading:?}"
    );
    // The consumer measures its group's lag every second; its figure rides in every summary.
    assert!(reading.consumer_lag.is_some(), "{reading:?}");
    assert!((now_millis() - reading.at_ms).abs() < 5_000, "{reading:?}");
    let ttl: i64 = redis::cmd("PTTL")
        .arg(keys.health())
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(
        (1..=30_000).contains(&ttl),
        "the hash expires unless written: {ttl}"
    );

    let exists: bool = redis::cmd("EXISTS")
        .arg(app.keys.sale(&quiet).health())
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(!exists, "a sale nobody reserves in has no health written");
}
