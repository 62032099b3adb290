//! An app the phone suspends in the background (docs/protocol.md 1.5): the sale's own grace keeps
//! its place longer than the gateways' default, and `GET /v1/sales/{sale}/place`, keyed by the
//! resume token, tells it where the place stands without a socket.

use std::time::Duration;

use floodgate_protocol::settings::{Door, IdentityRule};
use floodgate_tests::client::RoomClient;
use floodgate_tests::{eventually, unique, SaleSpec, TestApp, TestOptions};

/// `GET /v1/sales/{sale}/place` with `headers`: status, `Cache-Control` and body.
async fn place(
    app: &TestApp,
    sale: &str,
    headers: &[(&str, &str)],
) -> (u16, Option<String>, serde_json::Value) {
    let mut request = app
        .http
        .get(format!("http://{}/v1/sales/{sale}/place", app.gateway));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let cache = response
        .headers()
        .get("cache-control")
        .map(|v| v.to_str().unwrap().to_owned());
    (status, cache, response.json().await.unwrap())
}

#[sqlx::test(migrations = "../migrations")]
async fn a_backgrounded_app_keeps_its_place_for_the_sales_grace_and_reads_where_it_stands(
    db: sqlx::PgPool,
) {
    // The gateways' own grace is short; the sale sets a longer one for its phones.
    let options = TestOptions {
        grace_ms: 300,
        ..TestOptions::default()
    };
    let app = TestApp::spawn_with(db, options).await;
    let sale = unique("background-");
    let spec = SaleSpec {
        opens_in: Duration::from_secs(3_600),
        door: Door {
            identity: IdentityRule::Optional,
            grace_secs: Some(6),
            ..Door::default()
        },
        ..SaleSpec::default()
    };
    app.create_sale(&sale, &spec).await;
    let summary = app
        .get_json(&format!("http://{}/v1/sales/{sale}", app.gateway))
        .await;
    assert_eq!(summary["door"]["grace_secs"], 6, "{summary}");

    let _ahead = RoomClient::join(&app.ws_url(&sale)).await.unwrap();
    let phone = RoomClient::join(&app.ws_url(&sale)).await.unwrap();
    let (ticket, token) = (phone.ticket, phone.resume_token.clone());
    let by_token = [("floodgate-resume", token.as_str())];
    // While the socket is open: in the pre-queue (of two, once this gateway's view has caught
    // up with the second join), held by a session.
    let (status, cache, body) = place(&app, &sale, &by_token).await;
    assert_eq!(
        (status, cache.as_deref()),
        (200, Some("no-store")),
        "{body}"
    );
    assert_eq!(body["ticket"], ticket);
    assert_eq!(body["state"], "pre_queue");
    assert_eq!(body["pass_ready"], false);
    assert!(body["kept_until_ms"].is_null(), "{body}");
    eventually("the pre-queue's size", Duration::from_secs(5), || {
        let app = &app;
        let sale = &sale;
        async move { place(app, sale, &by_token).await.2["pre_queue_size"] == 2 }
    })
    .await;

    // The phone suspends the app: the socket goes, the sale's grace (not the gateway's) starts.
    let left_at = floodgate_protocol::now_millis();
    phone.leave().await;
    let kept_until = eventually("the departure is recorded", Duration::from_secs(5), || {
        let app = &app;
        let sale = &sale;
        async move { place(app, sale, &by_token).await.2["kept_until_ms"].as_i64() }
    })
    .await;
    assert!(
        kept_until >= left_at + 5_000,
        "kept for the sale's 6 s, not the gateway's 0.3 s: {} ms",
        kept_until - left_at
    );
    // Still the same place after the gateway's own grace would have ended it.
    let back = RoomClient::resume(&app.ws_url(&sale), &token, &[])
        .await
        .expect("the place was kept");
    assert_eq!((back.ticket, back.resumed), (ticket, true));

    // A status answer is no door: no token, a forged one, one in the URL.
    let (status, _, body) = place(&app, &sale, &[]).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (401, Some("resume_required"))
    );
    let forged = token.replace(&format!("r2.{ticket}."), "r2.1.");
    let (status, _, body) = place(&app, &sale, &[("floodgate-resume", &forged)]).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (401, Some("resume_invalid"))
    );
    let in_url = app
        .http
        .get(format!(
            "http://{}/v1/sales/{sale}/place?resume={token}",
            app.gateway
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(in_url.status().as_u16(), 400);

    // Once the grace has run out with nobody back, the place is gone, and the answer says so.
    back.leave().await;
    eventually(
        "the place dies after the grace",
        Duration::from_secs(15),
        || {
            let app = &app;
            let sale = &sale;
            async move { place(app, sale, &by_token).await.0 == 410 }
        },
    )
    .await;
    let (_, _, body) = place(&app, &sale, &by_token).await;
    assert_eq!(body["error"], "ticket_expired");
}

#[sqlx::test(migrations = "../migrations")]
async fn the_place_answer_gives_the_position_and_a_buyers_place_only_to_them(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let sale = unique("background-");
    let spec = SaleSpec {
        pools: vec![("p1".into(), 100)],
        opens_in: Duration::from_millis(500),
        admission_rate: 100.0,
        ..SaleSpec::default()
    };
    app.create_sale(&sale, &spec).await;
    app.admission(&sale, "pause").await;
    let ada = app.identity("ada").await;
    let bob = app.identity("bob").await;
    let _first = RoomClient::join(&app.ws_url(&sale)).await.unwrap();
    let mine = RoomClient::join_with(&app.ws_url(&sale), &[("floodgate-identity", &ada)])
        .await
        .unwrap();
    app.until_open(&sale).await;
    let token = mine.resume_token.clone();
    let as_ada = [
        ("floodgate-resume", token.as_str()),
        ("floodgate-identity", ada.as_str()),
    ];
    let body = eventually("the draw is known", Duration::from_secs(10), || {
        let (app, sale, as_ada) = (&app, &sale, &as_ada);
        async move {
            let (status, _, body) = place(app, sale, as_ada).await;
            (status == 200 && body["state"] == "waiting").then_some(body)
        }
    })
    .await;
    // Two in line, paused: a position of 1 or 2 (the draw decides), no ETA while paused.
    let position = body["position"].as_u64().unwrap();
    assert!((1..=2).contains(&position), "{body}");
    assert!(body["eta_secs"].is_null(), "{body}");
    // Bob holding Ada's token learns nothing about her place.
    let as_bob = [
        ("floodgate-resume", token.as_str()),
        ("floodgate-identity", bob.as_str()),
    ];
    let (status, _, body) = place(&app, &sale, &as_bob).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (403, Some("resume_other_buyer"))
    );

    // Admission resumes: the pass is ready, to be collected by connecting with the token.
    app.admission(&sale, "resume").await;
    let body = eventually("the turn comes", Duration::from_secs(10), || {
        let (app, sale, as_ada) = (&app, &sale, &as_ada);
        async move {
            let (_, _, body) = place(app, sale, as_ada).await;
            (body["state"] == "your_turn").then_some(body)
        }
    })
    .await;
    assert_eq!(body["pass_ready"], true, "{body}");
    assert!(body["pass_expires_at_ms"].as_i64().unwrap() > floodgate_protocol::now_millis());
}
