//! `GET /v1/sales/{sale}/place` (crate::guards in the gateway): a place the gateway knows is over costs no script in the sale's slot; every address,
//! every place and the gateway's reads of the slot have an allowance, refused with 429 (or 503
//! for the gateway's budget) and `Retry-After`.

use std::time::Duration;

use floodgate_tests::client::RoomClient;
use floodgate_tests::{eventually, unique, SaleSpec, TestApp, TestOptions};

/// `GET /v1/sales/{sale}/place` with a resume token: the status and the error code, if any (a
/// 429 or 503 is checked to carry `Retry-After`).
async fn ask(app: &TestApp, sale: &str, token: &str) -> (u16, String) {
    let path = format!("/v1/sales/{sale}/place");
    let (status, code) = app.gateway_get(&path, &[("floodgate-resume", token)]).await;
    (status, code.unwrap_or_default())
}

/// [`ask`] from loopback address `from` (the gateway counts each address apart): the status and
/// the error code, or `unconfirmed` for an answer from the gateway's memory.
async fn ask_from(app: &TestApp, sale: &str, token: &str, from: std::net::IpAddr) -> (u16, String) {
    let http = reqwest::Client::builder()
        .local_address(from)
        .build()
        .unwrap();
    let response = http
        .get(format!("http://{}/v1/sales/{sale}/place", app.gateway))
        .header("floodgate-resume", token)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let body: serde_json::Value = response.json().await.unwrap_or_default();
    let said = match body["error"].as_str() {
        Some(code) => code,
        None if body["unconfirmed"] == true => "unconfirmed",
        None => "",
    };
    (status, said.to_owned())
}

/// How many times the gateway has run `standing.lua` (the place's read in the sale's slot).
async fn standing_scripts(app: &TestApp) -> f64 {
    let series = r#"floodgate_redis_script_duration_seconds_count{script="standing"}"#;
    app.metric(app.gateway_admin, series).await.unwrap_or(0.0)
}

/// A place whose holder left before the opening and never came back is over for good once the
/// grace has run out: the gateway knows it (its dead places), so asking about it, however
/// often, is answered 410 from memory, without a script in the sale's slot.
#[sqlx::test(migrations = "../migrations")]
async fn a_place_over_for_good_costs_no_script(db: sqlx::PgPool) {
    let options = TestOptions {
        grace_ms: 300,
        ..TestOptions::default()
    };
    let app = TestApp::spawn_with(db, options).await;
    let sale = unique("dead-");
    app.create_sale(
        &sale,
        &SaleSpec {
            opens_in: Duration::from_secs(2),
            ..SaleSpec::default()
        },
    )
    .await;
    let _stays = RoomClient::join(&app.ws_url(&sale)).await.unwrap();
    let gone = RoomClient::join(&app.ws_url(&sale)).await.unwrap();
    let token = gone.resume_token.clone();
    gone.leave().await;

    eventually(
        "the place is answered as over with no script run",
        Duration::from_secs(20),
        || {
            let (app, sale, token) = (&app, &sale, &token);
            async move {
                let before = standing_scripts(app).await;
                let (status, code) = ask(app, sale, token).await;
                let ran = standing_scripts(app).await - before;
                status == 410 && code == "ticket_expired" && ran == 0.0
            }
        },
    )
    .await;
    // And it stays so: a flood of the dead place's token costs nothing in Redis.
    let before = standing_scripts(&app).await;
    for _ in 0..20 {
        assert_eq!(ask(&app, &sale, &token).await.0, 410);
    }
    assert_eq!(
        standing_scripts(&app).await,
        before,
        "no script for a dead place"
    );
}

/// Ten questions as fast as they come; the codes of the refused ones.
async fn ten(app: &TestApp, sale: &str, token: &str) -> Vec<(u16, String)> {
    let mut refused = Vec::new();
    for _ in 0..10 {
        let (status, code) = ask(app, sale, token).await;
        if status != 200 {
            refused.push((status, code));
        }
    }
    refused
}

/// An address sending questions without a genuine token is held to its allowance; the people
/// behind it asking about their own places are not (puzzles: hostile::joins).
#[sqlx::test(migrations = "../migrations")]
async fn one_address_may_ask_about_places_only_so_fast(db: sqlx::PgPool) {
    let options = TestOptions {
        place_requests_per_sec_per_ip: 1,
        ..TestOptions::default()
    };
    let app = TestApp::spawn_with(db, options).await;
    let sale = app.pending_sale("limits-").await;
    let client = RoomClient::join(&app.ws_url(&sale)).await.unwrap();
    // Ten questions without a genuine token at once, against an allowance of one a second (two
    // at once): most are refused for the address, the rest told the token is not genuine.
    let refused = ten(&app, &sale, "not-a-resume-token").await;
    let limited = refused
        .iter()
        .filter(|r| **r == (429, "place_rate_limited".into()))
        .count();
    assert!(limited >= 5, "{refused:?}");
    assert!(
        refused.iter().all(|r| r.0 == 429 || r.0 == 401),
        "{refused:?}"
    );
    // Someone else behind the same address, with their own place: the junk did not spend their
    // allowance (a genuine token is held to its place's, never its address's). Before, this was
    // 429 `place_rate_limited` too.
    assert_eq!(
        ask(&app, &sale, &client.resume_token).await,
        (200, String::new())
    );

    // Another address is not affected.
    let elsewhere = [127, 0, 0, 2].into();
    assert_eq!(
        ask_from(&app, &sale, &client.resume_token, elsewhere).await,
        (200, String::new())
    );
}

#[sqlx::test(migrations = "../migrations")]
async fn one_place_and_the_gateways_reads_have_their_own_allowance(db: sqlx::PgPool) {
    let options = TestOptions {
        place_every_ms: 60_000,
        place_reads_per_sec: 1,
        ..TestOptions::default()
    };
    let app = TestApp::spawn_with(db, options).await;
    let sale = app.pending_sale("budget-").await;
    let one = RoomClient::join(&app.ws_url(&sale)).await.unwrap();
    // One place: three at once, then one a minute, whoever asks.
    let refused = ten(&app, &sale, &one.resume_token).await;
    assert!(
        refused
            .iter()
            .filter(|r| r.1 == "place_rate_limited")
            .count()
            >= 7,
        "{refused:?}"
    );
    // Told to come back when the place may be asked about again.
    let response = app
        .http
        .get(format!("http://{}/v1/sales/{sale}/place", app.gateway))
        .header("floodgate-resume", &one.resume_token)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 429);
    assert_eq!(response.headers()["retry-after"], "5");
    // Many places, each asked about from an address of its own: each has its allowance, and
    // each address its share of the gateway's reads, but the gateway reads the sale's slot at
    // most once a second (two at once) for all of them together. Past that, the answer is the
    // gateway's memory's, marked unconfirmed: never a refusal. Before, 503 `place_busy`.
    let mut clients = Vec::new();
    for _ in 0..10 {
        clients.push(RoomClient::join(&app.ws_url(&sale)).await.unwrap());
    }
    let scripts = standing_scripts(&app).await;
    let mut answers = Vec::new();
    for (i, client) in clients.iter().enumerate() {
        let from = [127, 0, 0, 20 + i as u8].into();
        answers.push(ask_from(&app, &sale, &client.resume_token, from).await);
    }
    let unconfirmed = answers.iter().filter(|a| a.1 == "unconfirmed").count();
    assert!(answers.iter().all(|a| a.0 == 200), "{answers:?}");
    assert!(unconfirmed >= 5, "{answers:?}");
    assert!(
        standing_scripts(&app).await - scripts <= (10 - unconfirmed) as f64,
        "an unconfirmed answer reads nothing"
    );
}

/// Genuine tokens of a sale this gateway has no room for (one over, or never here) are held to
/// their address's allowance before the sale is looked up in Redis, as a join's are: a stranger
/// hoarding tokens of old sales cannot buy a read per token. Before, each was a lookup: 404
/// `unknown_sale` every time.
#[sqlx::test(migrations = "../migrations")]
async fn tokens_of_a_sale_not_here_pay_their_addresss_allowance(db: sqlx::PgPool) {
    let options = TestOptions {
        place_requests_per_sec_per_ip: 1,
        ..TestOptions::default()
    };
    let app = TestApp::spawn_with(db, options).await;
    let key = app.signer.resume_key();
    let mut answers = Vec::new();
    for ticket in 0..8 {
        let token = key.issue("gone-sale", ticket, None);
        answers.push(ask(&app, "gone-sale", &token).await);
    }
    let limited = answers
        .iter()
        .filter(|a| a.1 == "place_rate_limited")
        .count();
    assert!(limited >= 5, "{answers:?}");
}
