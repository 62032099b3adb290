//! Dependencies failing under the booking service: the broker, Redis, the booking process itself,
//! and lost Redis state. Each test breaks only a private broker, a fault-injecting proxy or its
//! own process, never the shared services other tests use. [`broker`]: the broker's storage
//! dying under the service.

mod broker;

use std::process::{Command, Stdio};
use std::time::Duration;

use floodgate_protocol::api::booking::ReservationCreated;
use floodgate_tests::broker::PrivateBroker;
use floodgate_tests::chaos::ChaosProxy;
use floodgate_tests::{assert_refused, eventually, unique, SaleSpec, TestApp, TestOptions};
use serde_json::json;

fn key() -> String {
    uuid::Uuid::new_v4().to_string()
}

async fn open_sale(app: &TestApp, seats: u32) -> String {
    let sale = unique("outage-");
    app.create_sale(
        &sale,
        &SaleSpec {
            pools: vec![("p1".into(), seats)],
            ..SaleSpec::default()
        },
    )
    .await;
    sale
}

async fn counters(app: &TestApp, sale: &str) -> (i64, i64) {
    let pool = app.keys.pool(sale, "p1");
    (
        app.redis_int(&pool.available()).await,
        app.redis_int(&pool.held()).await,
    )
}

async fn row_status(app: &TestApp, reservation: &str) -> Option<String> {
    sqlx::query_scalar("select status from bookings where reservation_id = $1")
        .bind(reservation)
        .fetch_optional(&app.db)
        .await
        .unwrap()
}

/// Retries one reservation request (same key) while the answer is 503, as a client does
/// while a dependency comes back: its 201.
async fn once_served(app: &TestApp, sale: &str, token: &str, key: &str) -> ReservationCreated {
    eventually("the service answers", Duration::from_secs(60), || async {
        let answer = app.reserve(sale, token, key, "p1", 1).await;
        Some(answer).filter(|a| !matches!(a, Err(refused) if refused.status() == 503))
    })
    .await
    .expect("201")
}

/// The app on a private `broker`, a reservation waiting 1.5 s for its acknowledgement.
async fn app_on(db: sqlx::PgPool, broker: &PrivateBroker) -> TestApp {
    TestApp::spawn_with(
        db,
        TestOptions {
            kafka_brokers: Some(broker.address()),
            delivery_timeout_ms: 1_500,
            ..TestOptions::default()
        },
    )
    .await
}

#[sqlx::test(migrations = "../migrations")]
async fn with_the_broker_down_a_reserve_gets_503_and_leaves_no_hold(db: sqlx::PgPool) {
    let mut broker = PrivateBroker::start().await;
    // The consumer starts only once the fresh broker has the topic again: a librdkafka consumer
    // that fetches a topic the broker does not know dies with SIGSEGV (docs/upstream.md, the
    // first report), and this one runs in the test's own process, with no supervisor to start
    // it again.
    let app = TestApp::spawn_with(
        db,
        TestOptions {
            kafka_brokers: Some(broker.address()),
            delivery_timeout_ms: 1_500,
            consumer: false,
            ..TestOptions::default()
        },
    )
    .await;
    let sale = open_sale(&app, 5).await;

    broker.stop();
    let token = app.token(&sale, 1, 1, 120_000);
    let retry_key = key();
    assert_refused(
        app.reserve(&sale, &token, &retry_key, "p1", 1).await,
        503,
        "broker_unavailable",
    );
    assert_eq!(
        counters(&app, &sale).await,
        (5, 0),
        "no hold is left behind"
    );

    // The broker comes back: the same request (same key) now succeeds, by itself.
    // The broker returns, empty (Tansu 0.6's sqlite engine can fail requests after a kill and
    // restart on the same data; an empty broker is the harder case anyway: everything must come
    // from Floodgate's own outbox).
    broker.resume_fresh().await;
    // As an operator would after a broker lost everything: `topics ensure` (the topic, its
    // dead letters and the probe topic by which the booking service notices the broker back;
    // without it only a trial request every 30 s does, and one may fail on a broker still
    // settling, past this test's minute).
    floodgate_tests::ensure_topics(&broker.address(), &app.topic, 3).await;
    app.start_consumer();
    let created = once_served(&app, &sale, &token, &retry_key).await;
    assert_eq!(counters(&app, &sale).await, (4, 1));

    // Downstream: the aborted attempt (and any retry that timed out while the broker was coming
    // back) is recorded as ABORTED, its SeatReserved cancelled; the successful one as
    // PENDING_PAYMENT.
    let id = created.reservation_id;
    eventually("the 201 persisted", Duration::from_secs(60), || async {
        row_status(&app, &id).await.as_deref() == Some("PENDING_PAYMENT")
    })
    .await;
    eventually(
        "the aborted attempt recorded",
        Duration::from_secs(60),
        || async {
            sqlx::query_scalar::<_, i64>(
                "select count(*) from bookings where sale_id = $1 and status = 'ABORTED'",
            )
            .bind(&sale)
            .fetch_one(&app.db)
            .await
            .unwrap()
                >= 1
        },
    )
    .await;
    let live: i64 = sqlx::query_scalar(
        "select count(*) from bookings where sale_id = $1 and status <> 'ABORTED'",
    )
    .bind(&sale)
    .fetch_one(&app.db)
    .await
    .unwrap();
    assert_eq!(live, 1, "one live booking, as in Redis");
}

#[sqlx::test(migrations = "../migrations")]
async fn with_redis_unreachable_nothing_is_granted_and_service_resumes(db: sqlx::PgPool) {
    let proxy = ChaosProxy::start(floodgate_tests::redis_addr()).await;
    let app = TestApp::spawn_with(db, TestOptions::booking_redis_at(proxy.addr)).await;
    let sale = open_sale(&app, 5).await;
    let body = json!({ "pool": "p1", "seats": 1 });

    proxy.cut();
    let token = app.token(&sale, 1, 1, 120_000);
    let response = app
        .http
        .post(app.reservations_url(&sale))
        .bearer_auth(&token)
        .header("Idempotency-Key", key())
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 503);
    assert_eq!(response.headers()["retry-after"], "1");
    let reply: serde_json::Value = response.json().await.unwrap();
    assert_eq!(reply["error"], "redis_unavailable");
    assert_eq!(counters(&app, &sale).await, (5, 0), "nothing granted");

    proxy.restore();
    once_served(&app, &sale, &token, &key()).await;
    assert_eq!(counters(&app, &sale).await, (4, 1));
}

#[sqlx::test(migrations = "../migrations")]
async fn a_booking_process_killed_before_its_publish_loses_nothing(db: sqlx::PgPool) {
    let app = TestApp::spawn_with(
        db.clone(),
        TestOptions {
            delivery_timeout_ms: 1_000,
            ..TestOptions::default()
        },
    )
    .await;
    let sale = open_sale(&app, 5).await;

    // A second booking process, real and separate, whose broker accepts connections and never
    // answers: its reservation is made in Redis and then hangs before the publish.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_addr = silent.local_addr().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let db_url: String = sqlx::query_scalar("select current_database()")
        .fetch_one(&db)
        .await
        .unwrap();
    let server = std::env::var("DATABASE_URL").unwrap();
    let db_url = format!("{}/{db_url}", server.rsplit_once('/').unwrap().0);
    let mut doomed = Command::new(floodgate_tests::binary("floodgate-booking"))
        .arg("serve")
        .env("FLOODGATE_BOOKING_LISTEN", format!("127.0.0.1:{port}"))
        .env("FLOODGATE_DATABASE_URL", db_url)
        .env("FLOODGATE_REDIS_URL", floodgate_tests::redis_url())
        .env("FLOODGATE_REDIS_PREFIX", app.keys.prefix())
        .env("FLOODGATE_KAFKA_BROKERS", silent_addr.to_string())
        .env("FLOODGATE_RESERVATIONS_TOPIC", &app.topic)
        .env("FLOODGATE_DELIVERY_TIMEOUT_MS", "600000")
        .env(
            "FLOODGATE_TOKEN_PUBLIC_KEYS",
            format!("{}={}", app.signer.kid(), app.signer.public_base64()),
        )
        .env(
            "FLOODGATE_WEBHOOK_SECRET",
            floodgate_tests::secret("whsec_"),
        )
        .env("FLOODGATE_OPS_TOKEN", floodgate_tests::secret("ops_"))
        .env("FLOODGATE_AUDIT_KEY", floodgate_tests::secret("audit_"))
        .env("FLOODGATE_RESERVATION_KEY", &app.reservation_key)
        .env("FLOODGATE_ADMIN_LISTEN", "127.0.0.1:0")
        .env("FLOODGATE_PAYMENT_SANDBOX", "true")
        .env("FLOODGATE_PAYMENT_API_KEY", floodgate_tests::secret("pk_"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the booking binary runs");
    let doomed_url = format!("http://127.0.0.1:{port}/v1/sales/{sale}/reservations");
    eventually(
        "the second booking process is up",
        Duration::from_secs(30),
        || async {
            app.http
                .get(format!("http://127.0.0.1:{port}/healthz"))
                .send()
                .await
                .is_ok()
        },
    )
    .await;

    let token = app.token(&sale, 1, 1, 120_000);
    let retry_key = key();
    let request = app
        .http
        .post(&doomed_url)
        .bearer_auth(&token)
        .header("Idempotency-Key", &retry_key)
        .json(&json!({ "pool": "p1", "seats": 1 }))
        .send();
    let in_flight = tokio::spawn(request);
    eventually(
        "the hold made in Redis",
        Duration::from_secs(20),
        || async { counters(&app, &sale).await == (4, 1) },
    )
    .await;
    // Killed after its Redis change, before any publish could be acknowledged.
    doomed.kill().expect("kill -9");
    doomed.wait().unwrap();
    assert!(
        in_flight.await.unwrap().is_err(),
        "the client never got an answer"
    );

    // The surviving instance's relay publishes the orphaned SeatReserved from the outbox.
    let outbox = app.keys.pool(&sale, "p1").outbox();
    let reservation: String = eventually("the orphaned event persisted", Duration::from_secs(60), || async {
            sqlx::query_scalar("select reservation_id from bookings where sale_id = $1 and status = 'PENDING_PAYMENT'")
                .bind(&sale)
                .fetch_optional(&app.db)
                .await
                .unwrap()
        })
        .await;
    eventually("the outbox drained", Duration::from_secs(20), || async {
        app.redis_int_cmd("XLEN", &outbox).await == 0
    })
    .await;
    // And the client's retry, on the surviving instance, gets the very reservation that was made.
    let body = app
        .reserve(&sale, &token, &retry_key, "p1", 1)
        .await
        .expect("201");
    assert_eq!(body.reservation_id, reservation);
    assert_eq!(counters(&app, &sale).await, (4, 1), "one hold, not two");
    drop(silent);
}

#[sqlx::test(migrations = "../migrations")]
async fn a_pool_or_sale_whose_redis_state_was_lost_is_refused_with_503(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let sale = open_sale(&app, 5).await;
    let mut conn = app.redis.clone();

    // The pool's counters vanish (a restart without persistence, a failover that lost writes).
    let pool = app.keys.pool(&sale, "p1");
    let _: i64 = redis::cmd("DEL")
        .arg(pool.available())
        .arg(pool.config())
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_refused(
        app.reserve(&sale, &app.token(&sale, 1, 1, 60_000), &key(), "p1", 1)
            .await,
        503,
        "pool_unavailable",
    );
    assert_eq!(
        app.redis_int(&pool.held()).await,
        0,
        "nothing was granted from a lost pool"
    );

    // The whole sale vanishes from Redis, but the catalog says it was armed: still an outage.
    let _: i64 = redis::cmd("DEL")
        .arg(app.keys.sale(&sale).meta())
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_refused(
        app.reserve(&sale, &app.token(&sale, 2, 1, 60_000), &key(), "p1", 1)
            .await,
        503,
        "sale_unavailable",
    );
}
