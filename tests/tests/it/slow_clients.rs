//! What a stranger's slow connection costs (platform::listener): a socket that says nothing, a
//! body trickled a byte at a time, a WebSocket upgrade whose header never ends. Each is cut off
//! by the listener, on the gateway and the booking service alike, and a connection cap bounds
//! how many are held at once, with the slot given back when one is cut.

use std::net::SocketAddr;
use std::time::Duration;

use floodgate_tests::{eventually, TestApp, TestOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Every wait of these tests ends long before this; it only stops a broken test from hanging.
const GUARD: Duration = Duration::from_secs(60);

fn short_timeouts(max_connections: Option<usize>) -> TestOptions {
    TestOptions {
        header_timeout_ms: 1_000,
        body_timeout_ms: 1_000,
        request_timeout_ms: 3_000,
        max_connections,
        ..TestOptions::default()
    }
}

/// Reads from `stream` until the server closes it; whatever it said on the way.
async fn until_closed(stream: &mut TcpStream) -> String {
    let mut said = Vec::new();
    tokio::time::timeout(GUARD, stream.read_to_end(&mut said))
        .await
        .expect("the server never closed the connection")
        .ok();
    String::from_utf8_lossy(&said).into_owned()
}

/// Writes `bytes` one at a time, `pace` apart, until done or the server closes the
/// connection: whether it closed first, and what it said.
async fn trickle(stream: TcpStream, bytes: &[u8], pace: Duration) -> (bool, String) {
    let (mut reader, mut writer) = stream.into_split();
    let mut said = Vec::new();
    let reading = reader.read_to_end(&mut said);
    tokio::pin!(reading);
    for byte in bytes {
        tokio::select! {
            _ = &mut reading => return (true, String::from_utf8_lossy(&said).into_owned()),
            () = tokio::time::sleep(pace) => {}
        }
        if writer.write_all(&[*byte]).await.is_err() {
            return (true, String::new());
        }
    }
    (false, String::new())
}

#[sqlx::test(migrations = "../migrations")]
async fn a_silent_connection_is_closed_on_every_public_listener(db: sqlx::PgPool) {
    let app = TestApp::spawn_with(db, short_timeouts(None)).await;
    for listener in [app.gateway, app.booking] {
        let mut silent = TcpStream::connect(listener).await.unwrap();
        let said = until_closed(&mut silent).await;
        assert!(
            said.is_empty() || said.starts_with("HTTP/1.1 408"),
            "{listener}: {said}"
        );
        // A kept-alive connection that goes quiet after a request is closed the same way.
        let mut kept = TcpStream::connect(listener).await.unwrap();
        kept.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let said = until_closed(&mut kept).await;
        assert!(said.starts_with("HTTP/1.1 "), "{listener}: {said}");
    }
}

#[sqlx::test(migrations = "../migrations")]
async fn a_trickled_body_and_a_slow_upgrade_are_cut_off(db: sqlx::PgPool) {
    let app = TestApp::spawn_with(db, short_timeouts(None)).await;
    // A reservation whose body would take a minute to arrive: cut off long before it does.
    let body = format!(
        r#"{{"pool":"p1","seats":1,"padding":"{}"}}"#,
        "x".repeat(40)
    );
    // A genuine pass, so that the body is what the service waits for.
    let token = app.token("s1", 1, 1, 600_000);
    let request = |token: &str| {
        format!(
            "POST /v1/sales/s1/reservations HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nAuthorization: Bearer {token}\r\nIdempotency-Key: k\r\n\r\n",
            body.len()
        )
    };
    // Without a genuine pass the request is refused at once, before its body is read: a
    // stranger's trickle holds nothing.
    let mut stream = TcpStream::connect(app.booking).await.unwrap();
    stream.write_all(request("t").as_bytes()).await.unwrap();
    let (cut, said) = trickle(stream, body.as_bytes(), Duration::from_millis(1_500)).await;
    assert!(cut && said.starts_with("HTTP/1.1 401"), "{said}");
    let request = request(&token);
    let mut stream = TcpStream::connect(app.booking).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let (cut, said) = trickle(stream, body.as_bytes(), Duration::from_millis(1_500)).await;
    assert!(cut, "the whole body was accepted at a byte per 1.5 s");
    assert!(
        said.is_empty() || said.starts_with("HTTP/1.1 4"),
        "a refusal, not an answer: {said}"
    );
    // Trickled just under the body's pace (a byte every 0.7 s), it still meets the whole
    // request's deadline.
    let mut stream = TcpStream::connect(app.booking).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let (cut, said) = trickle(stream, body.as_bytes(), Duration::from_millis(700)).await;
    assert!(cut, "the whole body was accepted at a byte per 0.7 s");
    assert!(said.starts_with("HTTP/1.1 408"), "{said}");

    // A WebSocket upgrade whose header comes a byte every half second never completes.
    let upgrade = "GET /ws?sale=s1 HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
                   Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n";
    let stream = TcpStream::connect(app.gateway).await.unwrap();
    let (cut, said) = trickle(stream, upgrade.as_bytes(), Duration::from_millis(500)).await;
    assert!(cut, "the header was read to its end at a byte per 0.5 s");
    assert!(!said.contains("101"), "upgraded: {said}");
}

/// How many connections wait in `listener`'s accept queue, as the kernel counts them
/// (`/proc/net/tcp`: a listening socket's rx_queue is its backlog).
fn accept_backlog(listener: SocketAddr) -> Option<u64> {
    let SocketAddr::V4(v4) = listener else {
        return None;
    };
    let local = format!(
        "{:08X}:{:04X}",
        u32::from_le_bytes(v4.ip().octets()),
        v4.port()
    );
    let table = std::fs::read_to_string("/proc/net/tcp").ok()?;
    table.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (address, state, queues) = (fields.get(1)?, fields.get(3)?, fields.get(4)?);
        if *address != local || *state != "0A" {
            return None;
        }
        u64::from_str_radix(queues.split(':').nth(1)?, 16).ok()
    })
}

#[sqlx::test(migrations = "../migrations")]
async fn held_connections_are_capped_and_their_slots_come_back(db: sqlx::PgPool) {
    let mut options = short_timeouts(Some(4));
    options.header_timeout_ms = 3_000;
    let app = TestApp::spawn_with(db, options).await;
    let gateway: SocketAddr = app.gateway;
    // Four silent connections fill the gateway's cap.
    let mut silent = Vec::new();
    for _ in 0..4 {
        silent.push(TcpStream::connect(gateway).await.unwrap());
    }
    // A fifth connects, but the listener does not take it: it waits in the kernel's backlog.
    let fifth = tokio::spawn(async move {
        let mut stream = TcpStream::connect(gateway).await.unwrap();
        stream
            .write_all(b"GET /v1/sales/none HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        until_closed(&mut stream).await
    });
    eventually(
        "the fifth waits in the backlog",
        Duration::from_secs(10),
        || async { accept_backlog(gateway) == Some(1) },
    )
    .await;
    // The silent ones are cut at the header timeout, their slots come back, the fifth is served.
    let said = tokio::time::timeout(GUARD, fifth).await.unwrap().unwrap();
    assert!(said.starts_with("HTTP/1.1 404"), "{said}");
    for mut stream in silent {
        assert_eq!(until_closed(&mut stream).await, "", "cut without a word");
    }
    assert_eq!(accept_backlog(gateway), Some(0));
}
