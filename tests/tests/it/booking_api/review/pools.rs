//! Review defects 10-12: a lost pool spends no token, no pool script changes anything without its config, and rebuilding an intact pool writes nothing.

use super::*;

#[sqlx::test(migrations = "../migrations")]
async fn defect_10_a_lost_pool_does_not_spend_the_token(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let sale = open_sale(&app, &[("p1", 5), ("p2", 5)]).await;
    let lost = app.keys.pool(&sale, "p1");
    let _: i64 = redis::cmd("DEL")
        .arg(lost.config())
        .arg(lost.available())
        .query_async(&mut app.redis.clone())
        .await
        .unwrap();
    let token = app.token(&sale, 1, 1, 60_000);
    assert_refused(
        app.reserve(&sale, &token, &key(), "p1", 1).await,
        503,
        "pool_unavailable",
    );
    app.reserve(&sale, &token, &key(), "p2", 1)
        .await
        .expect("the refusal left the token unspent");
}

#[sqlx::test(migrations = "../migrations")]
async fn defect_11_no_pool_script_changes_anything_when_its_config_is_missing(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let sale = open_sale(&app, &[("p1", 5)]).await;
    let g = Gatekeeper::connect(app.redis.clone(), app.keys.clone())
        .await
        .unwrap();
    let mut ids = Vec::new();
    for ticket in 1..=2 {
        let created = app
            .reserve(&sale, &app.token(&sale, ticket, 1, 60_000), &key(), "p1", 1)
            .await
            .expect("201");
        ids.push(created.reservation_id);
    }
    // The second is sold, and a second payment for it waits for its refund.
    let sold = WebhookTarget {
        sale: &sale,
        pool: "p1",
        reservation_id: &ids[1],
        event: "evt-sold",
    };
    let paid = |payment_id| Paid {
        payment_id,
        amount_minor: 150_000,
        currency: "INR",
    };
    g.start_payment(
        &sale,
        "p1",
        &ids[1],
        &floodgate_tests::started_payment("pay-1"),
    )
    .await
    .unwrap();
    g.confirm(&sold, &paid("pay-1")).await.unwrap();
    let twice = WebhookTarget {
        event: "evt-twice",
        ..sold
    };
    g.confirm(&twice, &paid("pay-2")).await.unwrap();
    // The relay has published every event so far (it would otherwise drain the outbox while
    // the scripts run, a change that is not theirs).
    let pool = app.keys.pool(&sale, "p1");
    eventually("the outbox is drained", Duration::from_secs(10), || async {
        app.redis_int_cmd("XLEN", &pool.outbox()).await == 0
    })
    .await;
    // The first one is due.
    let _: () = redis::pipe()
        .hset(pool.reservation(&ids[0]), "expires_ms", 1)
        .ignore()
        .zadd(pool.expiries(), &ids[0], 1)
        .ignore()
        .query_async(&mut app.redis.clone())
        .await
        .unwrap();
    let _: i64 = redis::cmd("DEL")
        .arg(pool.config())
        .query_async(&mut app.redis.clone())
        .await
        .unwrap();
    let before = pool_snapshot(&app, &sale, "p1").await;

    let held = WebhookTarget {
        sale: &sale,
        pool: "p1",
        reservation_id: &ids[0],
        event: "evt-a",
    };
    let outcomes = vec![
        (
            "confirm",
            format!("{:?}", g.confirm(&held, &paid("pay-3")).await),
        ),
        (
            "release",
            format!(
                "{:?}",
                g.release(
                    &WebhookTarget {
                        event: "evt-b",
                        ..held
                    },
                    "pay-4"
                )
                .await
            ),
        ),
        (
            "refund_result",
            format!(
                "{:?}",
                g.refund_result(
                    &WebhookTarget {
                        event: "evt-c",
                        ..sold
                    },
                    "pay-2",
                    true
                )
                .await
            ),
        ),
        (
            "expire",
            format!("{:?}", g.expire(&sale, "p1", &ids[0]).await),
        ),
        (
            "abort",
            format!("{:?}", g.abort(&sale, "p1", "no-such-jti", &ids[0]).await),
        ),
        (
            "start_payment",
            format!(
                "{:?}",
                g.start_payment(
                    &sale,
                    "p1",
                    &ids[0],
                    &floodgate_tests::started_payment("pay-5")
                )
                .await
            ),
        ),
        ("reserve", {
            let fresh = claims(&app, &app.token(&sale, 9, 1, 60_000));
            let request = ReserveRequest {
                claims: &fresh,
                pool: "p1",
                seats: 1,
                idempotency_key: "k-missing-cfg",
            };
            let id = reservation_id("p1", &"e".repeat(32));
            format!("{:?}", g.reserve(&request, &id, "s").await)
        }),
    ];
    let after = pool_snapshot(&app, &sale, "p1").await;
    for (key, value) in &before {
        assert_eq!(
            after.get(key),
            Some(value),
            "{key} changed; the scripts answered {outcomes:?}"
        );
    }
    assert_eq!(
        after.len(),
        before.len(),
        "keys appeared: {:?}; the scripts answered {outcomes:?}",
        after
            .keys()
            .filter(|k| !before.contains_key(*k))
            .collect::<Vec<_>>()
    );
}

#[sqlx::test(migrations = "../migrations")]
async fn defect_12_rebuilding_an_intact_pool_writes_nothing(db: sqlx::PgPool) {
    let app = TestApp::spawn(db.clone()).await;
    let sale = open_sale(&app, &[("p1", 5)]).await;
    let body = app
        .reserve(&sale, &app.token(&sale, 1, 1, 60_000), &key(), "p1", 1)
        .await
        .expect("201");
    let id = body.reservation_id.as_str();
    // The consumer has the booking, as a rebuild expects.
    eventually("the booking row is written", WAIT, || async {
        app.bookings(&sale, "PENDING_PAYMENT").await == 1
    })
    .await;
    let before = pool_snapshot(&app, &sale, "p1").await;
    let tail = floodgate_booking::rebuild::KafkaTail {
        kafka: KafkaArgs::plaintext(&floodgate_tests::kafka_brokers(), &app.topic),
        group: app.consumer_group.clone(),
        timeout: WAIT,
    };
    let refused =
        floodgate_booking::rebuild::rebuild(&db, &app.redis, &app.keys, &tail, &sale, "p1").await;
    assert!(refused.is_err(), "an intact pool is not rebuilt");
    assert_eq!(pool_snapshot(&app, &sale, "p1").await, before);
    let secret = body.secret.as_str();
    assert_eq!(view(&app, &sale, id, secret).await["status"], "held");
}
