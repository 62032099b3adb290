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

/// A signature header stuffed with entries is refused before any hashing (each entry was a full
/// HMAC over the body: 1,300 of them in an 8 KB header), even with the right one among them;
/// the same signature among at most four entries, as a provider rolling its secret sends it,
/// confirms the hold.
#[sqlx::test(migrations = "../migrations")]
async fn a_stuffed_signature_header_costs_no_hashing(db: sqlx::PgPool) {
    use floodgate_protocol::payments::MAX_SIGNATURES;

    let app = TestApp::spawn(db).await;
    let b = book(&app, 300).await;
    let (status, started) = start_payment(&app, &b).await;
    assert_eq!(status, 202, "{started}");
    let payment = started["payment_id"].as_str().unwrap();
    let body = serde_json::to_vec(&event(&b, "payment.succeeded", payment)).unwrap();
    let signed = sign(app.webhook_secret.as_bytes(), now_secs(), &body);
    let (t, good) = signed.split_once(',').unwrap();
    let wrong = format!("v1={}", "0".repeat(64));
    let deliver_with = |header: String| {
        let (http, body) = (app.http.clone(), body.clone());
        let url = format!("http://{}/v1/payments/webhook", app.booking);
        async move {
            let res = http
                .post(url)
                .header(SIGNATURE_HEADER, header)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .unwrap();
            (res.status().as_u16(), res.json::<Value>().await.unwrap())
        }
    };
    let stuffed = format!("{t},{},{good}", vec![wrong.as_str(); 1_300].join(","));
    let (status, answer) = deliver_with(stuffed).await;
    assert_eq!(
        (status, answer["error"].as_str()),
        (400, Some("signature_malformed"))
    );
    assert_eq!(
        view(&app, &b).await["status"],
        "held",
        "nothing was confirmed"
    );

    let rolling = format!(
        "{t},{},{good}",
        [wrong.as_str(); MAX_SIGNATURES - 1].join(",")
    );
    let (status, answer) = deliver_with(rolling).await;
    assert_eq!(
        (status, answer["result"].as_str()),
        (200, Some("confirmed"))
    );
}
