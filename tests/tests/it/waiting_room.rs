//! The waiting room's handling of bad input, against a real gateway and Redis.

mod away;
mod review;

use std::time::Duration;

use floodgate_protocol::ws::{close, ServerMessage};
use floodgate_tests::eventually;
use floodgate_tests::TestApp;
use futures::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn next_message(ws: &mut Socket) -> Message {
    tokio::time::timeout(Duration::from_secs(10), ws.next())
        .await
        .expect("a frame in time")
        .expect("socket open")
        .expect("a frame")
}

/// Joins and reads the ticket message.
async fn join(app: &TestApp, sale: &str) -> (Socket, u64) {
    let (mut ws, _) = tokio_tungstenite::connect_async(app.ws_url(sale))
        .await
        .expect("joins");
    match next_message(&mut ws).await {
        Message::Text(t) => match serde_json::from_str(&t).unwrap() {
            ServerMessage::Ticket { ticket, .. } => (ws, ticket),
            other => panic!("expected a ticket, got {other:?}"),
        },
        other => panic!("expected text, got {other:?}"),
    }
}

/// Reads until the server's close frame and returns its code.
async fn close_code(ws: &mut Socket) -> u16 {
    loop {
        match tokio::time::timeout(Duration::from_secs(10), ws.next())
            .await
            .expect("closed in time")
        {
            Some(Ok(Message::Close(Some(frame)))) => return u16::from(frame.code),
            Some(Ok(Message::Close(None))) => panic!("closed without a code"),
            Some(Ok(_)) => continue,
            Some(Err(e)) => panic!("socket error instead of a close frame: {e}"),
            None => panic!("socket ended without a close frame"),
        }
    }
}

#[sqlx::test(migrations = "../migrations")]
async fn joining_an_unknown_sale_or_without_websocket_is_a_json_error(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;

    match tokio_tungstenite::connect_async(app.ws_url("no-such-sale")).await {
        Err(WsError::Http(response)) => {
            assert_eq!(response.status(), 404);
            let body: serde_json::Value =
                serde_json::from_slice(response.body().as_deref().unwrap()).unwrap();
            assert_eq!(body["error"], "unknown_sale");
        }
        other => panic!("expected a 404, got {other:?}"),
    }

    let get = |path: String| {
        let http = app.http.clone();
        async move {
            let res = http.get(path).send().await.unwrap();
            (
                res.status().as_u16(),
                res.json::<serde_json::Value>().await.unwrap(),
            )
        }
    };
    let (status, body) = get(format!("http://{}/ws", app.gateway)).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("sale_missing"))
    );
    let sale = app.pending_sale("room-").await;
    let (status, body) = get(format!("http://{}/ws?sale={sale}", app.gateway)).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (426, Some("websocket_required"))
    );
    let (status, body) = get(format!("http://{}/ws?sale=bad%7Bid%7D", app.gateway)).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (404, Some("unknown_sale"))
    );
}

/// A handshake the gateway cannot serve is refused before a ticket is taken, with the headers
/// RFC 9110 and RFC 6455 ask of a 426: one offering only other subprotocols (the answer could
/// name none of them, so the client would fail the connection and its ticket would wait out its
/// grace with nobody behind it), and one of another WebSocket version.
#[sqlx::test(migrations = "../migrations")]
async fn a_handshake_the_gateway_cannot_serve_takes_no_ticket(db: sqlx::PgPool) {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;

    let app = TestApp::spawn(db).await;
    let sale = app.pending_sale("room-").await;
    for (header, value) in [
        ("sec-websocket-protocol", "chat, floodgate-identity.abc"),
        ("sec-websocket-version", "8"),
    ] {
        let mut request = app.ws_url(&sale).into_client_request().unwrap();
        request.headers_mut().insert(header, value.parse().unwrap());
        match tokio_tungstenite::connect_async(request).await {
            Err(WsError::Http(response)) => {
                assert_eq!(response.status(), 426, "{header}: {value}");
                assert_eq!(response.headers()["upgrade"], "websocket");
                assert_eq!(response.headers()["sec-websocket-version"], "13");
                let body: serde_json::Value =
                    serde_json::from_slice(response.body().as_deref().unwrap()).unwrap();
                assert_eq!(body["error"], "websocket_required", "{header}: {value}");
            }
            other => panic!("{header}: {value}: expected a 426, got {other:?}"),
        }
    }
    // Nothing was taken: the first client served has the sale's first ticket.
    let (_ws, ticket) = join(&app, &sale).await;
    assert_eq!(ticket, 1);
}

#[sqlx::test(migrations = "../migrations")]
async fn bad_frames_close_only_their_own_session(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let sale = app.pending_sale("room-").await;

    // A bystander who stays connected through all of it.
    let (mut bystander, bystander_ticket) = join(&app, &sale).await;

    let (mut ws, _) = join(&app, &sale).await;
    ws.send(Message::Text("this is not json".into()))
        .await
        .unwrap();
    assert_eq!(close_code(&mut ws).await, close::BAD_MESSAGE);

    let (mut ws, _) = join(&app, &sale).await;
    ws.send(Message::Text(r#"{"type":"book_me_now"}"#.into()))
        .await
        .unwrap();
    assert_eq!(close_code(&mut ws).await, close::BAD_MESSAGE);

    let (mut ws, _) = join(&app, &sale).await;
    ws.send(Message::Binary(vec![0u8, 1, 2].into()))
        .await
        .unwrap();
    assert_eq!(close_code(&mut ws).await, close::BAD_MESSAGE);

    let (mut ws, _) = join(&app, &sale).await;
    ws.send(Message::Text("x".repeat(64 * 1024).into()))
        .await
        .unwrap();
    assert_eq!(close_code(&mut ws).await, close::MESSAGE_TOO_BIG);

    // The bystander is still served: it answers a ping and still has its place.
    bystander
        .send(Message::Text(r#"{"type":"ping"}"#.into()))
        .await
        .unwrap();
    loop {
        let Message::Text(t) = next_message(&mut bystander).await else {
            continue;
        };
        match serde_json::from_str(&t).unwrap() {
            ServerMessage::Pong => break,
            ServerMessage::Position { position, .. } => assert!(position <= bystander_ticket),
            ServerMessage::PreQueue { .. } => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    // And newcomers still get tickets, after everyone before them.
    let (_late, ticket) = join(&app, &sale).await;
    assert_eq!(ticket, bystander_ticket + 5);
}

async fn pending_sale_with(
    options: floodgate_tests::TestOptions,
    db: sqlx::PgPool,
) -> (TestApp, String) {
    let app = TestApp::spawn_with(db, options).await;
    let sale = app.pending_sale("room-").await;
    (app, sale)
}

/// Expects the gateway to refuse the join with HTTP 429 and `code`.
async fn refused_with(app: &TestApp, sale: &str, code: &str) {
    match tokio_tungstenite::connect_async(app.ws_url(sale)).await {
        Err(WsError::Http(response)) => {
            assert_eq!(response.status(), 429);
            assert_eq!(response.headers()["retry-after"], "1");
            let body: serde_json::Value =
                serde_json::from_slice(response.body().as_deref().unwrap()).unwrap();
            assert_eq!(body["error"], code);
        }
        other => panic!("expected a 429 {code}, got {other:?}"),
    }
}

#[sqlx::test(migrations = "../migrations")]
async fn one_address_may_hold_only_so_many_sessions(db: sqlx::PgPool) {
    let options = floodgate_tests::TestOptions {
        max_connections_per_ip: 3,
        ..Default::default()
    };
    let (app, sale) = pending_sale_with(options, db).await;
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(join(&app, &sale).await.0);
    }
    refused_with(&app, &sale, "too_many_connections").await;
    let refused = app
        .metric(
            app.gateway_admin,
            r#"floodgate_joins_refused_total{reason="too_many_connections"}"#,
        )
        .await;
    assert_eq!(refused, Some(1.0));
    assert_eq!(
        app.metric(app.gateway_admin, "floodgate_tickets_issued_total")
            .await,
        Some(3.0)
    );
    assert_eq!(
        app.metric(app.gateway_admin, "floodgate_ws_sessions").await,
        Some(3.0)
    );

    // One leaves: its slot comes back and someone else from the address gets in.
    let mut leaving = held.pop().unwrap();
    leaving.close(None).await.unwrap();
    let (_again, _) = eventually("a slot freed", Duration::from_secs(10), || async {
        tokio_tungstenite::connect_async(app.ws_url(&sale))
            .await
            .ok()
    })
    .await;
}

#[sqlx::test(migrations = "../migrations")]
async fn joining_too_fast_from_one_address_is_slowed_down(db: sqlx::PgPool) {
    let options = floodgate_tests::TestOptions {
        joins_per_sec_per_ip: 1,
        ..Default::default()
    };
    let (app, sale) = pending_sale_with(options, db).await;
    // A burst of twice the rate is allowed, then the address must wait.
    let _first = join(&app, &sale).await;
    let _second = join(&app, &sale).await;
    refused_with(&app, &sale, "join_rate_limited").await;
}

#[sqlx::test(migrations = "../migrations")]
async fn a_client_that_stops_answering_pings_is_closed_and_others_are_not(db: sqlx::PgPool) {
    let options = floodgate_tests::TestOptions {
        heartbeat_ms: 100,
        idle_timeout_ms: 300,
        ..Default::default()
    };
    let (app, sale) = pending_sale_with(options, db).await;
    let (mut silent, _) = join(&app, &sale).await;
    let (mut lively, _) = join(&app, &sale).await;

    // The lively client keeps reading (its WebSocket layer answers every ping) for as long as
    // the silent one reads nothing at all, which is what a vanished phone looks like.
    let keep_reading = async {
        let until = tokio::time::Instant::now() + Duration::from_millis(800);
        while let Ok(Some(Ok(frame))) = tokio::time::timeout_at(until, lively.next()).await {
            assert!(
                !matches!(frame, Message::Close(_)),
                "a client answering pings stays connected"
            );
        }
    };
    keep_reading.await;
    assert_eq!(close_code(&mut silent).await, close::IDLE_TIMEOUT);

    lively
        .send(Message::Text(r#"{"type":"ping"}"#.into()))
        .await
        .unwrap();
    loop {
        let Message::Text(t) = next_message(&mut lively).await else {
            continue;
        };
        if matches!(serde_json::from_str(&t).unwrap(), ServerMessage::Pong) {
            break;
        }
    }
}
