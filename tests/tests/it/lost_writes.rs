//! A pool whose Redis comes back from a failover without its latest writes (the promoted
//! replica had not received them) while Kafka and PostgreSQL have them: it is found by its event
//! sequence, refused, and `sale reconcile --repair` replays PostgreSQL into it.

use std::time::Duration;

use floodgate_consumer::store::{apply_batch, decode};
use floodgate_protocol::events::Event;
use floodgate_tests::{
    assert_refused, event, eventually, fresh_database, fresh_db, unique, SaleSpec, TestApp,
};

const WAIT: Duration = Duration::from_secs(30);

/// Every key of pool p1's slot now (a test may look keys up; the services never do).
async fn slot_keys(app: &TestApp, sale: &str) -> Vec<String> {
    let pattern = format!("{}{{p:{sale}/p1}}*", app.keys.prefix());
    redis::cmd("KEYS")
        .arg(&pattern)
        .query_async(&mut app.redis.clone())
        .await
        .unwrap()
}

/// Every key of the pool's slot, with its serialized value and time to live: what a replica
/// that stopped receiving writes at this instant would have.
async fn snapshot(app: &TestApp, sale: &str) -> Vec<(String, Vec<u8>, i64)> {
    let mut conn = app.redis.clone();
    let keys = slot_keys(app, sale).await;
    let mut out = Vec::new();
    for key in keys {
        let dump: Vec<u8> = redis::cmd("DUMP")
            .arg(&key)
            .query_async(&mut conn)
            .await
            .unwrap();
        let ttl: i64 = redis::cmd("PTTL")
            .arg(&key)
            .query_async(&mut conn)
            .await
            .unwrap();
        out.push((key, dump, ttl.max(0)));
    }
    out
}

/// The pool's slot as it was in `snapshot`: the failover to the replica that missed the rest.
async fn fail_over_to(app: &TestApp, sale: &str, snapshot: &[(String, Vec<u8>, i64)]) {
    let mut conn = app.redis.clone();
    let now = slot_keys(app, sale).await;
    let mut pipe = redis::pipe();
    pipe.atomic().del(&now);
    for (key, dump, ttl) in snapshot {
        pipe.cmd("RESTORE").arg(key).arg(*ttl).arg(dump).ignore();
    }
    let _: () = pipe.query_async(&mut conn).await.unwrap();
}

fn reconcile(app: &TestApp, url: &str, sale: &str, repair: bool) -> (bool, String) {
    let mut args = vec!["sale", "reconcile", sale];
    if repair {
        args.push("--repair");
    }
    let (code, said) = app.booking_command(url, &args);
    (code == 0, said)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_that_lost_writes_is_refused_until_reconciled() {
    const CAPACITY: i64 = 8;
    let (url, db) = fresh_database().await;
    let app = TestApp::spawn(db.clone()).await;
    let sale = unique("lostw-");
    let spec = SaleSpec {
        pools: vec![("p1".into(), CAPACITY as u32)],
        opens_in: Duration::from_millis(500),
        ..SaleSpec::default()
    };
    app.create_sale(&sale, &spec).await;
    app.until_open(&sale).await;

    // A is reserved and paid; the replica has all of that.
    let a = app
        .reserve(&sale, &app.token(&sale, 1, 1, 120_000), "key-a", "p1", 1)
        .await
        .expect("201");
    app.pay(&sale, &a.reservation_id, &a.secret, "succeed")
        .await;
    eventually("A confirmed in PostgreSQL", WAIT, || async {
        app.bookings(&sale, "CONFIRMED").await == 1
    })
    .await;
    let replica = snapshot(&app, &sale).await;

    // B is reserved, answered 201, and reaches Kafka and PostgreSQL; the replica never gets it.
    let b_token = app.token(&sale, 2, 1, 120_000);
    let b = app
        .reserve(&sale, &b_token, "key-b", "p1", 1)
        .await
        .expect("201");
    eventually("B in PostgreSQL", WAIT, || async {
        app.bookings(&sale, "PENDING_PAYMENT").await == 1
    })
    .await;
    fail_over_to(&app, &sale, &replica).await;

    // Redis now lacks B, and would sell its seat again. The booking service finds the pool
    // behind Kafka's sequence and refuses it.
    let pool = app.keys.pool(&sale, "p1");
    let mut conn = app.redis.clone();
    eventually("the pool is refused", WAIT, || {
        let (mut conn, cfg) = (conn.clone(), pool.config());
        async move {
            let mark: Option<String> = redis::cmd("HGET")
                .arg(&cfg)
                .arg("diverged")
                .query_async(&mut conn)
                .await
                .unwrap();
            mark.is_some()
        }
    })
    .await;
    let c_token = app.token(&sale, 3, 1, 120_000);
    assert_refused(
        app.reserve(&sale, &c_token, "key-c", "p1", 1).await,
        503,
        "pool_unavailable",
    );

    let (clean, said) = reconcile(&app, &url, &sale, false);
    assert!(!clean, "a pool that lost writes is a drift: {said}");
    assert!(said.contains("Redis lost writes in a failover"), "{said}");

    let (clean, said) = reconcile(&app, &url, &sale, true);
    assert!(clean, "{said}");
    assert!(
        said.contains("p1: rebuilt from PostgreSQL: available 6, held 1, sold 1"),
        "{said}"
    );

    // B's hold is back; its token cannot reserve again; A's holder still reads A with its secret.
    let held: Vec<String> = redis::cmd("HKEYS")
        .arg(pool.holds())
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(held, vec![b.reservation_id.clone()]);
    assert_refused(
        app.reserve(&sale, &b_token, "another-key", "p1", 1).await,
        409,
        "token_spent",
    );
    let (status, view) = app
        .answer(
            app.http
                .get(format!(
                    "http://{}/v1/sales/{sale}/reservations/{}",
                    app.booking, a.reservation_id
                ))
                .bearer_auth(&a.secret),
        )
        .await;
    assert_eq!((status, view["status"].as_str()), (200, Some("confirmed")));

    // The pool sells again, its sequence past every number Kafka has, and nothing drifts.
    app.reserve(&sale, &c_token, "key-c", "p1", 1)
        .await
        .expect("201 after the repair");
    let (available, held, sold) = (
        app.redis_int(&pool.available()).await,
        app.redis_int(&pool.held()).await,
        app.redis_int(&pool.sold()).await,
    );
    assert_eq!((available, held, sold), (5, 2, 1));
    eventually("PostgreSQL has C", WAIT, || async {
        app.bookings(&sale, "PENDING_PAYMENT").await == 2
    })
    .await;
    let (clean, said) = reconcile(&app, &url, &sale, false);
    assert!(clean, "{said}");
}

#[tokio::test]
async fn the_consumer_marks_a_number_given_twice() {
    let db = fresh_db().await;
    let (sale, pool) = (unique("seq-"), "p1");
    let numbered = |reservation: &str, seq: i64| {
        let mut envelope = event(&sale, pool, reservation, Event::SeatReserved);
        envelope.seq = Some(seq);
        decode(&envelope.to_json(), 0, seq).unwrap()
    };
    let mark = || async {
        sqlx::query_as::<_, (i64, bool)>(
            "select seq, diverged_at is not null from pool_sequences where sale_id = $1",
        )
        .bind(&sale)
        .fetch_one(&db)
        .await
        .unwrap()
    };
    // Numbers out of order (the relay sends late ones) and a redelivery are not divergence.
    apply_batch(&db, &[numbered("r2", 2), numbered("r1", 1)], None)
        .await
        .unwrap();
    apply_batch(&db, &[numbered("r2", 2)], None).await.unwrap();
    assert_eq!(mark().await, (2, false));
    // Another event with number 2: the pool's Redis gave it out again.
    apply_batch(&db, &[numbered("r9", 2)], None).await.unwrap();
    assert_eq!(mark().await, (2, true));
}
