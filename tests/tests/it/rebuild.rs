//! A pool whose Redis state is wiped in the middle of a sale: refused until rebuilt from
//! PostgreSQL and the Kafka tail, then the sale finishes with no seat sold twice.

use std::time::Duration;

use floodgate_protocol::api::booking::ReservationCreated;
use floodgate_protocol::api::code;
use floodgate_protocol::settings::Door;
use floodgate_tests::{
    assert_refused, eventually, fresh_database, unique, Answer, SaleSpec, TestApp,
};

async fn reserve(app: &TestApp, sale: &str, ticket: u64) -> Answer<ReservationCreated> {
    let token = app.token(sale, ticket, 1, 120_000);
    reserve_with(app, sale, &token, &format!("key-{ticket}")).await
}

async fn reserve_with(
    app: &TestApp,
    sale: &str,
    token: &str,
    key: &str,
) -> Answer<ReservationCreated> {
    app.reserve(sale, token, key, "p1", 1).await
}

/// Deletes every key of the sale's pool `p1`, as a Redis that lost it would.
async fn wipe_pool(app: &TestApp, sale: &str) {
    let pattern = format!("{}{{p:{sale}/p1}}*", app.keys.prefix());
    let mut conn = app.redis.clone();
    let lost: Vec<String> = redis::cmd("KEYS")
        .arg(&pattern)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(!lost.is_empty());
    let _: () = redis::cmd("DEL")
        .arg(&lost)
        .query_async(&mut conn)
        .await
        .unwrap();
}

async fn rows(db: &sqlx::PgPool, status: &str) -> i64 {
    sqlx::query_scalar("select count(*) from bookings where status = $1")
        .bind(status)
        .fetch_one(db)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wiped_pool_is_refused_until_rebuilt_and_then_sells_no_seat_twice() {
    const CAPACITY: u64 = 8;
    let (url, db) = fresh_database().await;
    let app = TestApp::spawn(db.clone()).await;
    let sale = unique("rebuild-");
    let spec = SaleSpec {
        pools: vec![("p1".into(), CAPACITY as u32)],
        opens_in: Duration::from_millis(500),
        hold_ttl_secs: 10,
        ..SaleSpec::default()
    };
    app.create_sale(&sale, &spec).await;
    tokio::time::sleep(Duration::from_millis(600)).await; // past the opening

    // Mid-sale: two seats paid, two held.
    let mut ticket = 0;
    let mut tokens = Vec::new();
    for pay in [true, true, false, false] {
        ticket += 1;
        let token = app.token(&sale, ticket, 1, 120_000);
        let body = reserve_with(&app, &sale, &token, &format!("key-{ticket}"))
            .await
            .expect("201");
        tokens.push(token);
        if pay {
            app.pay(&sale, &body.reservation_id, &body.secret, "succeed")
                .await;
        }
    }
    eventually(
        "the sale so far in PostgreSQL",
        Duration::from_secs(30),
        || async { rows(&db, "CONFIRMED").await == 2 && rows(&db, "PENDING_PAYMENT").await == 2 },
    )
    .await;

    // Redis loses the pool.
    wipe_pool(&app, &sale).await;

    // Refused, not read as empty or as full.
    ticket += 1;
    assert_refused(reserve(&app, &sale, ticket).await, 503, "pool_unavailable");

    let (code, said) = app.booking_command(&url, &["sale", "rebuild", &sale, "p1"]);
    assert_eq!(code, 0, "{said}");
    assert!(
        said.contains("available 4, held 2, sold 2 (4 reservation records restored)"),
        "{said}"
    );

    // Tokens that reserved before the loss cannot reserve again, even with a new key: neither
    // the one whose seat was paid nor the one whose hold was restored.
    for token in [&tokens[0], &tokens[2]] {
        assert_refused(
            reserve_with(&app, &sale, token, "another-key").await,
            409,
            "token_spent",
        );
    }

    // The sale goes on: the four free seats sell (and are paid, so they stay sold while the
    // restored holds run out), then it is sold out...
    let mut sold_after = 0;
    loop {
        ticket += 1;
        match reserve(&app, &sale, ticket).await {
            Ok(body) => {
                app.pay(&sale, &body.reservation_id, &body.secret, "succeed")
                    .await;
                sold_after += 1;
            }
            Err(refused) if refused.code() == code::SOLD_OUT => break,
            Err(other) => panic!("unexpected {other}"),
        }
    }
    assert_eq!(sold_after, 4);
    // ...until the two restored holds expire unpaid and their seats return, exactly once each.
    eventually(
        "the restored holds expire",
        Duration::from_secs(30),
        || async { rows(&db, "EXPIRED").await == 2 },
    )
    .await;
    for _ in 0..2 {
        ticket += 1;
        reserve(&app, &sale, ticket).await.expect("201");
    }
    ticket += 1;
    assert_refused(reserve(&app, &sale, ticket).await, 409, "sold_out");

    // No seat sold twice: Redis balances, and PostgreSQL never has more live bookings than seats.
    let pool = app.keys.pool(&sale, "p1");
    let (available, held, sold) = (
        app.redis_int(&pool.available()).await,
        app.redis_int(&pool.held()).await,
        app.redis_int(&pool.sold()).await,
    );
    assert_eq!((available, held + sold), (0, CAPACITY as i64));
    eventually(
        "every hold in PostgreSQL",
        Duration::from_secs(30),
        || async {
            rows(&db, "PENDING_PAYMENT").await + rows(&db, "CONFIRMED").await == CAPACITY as i64
        },
    )
    .await;
}

/// A hold restored by a rebuild still names its buyer: when it expires unpaid, the buyer's seats
/// come back to them (the per-buyer limit), as they would for a hold that never left Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebuilt_hold_gives_its_buyers_seats_back_when_it_expires() {
    let (url, db) = fresh_database().await;
    let app = TestApp::spawn(db.clone()).await;
    let sale = unique("rebuild-buyer-");
    let spec = SaleSpec {
        pools: vec![("p1".into(), 10)],
        opens_in: Duration::from_millis(500),
        hold_ttl_secs: 3,
        door: Door {
            identity: floodgate_protocol::settings::IdentityRule::Required,
            max_seats_per_buyer: Some(1),
            ..Door::default()
        },
        ..SaleSpec::default()
    };
    app.create_sale(&sale, &spec).await;
    app.until_open(&sale).await;
    let dave = app.booking_client().signed_in(app.identity("dave").await);
    let pass = app.buyer_token(&sale, 1, 1, 120_000, Some("dave"));
    dave.reserve(&sale, &pass, "k1", "p1", 1)
        .await
        .expect("201");
    eventually(
        "the hold in PostgreSQL",
        Duration::from_secs(30),
        || async { rows(&db, "PENDING_PAYMENT").await == 1 },
    )
    .await;

    wipe_pool(&app, &sale).await;
    let (code, said) = app.booking_command(&url, &["sale", "rebuild", &sale, "p1"]);
    assert_eq!(code, 0, "{said}");
    // Dave's one seat is held: a second pass is over the limit, until the restored hold expires.
    let second = app.buyer_token(&sale, 2, 1, 120_000, Some("dave"));
    assert_refused(
        dave.reserve(&sale, &second, "k2", "p1", 1).await,
        409,
        "buyer_limit",
    );
    eventually(
        "the restored hold expires",
        Duration::from_secs(30),
        || async { rows(&db, "EXPIRED").await == 1 },
    )
    .await;
    eventually(
        "dave's seat is his to hold again",
        Duration::from_secs(30),
        || {
            let (dave, second, sale) = (dave.clone(), second.clone(), sale.clone());
            async move {
                dave.reserve(&sale, &second, &unique("k"), "p1", 1)
                    .await
                    .is_ok()
            }
        },
    )
    .await;
}

/// A pool that lost only its state, not its reservation records, rebuilt while a payer is at the
/// provider's checkout: the payment they were sent to still buys the hold. Before, the rebuild
/// rewrote each record it kept without the payment started for it, and the payment, arriving
/// after, was refunded as one nobody started (`unexpected_payment`), the hold left to lapse.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkout_begun_before_a_rebuild_still_buys_the_hold() {
    let (url, db) = fresh_database().await;
    let app = TestApp::spawn(db.clone()).await;
    let sale = unique("rebuild-paying-");
    let spec = SaleSpec {
        pools: vec![("p1".into(), 4)],
        opens_in: Duration::from_millis(500),
        ..SaleSpec::default()
    };
    app.create_sale(&sale, &spec).await;
    app.until_open(&sale).await;
    let held = reserve(&app, &sale, 1).await.expect("201");
    let started = app
        .booking_client()
        .start_payment(&sale, &held.reservation_id, &held.secret)
        .await
        .expect("the payment starts");
    eventually(
        "the hold in PostgreSQL",
        Duration::from_secs(30),
        || async { rows(&db, "PENDING_PAYMENT").await == 1 },
    )
    .await;

    // Redis loses the pool's state; its reservation record survives.
    let _: () = redis::cmd("DEL")
        .arg(app.keys.pool(&sale, "p1").config())
        .query_async(&mut app.redis.clone())
        .await
        .unwrap();
    let (code, said) = app.booking_command(&url, &["sale", "rebuild", &sale, "p1"]);
    assert_eq!(code, 0, "{said}");

    floodgate_client::booking::sandbox_checkout(
        &app.http,
        app.sandbox,
        &started.payment_id,
        &serde_json::json!({ "outcome": "succeed" }),
    )
    .await
    .expect("the sandbox takes the checkout");
    eventually(
        "the payment buys the hold",
        Duration::from_secs(30),
        || async { rows(&db, "CONFIRMED").await == 1 },
    )
    .await;
}
