//! Copies of one request refused for good answer what the first would: never a 503 the first
//! would not have given (a 503 counts as the backend failing, and sends the client back again).
//!
//! The interleaving is staged in Redis as three concurrent copies A < B < C of one key leave it
//! on a sold-out pool: A claimed and still within its deadline (on its way to the pool), C
//! refused at the pool and fenced (its fence stops every copy stamped below it, A and B too), and
//! C not yet released. B then reaches the pool: it is covered by C's fence, so it may answer its
//! refusal at once, as C does. Before the fix B released as if nothing had fenced A and answered
//! 503 `reservation_unsettled`.

use floodgate_protocol::now_millis;
use floodgate_protocol::token::AdmissionClaims;
use floodgate_tests::{unique, SaleSpec, TestApp};

#[sqlx::test(migrations = "../migrations")]
async fn a_copy_covered_by_a_later_copys_fence_answers_sold_out_not_503(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let sale = unique("copies-");
    let spec = SaleSpec {
        pools: vec![("p1".into(), 1)],
        ..SaleSpec::default()
    };
    app.create_sale(&sale, &spec).await;
    // Someone else takes the only seat.
    let other = app.token(&sale, 99, 1, 60_000);
    app.reserve(&sale, &other, "other", "p1", 1)
        .await
        .expect("201");

    let now = now_millis();
    let jti = unique("pass-");
    let token = app.signer.sign(&AdmissionClaims {
        sale: sale.clone(),
        ticket: 1,
        jti: jti.clone(),
        max_seats: 1,
        iat_ms: now,
        exp_ms: now + 60_000,
        buyer: None,
    });
    let key = "the-same-key";
    // A (stamped a little before now) within its deadline; C stamped after B will be, refused
    // and fenced at the pool, its own attempt not yet released.
    let (a, c) = (now - 50, now + 600_000);
    let record = app.keys.sale(&sale).token(&jti);
    let mut conn = app.redis.clone();
    // (`last` is A's: B, claimed through the API below, is stamped at about now, between them.)
    let _: () = redis::cmd("HSET")
        .arg(&record)
        .arg(&["idem", key, "fp", "p1|1"])
        .arg("last")
        .arg(a)
        .arg(format!("a:{a}"))
        .arg(now + 60_000)
        .arg(format!("a:{c}"))
        .arg(c + 60_000)
        .query_async(&mut conn)
        .await
        .unwrap();
    let pointer = app.keys.pool(&sale, "p1").token_reservation(&jti);
    let _: () = redis::cmd("HSET")
        .arg(&pointer)
        .arg(format!("f:{key}"))
        .arg(c)
        .query_async(&mut conn)
        .await
        .unwrap();

    // B: a copy of the same request, stamped between A and C.
    let answer = app.reserve(&sale, &token, key, "p1", 1).await;
    match answer {
        Err(refused) => assert_eq!(
            (refused.status(), refused.code()),
            (409, "sold_out"),
            "a copy covered by a later copy's fence answers as that copy does"
        ),
        Ok(created) => panic!("no seat was left, yet {created:?}"),
    }
}

/// The buyer's limit, the same race: copy A of a key claimed the pass and is on its way, and
/// copy B finds the buyer at their limit (another pass's hold). B's refusal fences A off in the
/// buyer's record (A can no longer count seats, so it can never reach the pool), so B gives the
/// pass back and answers 409 `buyer_limit` at once, as the first copy would have. Before, B
/// answered 503 `reservation_unsettled` (A might yet have taken seats), which sent the client
/// back again and, until the last fix, counted against the sale's health.
#[sqlx::test(migrations = "../migrations")]
async fn copies_racing_at_the_buyers_limit_answer_buyer_limit_not_503(db: sqlx::PgPool) {
    use floodgate_protocol::settings::{Door, IdentityRule};

    let app = TestApp::spawn(db).await;
    let sale = unique("copies-");
    let spec = SaleSpec {
        opens_in: std::time::Duration::from_secs(1),
        pools: vec![("p1".into(), 50)],
        door: Door {
            identity: IdentityRule::Required,
            max_seats_per_buyer: Some(1),
            ..Door::default()
        },
        ..SaleSpec::default()
    };
    app.create_sale(&sale, &spec).await;
    app.until_open(&sale).await;
    let carol = app.identity("carol").await;
    let as_carol = app.booking_client().signed_in(&carol);
    // Her first pass holds her one seat.
    let first = app.buyer_token(&sale, 1, 1, 120_000, Some("carol"));
    as_carol
        .reserve(&sale, &first, &unique("k"), "p1", 1)
        .await
        .expect("her first seat");

    // Her second pass: copy A of its request claimed it a moment ago and is on its way.
    let second = app.buyer_token(&sale, 2, 1, 120_000, Some("carol"));
    let jti = app.signer.verifier().verify(&second, 0).unwrap().jti;
    let (key, a) = ("the-same-key", now_millis() - 50);
    let _: () = redis::cmd("HSET")
        .arg(app.keys.sale(&sale).token(&jti))
        .arg(&["idem", key, "fp", "p1|1"])
        .arg("last")
        .arg(a)
        .arg(format!("a:{a}"))
        .arg(now_millis() + 60_000)
        .query_async(&mut app.redis.clone())
        .await
        .unwrap();
    // B: a copy of the same request.
    let answer = as_carol.reserve(&sale, &second, key, "p1", 1).await;
    floodgate_tests::assert_refused(answer, 409, "buyer_limit");
    // A is fenced off in her record: stamped below B, it can count no seats now.
    let record = app
        .keys
        .buyer(&sale, &floodgate_protocol::identity::BuyerId::new("carol"));
    let fence: Option<i64> = redis::cmd("HGET")
        .arg(&record)
        .arg(format!("f:{jti}"))
        .query_async(&mut app.redis.clone())
        .await
        .unwrap();
    assert!(fence.is_some_and(|f| f > a), "{fence:?} fences A ({a})");
    // A reaches her record late: refused there, before the pool.
    let reply: Vec<String> = redis::cmd("EVAL")
        .arg(include_str!("../../../../lua/buyer_seats.lua"))
        .arg(1)
        .arg(&record)
        .arg(&["take", jti.as_str(), "1", "1", "600000"])
        .arg(a)
        .query_async(&mut app.redis.clone())
        .await
        .unwrap();
    assert_eq!(
        (reply[0].as_str(), reply[3].as_str()),
        ("fenced", "0"),
        "{reply:?}"
    );
    // The pass was given back: a retry of it with a fresh key is told the limit again, not that
    // the pass was spent.
    let again = as_carol
        .reserve(&sale, &second, &unique("k"), "p1", 1)
        .await;
    floodgate_tests::assert_refused(again, 409, "buyer_limit");
    // Four more people book.
    for (ticket, name) in (3..).zip(["dan", "eve", "fay", "gus"]) {
        let identity = app.identity(name).await;
        let token = app.buyer_token(&sale, ticket, 1, 120_000, Some(name));
        app.booking_client()
            .signed_in(&identity)
            .reserve(&sale, &token, &unique("k"), "p1", 1)
            .await
            .expect("201");
    }

    let reading = app.health_when(&sale, |h| h.requests >= 6).await;
    assert_eq!(reading.error_share, Some(0.0), "{reading:?}");
}

/// The buyer's count of a pass names the latest attempt that relied on it: a refused attempt's
/// give-back, arriving after a later copy of the request found the seats counted and went on to
/// the pool, leaves them counted. Before, the give-back deleted them, and the copy's hold no
/// longer counted against the buyer (one reservation past their limit).
#[sqlx::test(migrations = "../migrations")]
async fn a_refused_attempts_give_back_leaves_a_later_copys_count(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let record = app.keys.buyer(
        &unique("copies-"),
        &floodgate_protocol::identity::BuyerId::new("carol"),
    );
    let script = include_str!("../../../../lua/buyer_seats.lua");
    let run = |op: &'static str, stamp: i64| {
        let (record, mut redis) = (record.clone(), app.redis.clone());
        async move {
            let reply: Vec<String> = redis::cmd("EVAL")
                .arg(script)
                .arg(1)
                .arg(&record)
                .arg(&[op, "pass-1", "2", "4", "600000"])
                .arg(stamp)
                .query_async(&mut redis)
                .await
                .unwrap();
            reply
        }
    };
    let counted = || {
        let (record, mut redis) = (record.clone(), app.redis.clone());
        async move {
            let value: Option<String> = redis::cmd("HGET")
                .arg(&record)
                .arg("r:pass-1")
                .query_async(&mut redis)
                .await
                .unwrap();
            value
        }
    };
    // Attempt 10 counts; attempt 20, a copy, finds the seats counted and relies on them.
    assert_eq!(run("take", 10).await, ["ok"]);
    assert_eq!(run("take", 20).await, ["ok"]);
    // Attempt 10 was refused at the pool: its give-back leaves attempt 20's count.
    assert_eq!(run("give", 10).await, ["given"]);
    assert!(counted().await.is_some(), "attempt 20 relies on the count");
    // Attempt 20's own give-back, or the relay's when the hold ends, gives it back.
    assert_eq!(run("give", 20).await, ["given"]);
    assert_eq!(counted().await, None);
    assert_eq!(run("take", 30).await, ["ok"]);
    assert_eq!(run("give", 0).await, ["given"]);
    assert_eq!(counted().await, None);
}
