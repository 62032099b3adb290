//! Regression tests for the waiting-room defects the review found (issue 12), each named after
//! its defect's number, against a real gateway, Redis and PostgreSQL.

use std::time::Duration;

use floodgate_tests::chaos::ChaosProxy;
use floodgate_tests::client::RoomClient;
use floodgate_tests::eventually;
use floodgate_tests::{unique, SaleSpec, TestApp, TestOptions};
use futures::{SinkExt, StreamExt};
use tokio::io::AsyncWriteExt;
use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};
use tokio_tungstenite::tungstenite::protocol::frame::Frame;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

const WAIT: Duration = Duration::from_secs(10);

/// Every key of `sale`'s slot under the test's prefix.
async fn sale_keys(app: &TestApp, sale: &str) -> Vec<String> {
    let pattern = format!("{}{{s:{sale}}}*", app.keys.prefix());
    redis::cmd("KEYS")
        .arg(&pattern)
        .query_async(&mut app.redis.clone())
        .await
        .unwrap()
}

async fn exists(app: &TestApp, key: &str) -> bool {
    redis::cmd("EXISTS")
        .arg(key)
        .query_async(&mut app.redis.clone())
        .await
        .unwrap()
}

#[sqlx::test(migrations = "../migrations")]
async fn defect_01_an_unknown_sale_starts_no_room_and_writes_no_key(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let ghosts: Vec<String> = (0..3).map(|_| unique("ghost-")).collect();
    for ghost in &ghosts {
        match tokio_tungstenite::connect_async(app.ws_url(ghost)).await {
            Err(WsError::Http(response)) => assert_eq!(response.status(), 404),
            other => panic!("expected a 404 for {ghost}, got {other:?}"),
        }
    }
    // A real sale's room on the same gateway, started after them: once it has ticked (its
    // lease is taken), any room the unknown sales had started has ticked too.
    let sale = app.pending_sale("review-").await;
    let _client = RoomClient::join(&app.ws_url(&sale)).await.expect("joins");
    let leader = app.keys.sale(&sale).leader();
    eventually("the real sale's room ticks", WAIT, || async {
        exists(&app, &leader).await
    })
    .await;
    for ghost in &ghosts {
        let left = sale_keys(&app, ghost).await;
        assert!(left.is_empty(), "unknown sale {ghost} left keys: {left:?}");
    }
}

#[sqlx::test(migrations = "../migrations")]
async fn defect_01_an_idle_room_retires_and_takes_this_gateways_keys_with_it(db: sqlx::PgPool) {
    let app = TestApp::spawn_with(
        db,
        TestOptions {
            room_idle_ms: 300,
            ..TestOptions::default()
        },
    )
    .await;
    let sale = app.pending_sale("review-").await;
    let keys = app.keys.sale(&sale);
    let client = RoomClient::join(&app.ws_url(&sale)).await.expect("joins");
    eventually("the room takes the lease", WAIT, || async {
        exists(&app, &keys.leader()).await
    })
    .await;
    assert_eq!(
        app.metric(app.gateway_admin, "floodgate_rooms").await,
        Some(1.0)
    );

    client.leave().await;
    eventually("the room retires", WAIT, || async {
        app.metric(app.gateway_admin, "floodgate_rooms").await == Some(0.0)
    })
    .await;
    // The room's task removes them as it ends, just after the room left the gauge.
    let this_gateways = |left: &[String]| {
        left.iter()
            .any(|k| k.contains(":gw:") || k.ends_with(":leader") || k.ends_with(":gateways"))
    };
    eventually("this gateway's keys are gone", WAIT, || async {
        !this_gateways(&sale_keys(&app, &sale).await)
    })
    .await;

    // The next join starts the room again.
    let mut again = RoomClient::join(&app.ws_url(&sale)).await.expect("joins");
    assert_eq!(again.ticket, 2);
    eventually("the room leads again", WAIT, || async {
        exists(&app, &keys.leader()).await
    })
    .await;
    assert!(matches!(
        again.next(WAIT).await,
        floodgate_tests::client::Heard::Message(_)
    ));
}

#[sqlx::test(migrations = "../migrations")]
async fn defect_02_a_ticket_whose_upgrade_never_completes_is_given_back(db: sqlx::PgPool) {
    let proxy = ChaosProxy::start(floodgate_tests::redis_addr()).await;
    let options = TestOptions {
        gateway_redis_url: Some(format!("redis://{}", proxy.addr)),
        ..TestOptions::default()
    };
    let app = TestApp::spawn_with(db, options).await;
    let sale = app.pending_sale("review-").await;
    let keys = app.keys.sale(&sale);
    // Someone already waits, so the sale's room is running on this gateway.
    let _bystander = RoomClient::join(&app.ws_url(&sale)).await.expect("joins");

    // The gateway's Redis answers are held: the join script runs, its answer waits.
    proxy.hold();
    let mut stream = tokio::net::TcpStream::connect(app.gateway).await.unwrap();
    let request = format!(
        "GET /ws?sale={sale} HTTP/1.1\r\nHost: {}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
         Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
        app.gateway
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    eventually("the ticket is taken", WAIT, || async {
        app.redis_int(&keys.seq()).await == 2
    })
    .await;
    // The client gives up before any answer, with a reset: the upgrade can never complete.
    // A zero linger sends the reset at once and never blocks, which is all the deprecation
    // warns about.
    #[allow(deprecated)]
    stream.set_linger(Some(Duration::ZERO)).unwrap();
    drop(stream);
    proxy.release();

    // The ticket nobody holds leaves the line (its grace starts, so the controller skips it)
    // instead of staying live, being admitted and taking a place under the cap and the stock.
    eventually("the phantom ticket leaves", WAIT, || async {
        let departed: Option<f64> = redis::cmd("ZSCORE")
            .arg(keys.gone())
            .arg(2)
            .query_async(&mut app.redis.clone())
            .await
            .unwrap();
        departed.is_some()
    })
    .await;
}

/// Waits until the sale's admission controller has renewed its lease `n` more times (it does
/// once a tick, after reading the sale's settings): a renewal shows as the lease's remaining
/// time jumping above what it would have decayed to.
async fn leader_ticks(app: &TestApp, sale: &str, n: usize) {
    let leader = app.keys.sale(sale).leader();
    let pttl = || async {
        let ms: i64 = redis::cmd("PTTL")
            .arg(&leader)
            .query_async(&mut app.redis.clone())
            .await
            .unwrap();
        (ms, tokio::time::Instant::now())
    };
    let last = std::cell::Cell::new(pttl().await);
    for _ in 0..n {
        eventually("the controller ticks", WAIT, || async {
            let (before, at) = last.get();
            let (now, now_at) = pttl().await;
            last.set((now, now_at));
            let decayed = before - now_at.duration_since(at).as_millis() as i64;
            now > decayed + 5
        })
        .await;
    }
}

#[sqlx::test(migrations = "../migrations")]
async fn defect_04_a_tiny_stored_rate_never_stops_the_controller(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let sale = unique("review-");
    app.create_sale(
        &sale,
        &SaleSpec {
            opens_in: Duration::from_millis(300),
            ..SaleSpec::default()
        },
    )
    .await;
    app.admission(&sale, "pause").await;
    let mut first = RoomClient::join(&app.ws_url(&sale)).await.expect("joins");
    app.until_open(&sale).await;
    // A rate written before validation existed (or by hand): far below anything sensible.
    let meta = app.keys.sale(&sale).meta();
    let _: i64 = redis::cmd("HSET")
        .arg(&meta)
        .arg("rate")
        .arg("1e-20")
        .query_async(&mut app.redis.clone())
        .await
        .unwrap();
    app.admission(&sale, "resume").await;
    // The controller ticks with it a few times: nobody is admitted at such a rate, and nobody
    // is thrown out either.
    leader_ticks(&app, &sale, 3).await;
    let mut second = RoomClient::join(&app.ws_url(&sale)).await.expect("joins");
    let _: i64 = redis::cmd("HSET")
        .arg(&meta)
        .arg("rate")
        .arg("50")
        .query_async(&mut app.redis.clone())
        .await
        .unwrap();
    first.admitted(WAIT).await;
    second.admitted(WAIT).await;
}

#[sqlx::test(migrations = "../migrations")]
async fn defect_04_the_ops_api_refuses_a_rate_the_controller_cannot_use(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let sale = app.pending_sale("review-").await;
    let path = format!("/admin/v1/sales/{sale}");
    for rate in [1e-20, 1e-4, 0.0, -1.0, 1e7] {
        let (status, body) = app
            .ops(
                reqwest::Method::PATCH,
                &path,
                &app.ops_token,
                Some(serde_json::json!({ "admission_rate": rate })),
            )
            .await;
        assert_eq!(
            (status, body["error"].as_str()),
            (422, Some("invalid_rate")),
            "rate {rate}: {body}"
        );
    }
}

#[sqlx::test(migrations = "../migrations")]
async fn defect_05_crafted_nonce_pages_get_400_and_never_crash(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let sale = app.pending_sale("review-").await;
    let page = |query: &str| format!("http://{}/v1/sales/{sale}/draw/nonces?{query}", app.gateway);
    for query in [
        "from=18446744073709551615&count=2",
        "from=9223372036854775808&count=10",
        "from=9223372036854775807&count=10000",
        "from=0&count=1",
        "from=1&count=0",
        "from=1&count=10001",
        "from=-1&count=1",
        "from=x",
    ] {
        let (status, body) = app.answer(app.http.get(page(query))).await;
        assert_eq!(
            (status, body["error"].as_str()),
            (400, Some("bad_page")),
            "{query}: {body}"
        );
    }
    let (status, body) = app.answer(app.http.get(page("from=1&count=5"))).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["nonces"], serde_json::json!([]));
}

#[sqlx::test(migrations = "../migrations")]
async fn defect_05_a_final_draw_is_cacheable_and_an_open_one_is_not_cached_long(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let sale = unique("review-");
    app.create_sale(
        &sale,
        &SaleSpec {
            opens_in: Duration::from_secs(2),
            ..SaleSpec::default()
        },
    )
    .await;
    let _early = RoomClient::join(&app.ws_url(&sale)).await.expect("joins");
    let draw = format!("http://{}/v1/sales/{sale}/draw", app.gateway);
    let nonces = format!("{draw}/nonces?from=1&count=10");
    let cache_control = |response: &reqwest::Response| {
        response
            .headers()
            .get("cache-control")
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default()
    };
    let open = app.http.get(&draw).send().await.unwrap();
    let open_cache = cache_control(&open);
    assert!(
        open_cache.contains("max-age=1") || open_cache.contains("no-cache"),
        "the open pre-queue changes: {open_cache:?}"
    );
    eventually("the draw is made", WAIT, || async {
        app.get_json(&draw).await["status"] == "drawn"
    })
    .await;
    for url in [&draw, &nonces] {
        let response = app.http.get(url).send().await.unwrap();
        assert_eq!(response.status(), 200);
        let cache = cache_control(&response);
        assert!(
            cache.contains("public") && cache.contains("immutable"),
            "{url}: a final draw never changes: {cache:?}"
        );
    }
}

#[sqlx::test(migrations = "../migrations")]
async fn defect_20_invalid_utf8_in_a_text_frame_gets_close_1007(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let sale = app.pending_sale("review-").await;
    let (mut ws, _) = tokio_tungstenite::connect_async(app.ws_url(&sale))
        .await
        .expect("joins");
    // A text frame whose payload is not UTF-8 (0xff never occurs in UTF-8).
    let frame = Frame::message(vec![b'{', 0xff, 0xfe, b'}'], OpCode::Data(Data::Text), true);
    ws.send(Message::Frame(frame)).await.unwrap();
    let code = loop {
        match tokio::time::timeout(WAIT, ws.next())
            .await
            .expect("an answer in time")
        {
            Some(Ok(Message::Close(Some(frame)))) => break u16::from(frame.code),
            Some(Ok(Message::Close(None))) => panic!("closed without a code"),
            Some(Ok(_)) => continue,
            Some(Err(e)) => panic!("the connection dropped without a close frame: {e}"),
            None => panic!("the connection ended without a close frame"),
        }
    };
    // RFC 6455's "invalid frame payload data".
    assert_eq!(code, 1007);
}

#[sqlx::test(migrations = "../migrations")]
async fn defect_22_a_missing_static_file_is_a_json_404(db: sqlx::PgPool) {
    let static_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../static");
    let app = TestApp::spawn_with(
        db,
        TestOptions {
            static_dir: Some(static_dir),
            ..TestOptions::default()
        },
    )
    .await;
    for path in [
        "/no-such-file.txt",
        "/data/sales/no-such-sale.json",
        "/%2e%2e/Cargo.toml",
        "/..%2fCargo.toml",
        "/data/%2e%2e/%2e%2e/Cargo.toml",
    ] {
        let response = app
            .http
            .get(format!("http://{}{path}", app.gateway))
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        assert!(
            status == 404 || status == 400,
            "{path}: {status} is not a refusal"
        );
        let body: serde_json::Value = response
            .json()
            .await
            .unwrap_or_else(|e| panic!("{path}: the body is not JSON: {e}"));
        assert!(body["error"].is_string(), "{path}: {body}");
        assert!(body["message"].is_string(), "{path}: {body}");
    }
}
