//! Regression tests for the booking, payment and secret defects the review found (issue 12),
//! each named after its defect's number, against the real Redis, broker, PostgreSQL and the
//! sandbox provider.

use std::collections::BTreeMap;
use std::time::Duration;

use floodgate_booking::gatekeeper::{
    Gatekeeper, Paid, ReserveError, ReserveRequest, WebhookTarget,
};
use floodgate_platform::kafka::KafkaArgs;
use floodgate_protocol::api::booking::ReservationCreated;
use floodgate_protocol::ids::reservation_id;
use floodgate_protocol::payments::{PaymentObject, WebhookEvent};
use floodgate_protocol::token::AdmissionClaims;
use floodgate_tests::chaos::ChaosProxy;
use floodgate_tests::eventually;
use floodgate_tests::{assert_refused, redis_url, unique, TestApp};

use super::{key, open_sale};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(20);

fn claims(app: &TestApp, token: &str) -> AdmissionClaims {
    app.signer
        .verifier()
        .verify(token, floodgate_protocol::now_millis())
        .expect("a valid token")
}

fn one_seat(pool: &str) -> Value {
    json!({ "pool": pool, "seats": 1 })
}

async fn view(app: &TestApp, sale: &str, id: &str, secret: &str) -> Value {
    app.answer(
        app.http
            .get(format!(
                "http://{}/v1/sales/{sale}/reservations/{id}",
                app.booking
            ))
            .bearer_auth(secret),
    )
    .await
    .1
}

/// Every key of a pool's slot and what it holds, in a comparable form.
async fn pool_snapshot(app: &TestApp, sale: &str, pool: &str) -> BTreeMap<String, String> {
    let mut conn = app.redis.clone();
    let pattern = format!("{}{{p:{sale}/{pool}}}*", app.keys.prefix());
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(&pattern)
        .query_async(&mut conn)
        .await
        .unwrap();
    let mut snapshot = BTreeMap::new();
    for key in keys {
        let kind: String = redis::cmd("TYPE")
            .arg(&key)
            .query_async(&mut conn)
            .await
            .unwrap();
        let value = match kind.as_str() {
            "string" => {
                redis::cmd("GET")
                    .arg(&key)
                    .query_async::<String>(&mut conn)
                    .await
            }
            "hash" => redis::cmd("HGETALL")
                .arg(&key)
                .query_async::<BTreeMap<String, String>>(&mut conn)
                .await
                .map(|h| format!("{h:?}")),
            "zset" => redis::cmd("ZRANGE")
                .arg(&key)
                .arg(0)
                .arg(-1)
                .arg("WITHSCORES")
                .query_async::<Vec<String>>(&mut conn)
                .await
                .map(|z| format!("{z:?}")),
            "stream" => redis::cmd("XRANGE")
                .arg(&key)
                .arg("-")
                .arg("+")
                .query_async::<redis::Value>(&mut conn)
                .await
                .map(|x| format!("{x:?}")),
            other => Ok(format!("<{other}>")),
        }
        .unwrap();
        snapshot.insert(key, value);
    }
    snapshot
}

#[sqlx::test(migrations = "../migrations")]
async fn defect_07_a_refusal_racing_a_same_key_retry_never_frees_a_token_that_holds_seats(
    db: sqlx::PgPool,
) {
    let app = TestApp::spawn(db).await;
    let sale = open_sale(&app, &[("p1", 1), ("p2", 5)]).await;
    // Someone holds p1's only seat.
    let first = app
        .reserve(&sale, &app.token(&sale, 1, 1, 60_000), &key(), "p1", 1)
        .await
        .expect("201");
    let direct = Gatekeeper::connect(app.redis.clone(), app.keys.clone())
        .await
        .unwrap();
    // Request X runs through a proxy whose answers the test holds back.
    let proxy = ChaosProxy::start(floodgate_tests::redis_addr()).await;
    let through_proxy = floodgate_platform::runtime::connect_redis(&floodgate_tests::redis_args(
        "",
        Some(format!("redis://{}", proxy.addr)),
    ))
    .await
    .unwrap();
    let slow = Gatekeeper::connect(through_proxy, app.keys.clone())
        .await
        .unwrap();

    let claims = claims(&app, &app.token(&sale, 2, 1, 60_000));
    let retried_key = key();
    // X claims the token (that answer passes), then asks p1, which is full: the refusal is
    // decided in Redis, and its answer held before X can give the claim back.
    proxy.hold_after(1);
    let x = {
        let (claims, key) = (claims.clone(), retried_key.clone());
        tokio::spawn(async move {
            let request = ReserveRequest {
                claims: &claims,
                pool: "p1",
                seats: 1,
                idempotency_key: &key,
            };
            let id = reservation_id("p1", &"a".repeat(32));
            slow.reserve(&request, &id, "secret-x").await
        })
    };
    eventually("X's refusal is decided", WAIT, || async {
        proxy.waiting() == 1
    })
    .await;
    // The held seat comes back (its payment failed)...
    let held = first.reservation_id.as_str();
    direct
        .start_payment(&sale, "p1", held, "pay-failed")
        .await
        .unwrap();
    let target = WebhookTarget {
        sale: &sale,
        pool: "p1",
        reservation_id: held,
        event: "evt-released",
    };
    direct.release(&target, "pay-failed").await.unwrap();
    // ...and Y, the same request retried with the same key, takes it.
    let request = ReserveRequest {
        claims: &claims,
        pool: "p1",
        seats: 1,
        idempotency_key: &retried_key,
    };
    let y = direct
        .reserve(&request, &reservation_id("p1", &"b".repeat(32)), "secret-y")
        .await;
    assert!(y.is_ok(), "the retry gets the returned seat: {y:?}");
    // Now X's refusal arrives, and X gives back what it thinks is an unused claim.
    proxy.release();
    let x = x.await.unwrap();
    assert!(matches!(x, Err(ReserveError::SoldOut { .. })), "{x:?}");

    // The token holds a reservation: a new key may not make a second one elsewhere.
    let again = ReserveRequest {
        claims: &claims,
        pool: "p2",
        seats: 1,
        idempotency_key: &key(),
    };
    let z = direct
        .reserve(&again, &reservation_id("p2", &"c".repeat(32)), "secret-z")
        .await;
    assert!(
        matches!(z, Err(ReserveError::TokenSpent)),
        "one reservation per token: {z:?}"
    );
}

/// Two requests with one token and one key: X on a second booking instance whose broker never
/// answers (it waits `timeout_ms` for an ack, then aborts), and Y, sent once X's hold exists, on
/// the healthy one. Returns the sale, the token, the key, X's status (to be awaited) and Y's
/// answer.
struct Race {
    sale: String,
    token: String,
    key: String,
    x: tokio::task::JoinHandle<u16>,
    y: ReservationCreated,
}

async fn race_a_stranded_request(app: &TestApp, timeout_ms: u64) -> Race {
    let sale = open_sale(app, &[("p1", 5)]).await;
    let stranded = app.extra_booking("127.0.0.1:1", timeout_ms).await;
    let token = app.token(&sale, 1, 1, 60_000);
    let jti = claims(app, &token).jti;
    let same_key = key();
    // X reserves on the stranded instance and waits for an ack that never comes.
    let x = {
        let url = format!("http://{stranded}/v1/sales/{sale}/reservations");
        let request = app
            .http
            .post(url)
            .bearer_auth(&token)
            .header("Idempotency-Key", &same_key)
            .json(&one_seat("p1"));
        tokio::spawn(async move { request.send().await.unwrap().status().as_u16() })
    };
    let pointer = app.keys.pool(&sale, "p1").token_reservation(&jti);
    eventually("X's hold exists", WAIT, || async {
        app.redis_int_cmd("EXISTS", &pointer).await == 1
    })
    .await;
    // Y, the same request on a healthy instance, publishes the same event and gets its ack.
    let y = app
        .reserve(&sale, &token, &same_key, "p1", 1)
        .await
        .expect("Y gets its 201");
    Race {
        sale,
        token,
        key: same_key,
        x,
        y,
    }
}

#[sqlx::test(migrations = "../migrations")]
async fn defect_08_a_201_is_never_given_for_a_hold_that_another_request_aborts(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let Race {
        sale,
        token,
        key,
        x,
        y,
    } = race_a_stranded_request(&app, 3_000).await;
    // X never saw its ack; it either says so (503) or finds the hold durable and gives Y's
    // answer (201). Either way it may not take back what Y promised.
    let x = x.await.unwrap();
    assert!(x == 503 || x == 201, "{x}");

    // What Y was promised still stands.
    let now = view(&app, &sale, &y.reservation_id, &y.secret).await;
    assert_eq!(now["status"], "held", "a 201 promised a live hold: {now}");
    let again = app.reserve(&sale, &token, &key, "p1", 1).await;
    assert_eq!(again.expect("a replay").reservation_id, y.reservation_id);
}

#[sqlx::test(migrations = "../migrations")]
async fn defect_08_a_late_abort_of_a_sold_reservation_leaves_its_token_spent(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let Race {
        sale,
        token,
        key,
        x,
        y,
    } = race_a_stranded_request(&app, 4_000).await;
    let (id, secret) = (y.reservation_id, y.secret);
    // The buyer pays at once: the seat is sold while X still waits.
    app.pay(&sale, &id, &secret, "succeed").await;
    eventually("the seat is sold", WAIT, || async {
        view(&app, &sale, &id, &secret).await["status"] == "confirmed"
    })
    .await;
    let x = x.await.unwrap();
    assert!(x == 503 || x == 201, "{x}");

    // X's late abort changed nothing: a retry replays the sold reservation, no second hold.
    let again = app.reserve(&sale, &token, &key, "p1", 1).await;
    assert_eq!(
        again.expect("a replay").reservation_id,
        id,
        "one reservation per token"
    );
    let pool = app.keys.pool(&sale, "p1");
    assert_eq!(
        (
            app.redis_int(&pool.held()).await,
            app.redis_int(&pool.sold()).await
        ),
        (0, 1)
    );
}

#[sqlx::test(migrations = "../migrations")]
async fn defect_09_a_claim_lives_as_long_as_its_token_can_be_presented(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let sale = open_sale(&app, &[("p1", 5)]).await;
    let lifetime_ms: i64 = 30 * 3600 * 1000;
    let token = app.token(&sale, 1, 1, lifetime_ms);
    app.reserve(&sale, &token, &key(), "p1", 1)
        .await
        .expect("201");
    let claim = app.keys.sale(&sale).token(&claims(&app, &token).jti);
    let ttl_ms: i64 = redis::cmd("PTTL")
        .arg(&claim)
        .query_async(&mut app.redis.clone())
        .await
        .unwrap();
    assert!(
        ttl_ms >= lifetime_ms - 60_000,
        "the claim expires in {ttl_ms} ms while its token is valid for {lifetime_ms} ms"
    );
}

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
    g.start_payment(&sale, "p1", &ids[1], "pay-1")
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
            format!("{:?}", g.start_payment(&sale, "p1", &ids[0], "pay-5").await),
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

/// Runs `floodgate-booking serve` with `env` (and nothing else from this process' environment)
/// and returns its exit status and output once it exits; `None` if it was still running after
/// `within`, i.e. it started.
fn booking_serve(env: &[(String, String)], within: Duration) -> Option<(i32, String)> {
    let mut child = std::process::Command::new(floodgate_tests::binary("floodgate-booking"))
        .arg("serve")
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + within;
    while std::time::Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            let output = child.wait_with_output().unwrap();
            let text = String::from_utf8_lossy(&output.stdout).into_owned()
                + &String::from_utf8_lossy(&output.stderr);
            return Some((status.code().unwrap_or(-1), text));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// The environment of a booking service that would start, but for what a test takes away.
fn serve_env(db_url: &str, public_keys: &str) -> Vec<(&'static str, String)> {
    vec![
        ("FLOODGATE_DATABASE_URL", db_url.to_owned()),
        ("FLOODGATE_REDIS_URL", redis_url()),
        ("FLOODGATE_REDIS_PREFIX", unique("t") + ":"),
        ("FLOODGATE_KAFKA_BROKERS", floodgate_tests::kafka_brokers()),
        ("FLOODGATE_TOKEN_PUBLIC_KEYS", public_keys.to_owned()),
        ("FLOODGATE_BOOKING_LISTEN", "127.0.0.1:0".into()),
        ("FLOODGATE_ADMIN_LISTEN", "127.0.0.1:0".into()),
        (
            "FLOODGATE_WEBHOOK_SECRET",
            "whsec_0123456789abcdef0123456789abcdef".into(),
        ),
        (
            "FLOODGATE_OPS_TOKEN",
            "ops_0123456789abcdef0123456789abcdef".into(),
        ),
        (
            "FLOODGATE_AUDIT_KEY",
            "audit_0123456789abcdef0123456789abcdef".into(),
        ),
        (
            "FLOODGATE_PAYMENT_PROVIDER_URL",
            "https://payments.example.invalid".into(),
        ),
        (
            "FLOODGATE_PAYMENT_API_KEY",
            "key_0123456789abcdef0123456789abcdef".into(),
        ),
    ]
}

/// `env` without the settings named in `drop`, and with those in `set` replaced.
fn without(
    env: &[(&'static str, String)],
    drop: &[&str],
    set: &[(&str, &str)],
) -> Vec<(String, String)> {
    env.iter()
        .filter(|(k, _)| !drop.contains(k) && !set.iter().any(|(s, _)| s == k))
        .map(|(k, v)| (k.to_string(), v.clone()))
        .chain(set.iter().map(|(k, v)| (k.to_string(), v.to_string())))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn defect_15_16_the_booking_service_refuses_to_start_without_real_secrets() {
    let (db_url, _db) = floodgate_tests::fresh_database().await;
    let signer = floodgate_protocol::token::TokenSigner::generate("k");
    let keys = format!("k={}", signer.public_base64());
    let env = serve_env(&db_url, &keys);
    let cases: Vec<(&str, Vec<(String, String)>)> = vec![
        (
            "FLOODGATE_PAYMENT_PROVIDER_URL",
            without(&env, &["FLOODGATE_PAYMENT_PROVIDER_URL"], &[]),
        ),
        (
            "FLOODGATE_PAYMENT_API_KEY",
            without(&env, &["FLOODGATE_PAYMENT_API_KEY"], &[]),
        ),
        (
            "FLOODGATE_OPS_TOKEN",
            without(&env, &[], &[("FLOODGATE_OPS_TOKEN", "")]),
        ),
        (
            "FLOODGATE_OPS_TOKEN",
            without(&env, &[], &[("FLOODGATE_OPS_TOKEN", "short")]),
        ),
        (
            "FLOODGATE_WEBHOOK_SECRET",
            without(&env, &[], &[("FLOODGATE_WEBHOOK_SECRET", "")]),
        ),
        (
            "FLOODGATE_WEBHOOK_SECRET",
            without(&env, &[], &[("FLOODGATE_WEBHOOK_SECRET", "tiny")]),
        ),
    ];
    for (setting, env) in cases {
        let ended = tokio::task::spawn_blocking(move || booking_serve(&env, WAIT))
            .await
            .unwrap();
        let Some((code, output)) = ended else {
            panic!("the booking service started without a proper {setting}");
        };
        assert_ne!(code, 0, "{output}");
        assert!(output.contains(setting), "{setting} not named in: {output}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn defect_18_urls_with_credentials_are_never_printed() {
    const PASSWORD: &str = "hunter2-do-not-print";
    let database = format!("postgres://floodgate:{PASSWORD}@127.0.0.1:1/floodgate");
    let redis = format!("redis://:{PASSWORD}@127.0.0.1:1");
    let run = |binary: &str, args: &[&str]| {
        let output = std::process::Command::new(floodgate_tests::binary(binary))
            .args(args)
            .env_clear()
            .env("FLOODGATE_DATABASE_URL", &database)
            .env("FLOODGATE_REDIS_URL", &redis)
            .env("FLOODGATE_TOKEN_PUBLIC_KEYS", "k=AAAA")
            .env("FLOODGATE_TOKEN_KEY_ID", "k")
            .env(
                "FLOODGATE_TOKEN_SIGNING_KEY",
                "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
            )
            .output()
            .unwrap();
        String::from_utf8_lossy(&output.stdout).into_owned()
            + &String::from_utf8_lossy(&output.stderr)
    };
    for (binary, args) in [
        ("floodgate-booking", vec!["serve", "--help"]),
        ("floodgate-booking", vec!["migrate", "--help"]),
        ("floodgate-booking", vec!["migrate"]),
        ("floodgate-consumer", vec!["--help"]),
        ("floodgate-gateway", vec!["serve", "--help"]),
        ("floodgate-gateway", vec!["serve"]),
    ] {
        let output = run(binary, &args);
        assert!(
            !output.contains(PASSWORD),
            "{binary} {args:?} printed the password:\n{output}"
        );
    }
}

#[sqlx::test(migrations = "../migrations")]
async fn defect_19_metrics_are_not_on_the_public_listeners(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    for public in [app.gateway, app.booking] {
        let (status, body) = app
            .answer(app.http.get(format!("http://{public}/metrics")))
            .await;
        assert_eq!(status, 404, "{public}: {body}");
    }
}

#[sqlx::test(migrations = "../migrations")]
async fn defect_21_every_field_error_has_its_documented_code(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let sale = open_sale(&app, &[("p1", 5)]).await;
    let path = format!("/admin/v1/sales/{sale}");
    for (body, code) in [
        (json!({"admission_rate": "fast"}), "invalid_rate"),
        (json!({"admission_rate": null}), "invalid_rate"),
        (json!({"active_cap": -1}), "invalid_cap"),
        (json!({"active_cap": 1.5}), "invalid_cap"),
        (json!({"active_cap": "many"}), "invalid_cap"),
        (json!({"active_cap": 1e30}), "invalid_cap"),
    ] {
        let (status, reply) = app
            .ops(
                reqwest::Method::PATCH,
                &path,
                &app.ops_token,
                Some(body.clone()),
            )
            .await;
        assert_eq!(
            (status, reply["error"].as_str()),
            (422, Some(code)),
            "{body}: {reply}"
        );
        let message = reply["message"].as_str().unwrap_or_default();
        assert!(
            !message.contains("line ") && !message.contains("column"),
            "{body}: a message for people, not the parser's: {message}"
        );
    }
    let token = app.token(&sale, 1, 2, 60_000);
    for seats in [
        json!(-1),
        json!(1e30),
        json!(1.5),
        json!("2"),
        json!(null),
        json!(0),
    ] {
        let (status, reply) = app
            .post_reservation(
                &sale,
                &token,
                &key(),
                &json!({"pool": "p1", "seats": seats}),
            )
            .await;
        assert_eq!(
            (status, reply["error"].as_str()),
            (422, Some("invalid_seats")),
            "seats {seats}: {reply}"
        );
    }
}
