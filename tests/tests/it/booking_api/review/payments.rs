//! Review defects 13-15: money for a lost pool or for no reservation, only the started payment of the right amount confirming, and the sandbox wanting its API key.

use super::*;

/// Delivers a webhook as the provider does, signed with the app's secret, now.
async fn deliver(app: &TestApp, event: &WebhookEvent) -> (u16, Value) {
    let now = floodgate_protocol::now_millis() / 1000;
    app.deliver_webhook(event, now, &app.webhook_secret).await
}

fn payment_event(
    kind: &str,
    payment: &str,
    sale: &str,
    reference: &str,
    amount: i64,
) -> WebhookEvent {
    WebhookEvent {
        id: unique("evt_"),
        kind: kind.into(),
        created: floodgate_protocol::now_millis() / 1000,
        data: PaymentObject {
            payment_id: payment.into(),
            reference: reference.into(),
            sale: sale.into(),
            amount_minor: amount,
            currency: "INR".into(),
        },
    }
}

/// Creates a payment at the sandbox directly (not through the booking API) and completes it.
async fn pay_at_sandbox(app: &TestApp, sale: &str, reference: &str, amount: i64) -> String {
    let (status, created) = app
        .answer(
            app.http
                .post(format!("http://{}/v1/payments", app.sandbox))
                .bearer_auth(app.payment_api_key())
                .header("Idempotency-Key", unique("direct-"))
                .json(&json!({
                    "reference": reference, "sale": sale, "amount_minor": amount, "currency": "INR"
                })),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let payment = created["payment_id"].as_str().unwrap().to_owned();
    let (status, body) = app
        .answer(
            app.http
                .post(format!(
                    "http://{}/v1/payments/{payment}/checkout",
                    app.sandbox
                ))
                .json(&json!({"outcome": "succeed"})),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    payment
}

async fn sandbox_status_becomes(app: &TestApp, payment: &str, status: &str) {
    eventually(&format!("payment {payment} is {status}"), WAIT, || async {
        app.get_json(&format!("http://{}/v1/payments/{payment}", app.sandbox))
            .await["status"]
            == status
    })
    .await;
}

#[sqlx::test(migrations = "../migrations")]
async fn defect_13_money_for_a_lost_pool_is_retried_and_for_no_reservation_refunded(
    db: sqlx::PgPool,
) {
    let app = TestApp::spawn(db.clone()).await;
    let sale = open_sale(&app, &[("p1", 5)]).await;
    let id = app
        .reserve(&sale, &app.token(&sale, 1, 1, 60_000), &key(), "p1", 1)
        .await
        .expect("201")
        .reservation_id;

    // The pool's whole state is lost (a restart without persistence), not yet rebuilt.
    let pattern = format!("{}{{p:{sale}/p1}}*", app.keys.prefix());
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(&pattern)
        .query_async(&mut app.redis.clone())
        .await
        .unwrap();
    let _: i64 = redis::cmd("DEL")
        .arg(&keys)
        .query_async(&mut app.redis.clone())
        .await
        .unwrap();
    let (status, reply) = deliver(
        &app,
        &payment_event("payment.succeeded", "pay_lost", &sale, &id, 150_000),
    )
    .await;
    assert_eq!(
        status, 503,
        "the provider must retry until the pool is back: {reply}"
    );

    // Money naming a reservation that does not exist, in an intact pool, and money naming
    // nothing this service could have issued: refunded, and recorded.
    let other = open_sale(&app, &[("p1", 5)]).await;
    let nowhere = reservation_id("p1", &"d".repeat(32));
    let stray = pay_at_sandbox(&app, &other, &nowhere, 150_000).await;
    let garbage = pay_at_sandbox(&app, &other, "not-a-reservation", 99).await;
    for payment in [&stray, &garbage] {
        sandbox_status_becomes(&app, payment, "refunded").await;
        let recorded: Option<String> =
            sqlx::query_scalar("select reason from unmatched_payments where payment_id = $1")
                .bind(payment)
                .fetch_optional(&db)
                .await
                .unwrap();
        assert!(recorded.is_some(), "payment {payment} is recorded");
    }
}

#[sqlx::test(migrations = "../migrations")]
async fn defect_14_only_the_started_payment_of_the_right_amount_confirms(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let sale = open_sale(&app, &[("p1", 5)]).await;
    let created = app
        .reserve(&sale, &app.token(&sale, 1, 1, 60_000), &key(), "p1", 1)
        .await
        .expect("201");
    let (id, secret) = (created.reservation_id, created.secret);
    let (status, started) = app
        .answer(
            app.http
                .post(format!(
                    "http://{}/v1/sales/{sale}/reservations/{id}/payment",
                    app.booking
                ))
                .bearer_auth(&secret),
        )
        .await;
    assert_eq!(status, 202, "{started}");
    let started_id = started["payment_id"].as_str().unwrap().to_owned();
    // The payer completes it, and the provider takes its time telling us (its own webhook is
    // due long after this test): meanwhile a misbehaving provider reports it wrongly.
    let (status, body) = app
        .answer(
            app.http
                .post(format!(
                    "http://{}/v1/payments/{started_id}/checkout",
                    app.sandbox
                ))
                .json(&json!({"outcome": "succeed", "delay_ms": 600_000})),
        )
        .await;
    assert_eq!(status, 202, "{body}");

    // A payment someone else started, for the right amount: refunded, the hold untouched.
    let stranger = pay_at_sandbox(&app, &sale, &id, 150_000).await;
    sandbox_status_becomes(&app, &stranger, "refunded").await;
    // The started payment, but for the wrong amount or currency: not a confirmation.
    let (status, reply) = deliver(
        &app,
        &payment_event("payment.succeeded", &started_id, &sale, &id, 1),
    )
    .await;
    assert_eq!(status, 200, "{reply}");
    let mut euros = payment_event("payment.succeeded", &started_id, &sale, &id, 150_000);
    euros.data.currency = "EUR".into();
    let (status, reply) = deliver(&app, &euros).await;
    assert_eq!(status, 200, "{reply}");
    // A failure of a payment that is not the current one changes nothing either.
    let (status, reply) = deliver(
        &app,
        &payment_event("payment.failed", "pay_not_current", &sale, &id, 150_000),
    )
    .await;
    assert_eq!(status, 200, "{reply}");

    let now = view(&app, &sale, &id, &secret).await;
    assert_eq!(now["status"], "held", "{now}");
    let refunded: Vec<&str> = now["refunds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["payment_id"].as_str().unwrap())
        .collect();
    assert!(refunded.contains(&stranger.as_str()), "{now}");
    assert!(refunded.contains(&started_id.as_str()), "{now}");
}

#[sqlx::test(migrations = "../migrations")]
async fn defect_15_the_sandbox_wants_the_api_key(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let body = json!({"reference": "x", "sale": "s", "amount_minor": 1, "currency": "INR"});
    for key in [None, Some("wrong-key-of-enough-length-000000")] {
        let mut request = app
            .http
            .post(format!("http://{}/v1/payments", app.sandbox))
            .json(&body);
        if let Some(key) = key {
            request = request.bearer_auth(key);
        }
        let (status, reply) = app.answer(request).await;
        assert_eq!(status, 401, "{reply}");
    }
    let (status, reply) = app
        .answer(
            app.http
                .post(format!("http://{}/v1/refunds", app.sandbox))
                .json(&json!({"payment_id": "pay_x"})),
        )
        .await;
    assert_eq!(status, 401, "{reply}");
}
