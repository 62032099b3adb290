//! A webhook with a bad or stale signature, or a signed body that is not an event, is refused
//! before anything is decided.

use super::*;

#[sqlx::test(migrations = "../migrations")]
async fn a_webhook_with_a_bad_signature_is_refused(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let b = book(&app, 300).await;
    let (status, body) = deliver(
        &app,
        &event(&b, "payment.succeeded", "pay_1"),
        now_secs(),
        "not-the-secret",
    )
    .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (401, Some("signature_invalid"))
    );
    let res = app
        .http
        .post(format!("http://{}/v1/payments/webhook", app.booking))
        .json(&event(&b, "payment.succeeded", "pay_1"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 400);
    assert_eq!(
        res.json::<Value>().await.unwrap()["error"],
        "signature_missing"
    );
    assert_eq!(
        view(&app, &b).await["status"],
        "held",
        "nothing was confirmed"
    );
}

#[sqlx::test(migrations = "../migrations")]
async fn a_webhook_with_a_stale_timestamp_is_refused(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let b = book(&app, 300).await;
    // A correctly signed delivery, captured and replayed ten minutes later.
    let (status, body) = deliver(
        &app,
        &event(&b, "payment.succeeded", "pay_1"),
        now_secs() - 600,
        &app.webhook_secret,
    )
    .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("timestamp_outside_tolerance"))
    );
    assert_eq!(view(&app, &b).await["status"], "held");
}

#[sqlx::test(migrations = "../migrations")]
async fn a_signed_garbage_webhook_body_is_refused(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let body = b"{\"id\": 42, \"this is\": [\"not an event\"".to_vec();
    let res = app
        .http
        .post(format!("http://{}/v1/payments/webhook", app.booking))
        .header(
            SIGNATURE_HEADER,
            sign(app.webhook_secret.as_bytes(), now_secs(), &body),
        )
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 400);
    assert_eq!(res.json::<Value>().await.unwrap()["error"], "bad_json");
    let res = app
        .http
        .post(format!("http://{}/v1/payments/webhook", app.booking))
        .header(SIGNATURE_HEADER, "t=abc,v1=not-hex")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 400);
    assert_eq!(
        res.json::<Value>().await.unwrap()["error"],
        "signature_malformed"
    );
}
