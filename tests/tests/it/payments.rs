//! Paying for a reservation through the sandbox provider and its signed webhooks: confirmation,
//! failure, money that arrives too late, duplicate and out-of-order deliveries, and webhooks that
//! must be refused.

use std::time::Duration;

use floodgate_protocol::payments::{sign, PaymentObject, WebhookEvent, SIGNATURE_HEADER};
use floodgate_tests::eventually;
use floodgate_tests::{unique, SaleSpec, TestApp};
use serde_json::{json, Value};

/// The provider reached while a rush of payers holds connections to it.
mod crowd;
/// The webhook refusing what is not the provider's own, fresh, well-formed word.
mod signatures;

struct Booked {
    sale: String,
    id: String,
    secret: String,
}

/// A sale with one small pool, and one reservation of one seat in it.
async fn book(app: &TestApp, hold_ttl_secs: u32) -> Booked {
    let sale = unique("pay-");
    app.create_sale(
        &sale,
        &SaleSpec {
            pools: vec![("p1".into(), 3)],
            hold_ttl_secs,
            ..SaleSpec::default()
        },
    )
    .await;
    let token = app.token(&sale, 1, 1, 60_000);
    let body = app
        .reserve(&sale, &token, &uuid::Uuid::new_v4().to_string(), "p1", 1)
        .await
        .expect("201");
    Booked {
        sale,
        id: body.reservation_id,
        secret: body.secret,
    }
}

fn reservation_url(app: &TestApp, b: &Booked) -> String {
    format!(
        "http://{}/v1/sales/{}/reservations/{}",
        app.booking, b.sale, b.id
    )
}

async fn view(app: &TestApp, b: &Booked) -> Value {
    let res = app
        .http
        .get(reservation_url(app, b))
        .bearer_auth(&b.secret)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    res.json().await.unwrap()
}

/// Starts the payment and completes the sandbox checkout with `checkout`; returns the payment id.
async fn pay(app: &TestApp, b: &Booked, checkout: Value) -> String {
    let started = app.pay_with(&b.sale, &b.id, &b.secret, &checkout).await;
    assert_eq!(
        started.amount_minor, 150_000,
        "the pool's fare times the seats"
    );
    assert!(started.checkout_url.contains("/checkout/"));
    started.payment_id
}

async fn status_becomes(app: &TestApp, b: &Booked, status: &str) -> Value {
    eventually(
        &format!("reservation {status}"),
        Duration::from_secs(20),
        || async { Some(view(app, b).await).filter(|v| v["status"] == status) },
    )
    .await
}

async fn row_status_becomes(app: &TestApp, b: &Booked, status: &str) {
    eventually(
        &format!("booking row {status}"),
        Duration::from_secs(30),
        || async {
            let row: Option<String> =
                sqlx::query_scalar("select status from bookings where reservation_id = $1")
                    .bind(&b.id)
                    .fetch_optional(&app.db)
                    .await
                    .unwrap();
            row.as_deref() == Some(status)
        },
    )
    .await;
}

async fn counters(app: &TestApp, sale: &str) -> (i64, i64, i64) {
    let pool = app.keys.pool(sale, "p1");
    (
        app.redis_int(&pool.available()).await,
        app.redis_int(&pool.held()).await,
        app.redis_int(&pool.sold()).await,
    )
}

#[sqlx::test(migrations = "../migrations")]
async fn a_successful_payment_sells_the_held_seat(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let b = book(&app, 300).await;
    assert_eq!(view(&app, &b).await["status"], "held");
    let payment = pay(&app, &b, json!({"outcome": "succeed"})).await;
    let confirmed = status_becomes(&app, &b, "confirmed").await;
    assert_eq!(confirmed["payment_id"], payment);
    assert_eq!(counters(&app, &b.sale).await, (2, 0, 1));
    row_status_becomes(&app, &b, "CONFIRMED").await;
    let paid: Option<String> =
        sqlx::query_scalar("select payment_id from bookings where reservation_id = $1")
            .bind(&b.id)
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert_eq!(paid.as_deref(), Some(payment.as_str()));

    // The services count what happened (all share this process's recorder).
    let reserved = app
        .metric(
            app.admin,
            r#"floodgate_reservations_total{outcome="reserved"}"#,
        )
        .await;
    assert_eq!(reserved, Some(1.0));
    let webhooks = app
        .metric(
            app.admin,
            r#"floodgate_webhooks_total{type="payment.succeeded",result="confirmed"}"#,
        )
        .await;
    assert_eq!(webhooks, Some(1.0));
    let applied = app
        .metric(
            app.admin,
            r#"floodgate_consumer_events_total{outcome="changed"}"#,
        )
        .await;
    assert!(
        applied.is_some_and(|n| n >= 2.0),
        "SeatReserved and PaymentConfirmed applied: {applied:?}"
    );

    // A sold reservation cannot be paid again.
    let (status, again) = start_payment(&app, &b).await;
    assert_eq!((status, &again["error"]), (409, &json!("not_payable")));
}

/// `POST .../payment` for `b`: the status and body.
async fn start_payment(app: &TestApp, b: &Booked) -> (u16, Value) {
    app.answer(
        app.http
            .post(format!("{}/payment", reservation_url(app, b)))
            .bearer_auth(&b.secret),
    )
    .await
}

/// Starting a payment again while the hold lasts (a payer's second click, or a stranger holding
/// the reservation's secret, at its allowance, for the hold's minutes) answers the first
/// checkout and asks the provider nothing: its rate limits are the operator's account's, shared
/// by every payer. Before, each start was a call to the provider (which answered the same
/// payment, by its idempotency key).
#[sqlx::test(migrations = "../migrations")]
async fn a_payment_started_again_asks_the_provider_nothing(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let b = book(&app, 300).await;
    let (status, first) = start_payment(&app, &b).await;
    assert_eq!(status, 202, "{first}");
    for _ in 0..3 {
        let (status, again) = start_payment(&app, &b).await;
        assert_eq!(status, 202, "{again}");
        assert_eq!(again, first);
    }
    // The payer completes it (starting once more, as the page does): the payment that buys it.
    let payment = pay(&app, &b, json!({"outcome": "succeed"})).await;
    assert_eq!(first["payment_id"], payment.as_str());
    status_becomes(&app, &b, "confirmed").await;
    let seen = app
        .get_json(&format!("http://{}/v1/payments/{payment}", app.sandbox))
        .await;
    assert_eq!(seen["create_requests"], 1, "{seen}");
}

#[sqlx::test(migrations = "../migrations")]
async fn a_failed_payment_releases_the_seat(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let b = book(&app, 300).await;
    pay(&app, &b, json!({"outcome": "fail"})).await;
    status_becomes(&app, &b, "cancelled").await;
    assert_eq!(counters(&app, &b.sale).await, (3, 0, 0));
    row_status_becomes(&app, &b, "CANCELLED").await;
}

#[sqlx::test(migrations = "../migrations")]
async fn a_payment_after_the_hold_expired_is_refunded_and_recorded(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let b = book(&app, 1).await;
    // The payer is slow: the money arrives well after the one-second hold lapsed.
    let payment = pay(&app, &b, json!({"outcome": "succeed", "delay_ms": 2_500})).await;
    status_becomes(&app, &b, "expired").await;
    assert_eq!(
        counters(&app, &b.sale).await,
        (3, 0, 0),
        "the seat went back"
    );
    let refunded = eventually("the refund succeeded", Duration::from_secs(20), || async {
        Some(view(&app, &b).await)
            .filter(|v| v["refunds"] == json!([{"payment_id": payment, "status": "succeeded"}]))
    })
    .await;
    assert_eq!(
        refunded["status"], "expired",
        "the money went back; the seat was never sold"
    );
    assert_eq!(counters(&app, &b.sale).await, (3, 0, 0));
    row_status_becomes(&app, &b, "REFUNDED").await;
}

#[sqlx::test(migrations = "../migrations")]
async fn duplicate_deliveries_sell_the_seat_once(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let b = book(&app, 300).await;
    let payment = pay(&app, &b, json!({"outcome": "succeed", "deliveries": 3})).await;
    status_becomes(&app, &b, "confirmed").await;
    row_status_becomes(&app, &b, "CONFIRMED").await;
    // All three deliveries acknowledged (the sandbox counts them), and still one seat sold.
    eventually(
        "three deliveries acknowledged",
        Duration::from_secs(20),
        || async {
            let p = app
                .get_json(&format!("http://{}/v1/payments/{payment}", app.sandbox))
                .await;
            Some(()).filter(|_| p["webhooks_delivered"] == 3)
        },
    )
    .await;
    assert_eq!(counters(&app, &b.sale).await, (2, 0, 1));
}

/// Delivers a webhook the way the provider does, signed with `secret` at `timestamp`.
async fn deliver(
    app: &TestApp,
    event: &WebhookEvent,
    timestamp: i64,
    secret: &str,
) -> (u16, Value) {
    app.deliver_webhook(event, timestamp, secret).await
}

fn event(b: &Booked, kind: &str, payment: &str) -> WebhookEvent {
    WebhookEvent {
        id: unique("evt_"),
        kind: kind.into(),
        created: floodgate_protocol::now_millis() / 1000,
        data: PaymentObject {
            payment_id: payment.into(),
            reference: b.id.clone(),
            sale: b.sale.clone(),
            amount_minor: 150_000,
            currency: "INR".into(),
        },
    }
}

fn now_secs() -> i64 {
    floodgate_protocol::now_millis() / 1000
}

#[sqlx::test(migrations = "../migrations")]
async fn webhooks_are_idempotent_by_event_id_and_tolerate_disorder(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let b = book(&app, 300).await;
    // The payment is started (so it is the one that may buy the hold); its outcome is then
    // delivered here, as the provider would, in every order.
    let (status, started) = start_payment(&app, &b).await;
    assert_eq!(status, 202, "{started}");
    let pay_1 = started["payment_id"].as_str().unwrap().to_owned();
    let succeeded = event(&b, "payment.succeeded", &pay_1);
    let (status, body) = deliver(&app, &succeeded, now_secs(), &app.webhook_secret).await;
    assert_eq!((status, body["result"].as_str()), (200, Some("confirmed")));
    // The same event again: recognised by its id.
    let (status, body) = deliver(&app, &succeeded, now_secs(), &app.webhook_secret).await;
    assert_eq!((status, body["result"].as_str()), (200, Some("duplicate")));
    // A failure of the same payment, arriving after its success: changes nothing.
    let (status, body) = deliver(
        &app,
        &event(&b, "payment.failed", &pay_1),
        now_secs(),
        &app.webhook_secret,
    )
    .await;
    assert_eq!((status, body["result"].as_str()), (200, Some("ignored")));
    // A second, different payment for the already-sold seat (the payer paid twice in two
    // tabs): the provider reports it, and it is refunded, never kept.
    let second: Value = app
        .http
        .post(format!("http://{}/v1/payments", app.sandbox))
        .bearer_auth(app.payment_api_key())
        .json(
            &json!({"reference": b.id, "sale": b.sale, "amount_minor": 150_000, "currency": "INR"}),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let second = second["payment_id"].as_str().unwrap().to_owned();
    let res = app
        .http
        .post(format!(
            "http://{}/v1/payments/{second}/checkout",
            app.sandbox
        ))
        .json(&json!({"outcome": "succeed"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 202);
    eventually(
        "the second payment refunded",
        Duration::from_secs(20),
        || async {
            Some(view(&app, &b).await)
                .filter(|v| v["refunds"] == json!([{"payment_id": second, "status": "succeeded"}]))
        },
    )
    .await;
    let v = view(&app, &b).await;
    assert_eq!(v["status"], "confirmed");
    assert_eq!(v["payment_id"], pay_1.as_str());
    assert_eq!(counters(&app, &b.sale).await, (2, 0, 1));
}

#[sqlx::test(migrations = "../migrations")]
async fn only_the_secret_opens_a_reservation(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let b = book(&app, 300).await;
    let url = reservation_url(&app, &b);
    let res = app.http.get(&url).send().await.unwrap();
    assert_eq!(res.status(), 401);
    assert_eq!(
        res.json::<Value>().await.unwrap()["error"],
        "secret_missing"
    );
    let res = app
        .http
        .get(&url)
        .bearer_auth("guess")
        .send()
        .await
        .unwrap();
    assert_eq!(
        res.status(),
        404,
        "a wrong secret looks like no reservation at all"
    );
    let res = app
        .http
        .post(format!("{url}/payment"))
        .bearer_auth("guess")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 404);
    // A path naming no reservation (not even text, once decoded) is the same JSON 404, never a
    // framework's plain-text 400 that tells a prober its id did not parse.
    for (sale, id) in [
        (b.sale.as_str(), "%FF"),
        (b.sale.as_str(), "no-such-shape"),
        ("%FF", b.id.as_str()),
    ] {
        let res = app
            .http
            .get(format!(
                "http://{}/v1/sales/{sale}/reservations/{id}",
                app.booking
            ))
            .bearer_auth(&b.secret)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 404, "{sale}/{id}");
        assert_eq!(
            res.json::<Value>().await.unwrap()["error"],
            "unknown_reservation",
            "{sale}/{id}"
        );
    }
    let v = view(&app, &b).await;
    assert_eq!(
        (
            v["status"].as_str(),
            v["seats"].as_u64(),
            v["amount_minor"].as_i64()
        ),
        (Some("held"), Some(1), Some(150_000))
    );
}
