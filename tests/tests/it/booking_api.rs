//! The booking API's answers to bad input, token misuse and refusals, against the real services.

mod review;

use floodgate_protocol::token::{AdmissionClaims, TokenSigner};
use floodgate_tests::{assert_refused, unique, SaleSpec, TestApp};
use serde_json::json;

const MINUTE: i64 = 60_000;

fn key() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// Asserts a JSON error body with the given status and code, and a message for humans.
fn assert_error(reply: (u16, serde_json::Value), status: u16, code: &str) {
    assert_eq!(reply.0, status, "{}", reply.1);
    assert_eq!(reply.1["error"], code, "{}", reply.1);
    assert!(
        reply.1["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{}",
        reply.1
    );
}

async fn open_sale(app: &TestApp, pools: &[(&str, u32)]) -> String {
    let sale = unique("api-");
    let spec = SaleSpec {
        pools: pools.iter().map(|(p, c)| (p.to_string(), *c)).collect(),
        max_seats: 2,
        ..SaleSpec::default()
    };
    app.create_sale(&sale, &spec).await;
    sale
}

#[sqlx::test(migrations = "../migrations")]
async fn bad_tokens_are_refused_with_clear_errors(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let sale = open_sale(&app, &[("p1", 5)]).await;
    let url = app.reservations_url(&sale);
    let body = json!({ "pool": "p1", "seats": 1 });

    assert_error(
        app.answer(
            app.http
                .post(&url)
                .header("Idempotency-Key", key())
                .json(&body),
        )
        .await,
        401,
        "token_missing",
    );
    assert_error(
        app.answer(
            app.http
                .post(&url)
                .header("Authorization", "Basic dXNlcjpwYXNz")
                .header("Idempotency-Key", key())
                .json(&body),
        )
        .await,
        401,
        "token_malformed",
    );

    assert_refused(
        app.reserve(&sale, "not-a-token", &key(), "p1", 1).await,
        401,
        "token_malformed",
    );
    assert_refused(
        app.reserve(&sale, &app.token(&sale, 1, 1, -1), &key(), "p1", 1)
            .await,
        401,
        "token_expired",
    );
    let forger = TokenSigner::generate(app.signer.kid());
    let forged = forger.sign(&AdmissionClaims {
        sale: sale.clone(),
        ticket: 1,
        jti: "forged".into(),
        max_seats: 2,
        iat_ms: 0,
        exp_ms: i64::MAX,
        buyer: None,
    });
    assert_refused(
        app.reserve(&sale, &forged, &key(), "p1", 1).await,
        401,
        "token_invalid",
    );
    let other_sale = app.token("another-sale", 1, 1, MINUTE);
    assert_refused(
        app.reserve(&sale, &other_sale, &key(), "p1", 1).await,
        403,
        "token_wrong_sale",
    );

    // None of that took a seat.
    assert_eq!(
        app.redis_int(&app.keys.pool(&sale, "p1").available()).await,
        5
    );
}

#[sqlx::test(migrations = "../migrations")]
async fn malformed_requests_get_json_errors_and_the_service_keeps_serving(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let sale = open_sale(&app, &[("p1", 5)]).await;
    let url = app.reservations_url(&sale);
    let token = app.token(&sale, 1, 2, MINUTE);
    let post = |body: &'static str, key: Option<String>| {
        let mut req = app
            .http
            .post(&url)
            .bearer_auth(&token)
            .header("Content-Type", "application/json")
            .body(body);
        if let Some(key) = key {
            req = req.header("Idempotency-Key", key);
        }
        async move {
            let res = req.send().await.unwrap();
            (
                res.status().as_u16(),
                res.json::<serde_json::Value>().await.unwrap(),
            )
        }
    };

    assert_error(
        post(r#"{"pool":"p1","seats":1}"#, None).await,
        400,
        "idempotency_key_missing",
    );
    assert_error(
        post(r#"{"pool":"p1","seats":1}"#, Some("x".repeat(129))).await,
        400,
        "idempotency_key_invalid",
    );
    assert_error(
        post(r#"{"pool": "p1", "seats"#, Some(key())).await,
        400,
        "bad_json",
    );
    assert_error(
        post("\u{0}\u{1}garbage", Some(key())).await,
        400,
        "bad_json",
    );
    assert_error(
        post(r#"{"pool":"p1","seats":"one"}"#, Some(key())).await,
        422,
        "invalid_seats",
    );
    assert_error(
        post(r#"{"pool":"p1"}"#, Some(key())).await,
        422,
        "invalid_seats",
    );
    assert_error(
        post(r#"{"pool":7,"seats":1}"#, Some(key())).await,
        422,
        "invalid_pool",
    );
    assert_error(post(r#"[1, 2]"#, Some(key())).await, 422, "invalid_request");
    assert_error(
        post(r#"{"pool":"p1","seats":1,"extra":true}"#, Some(key())).await,
        422,
        "invalid_request",
    );
    assert_error(
        post(r#"{"pool":"p1","seats":0}"#, Some(key())).await,
        422,
        "invalid_seats",
    );
    assert_error(
        post(r#"{"pool":"p1","seats":3}"#, Some(key())).await,
        422,
        "invalid_seats",
    );
    assert_error(
        post(r#"{"pool":"p{1}","seats":1}"#, Some(key())).await,
        404,
        "unknown_pool",
    );

    let huge = format!(
        r#"{{"pool":"p1","seats":1,"pad":"{}"}}"#,
        "x".repeat(64 * 1024)
    );
    assert_error(
        app.answer(
            app.http
                .post(&url)
                .bearer_auth(&token)
                .header("Idempotency-Key", key())
                .body(huge),
        )
        .await,
        413,
        "body_too_large",
    );

    assert_error(
        app.answer(app.http.get(format!("http://{}/v2/nothing", app.booking)))
            .await,
        404,
        "not_found",
    );

    // An unknown sale, even with a correctly signed token for it.
    let ghost = app.token("no-such-sale", 1, 1, MINUTE);
    assert_refused(
        app.reserve("no-such-sale", &ghost, &key(), "p1", 1).await,
        404,
        "unknown_sale",
    );

    // After all of it, the same token still books: nothing above spent it or broke the service.
    app.reserve(&sale, &token, &key(), "p1", 2)
        .await
        .expect("the token still books");
    assert_eq!(
        app.redis_int(&app.keys.pool(&sale, "p1").available()).await,
        3
    );
}

#[sqlx::test(migrations = "../migrations")]
async fn a_token_makes_one_reservation_and_refusals_do_not_spend_it(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let sale = open_sale(&app, &[("small", 1), ("big", 5)]).await;
    let first = app.token(&sale, 1, 2, MINUTE);
    let first_key = key();
    let created = app
        .reserve(&sale, &first, &first_key, "small", 1)
        .await
        .expect("201");
    // The same token under another key: spent. The same key with another body: a misuse.
    assert_refused(
        app.reserve(&sale, &first, &key(), "small", 1).await,
        409,
        "token_spent",
    );
    assert_refused(
        app.reserve(&sale, &first, &first_key, "big", 1).await,
        422,
        "idempotency_key_reused",
    );
    // And the original request still replays its original answer.
    assert_eq!(
        app.reserve(&sale, &first, &first_key, "small", 1)
            .await
            .expect("a replay"),
        created
    );

    // A second user finds the small pool sold out, then an unknown pool; neither spends the token.
    let second = app.token(&sale, 2, 2, MINUTE);
    assert_refused(
        app.reserve(&sale, &second, &key(), "small", 1).await,
        409,
        "sold_out",
    );
    assert_refused(
        app.reserve(&sale, &second, &key(), "nope", 1).await,
        404,
        "unknown_pool",
    );
    app.reserve(&sale, &second, &key(), "big", 2)
        .await
        .expect("the refusals left the token unspent");

    let small = app.keys.pool(&sale, "small");
    let big = app.keys.pool(&sale, "big");
    assert_eq!(
        (
            app.redis_int(&small.available()).await,
            app.redis_int(&small.held()).await
        ),
        (0, 1)
    );
    assert_eq!(
        (
            app.redis_int(&big.available()).await,
            app.redis_int(&big.held()).await
        ),
        (3, 2)
    );
}
