//! The waiting room's WebSocket against RFC 6455, case by case, from a client written from the
//! RFC (`wire`: its own handshake and framing, not tungstenite's). The cases (`cases`) follow
//! the sections of the Autobahn suite (1-7 and 9) and the opening handshake; each runs on a
//! session of its own against a real gateway and Redis, and a test reports every case that
//! failed at once, with what the server did instead.
//!
//! What every case holds the server to, beyond its own expectation: each server frame is one
//! the RFC allows a server (`wire::Conn::read`), every Close is answered, and the server closes
//! the TCP connection within [`CLOSE_BOUND`] of the closing handshake (section 7.1.1: the server
//! closes first).

mod cases;
mod wire;

use std::net::SocketAddr;
use std::time::Duration;

use floodgate_tests::TestApp;

use cases::{Case, Expect, Step};
use wire::{Frame, Heard, Read};

/// How soon after the closing handshake the server must have closed the TCP connection: it
/// waits at most a second for the client's Close (`gateway::session::ending`), and a few more
/// are for a busy machine, not for the server.
const CLOSE_BOUND: Duration = Duration::from_secs(5);

/// Joins with the usual handshake and reads the ticket.
async fn open(addr: SocketAddr, sale: &str) -> Result<wire::Conn, String> {
    let (key, accept) = wire::key_pair();
    let answer = wire::handshake(
        addr,
        &wire::request(addr, &format!("/ws?sale={sale}"), &key, ""),
    )
    .await;
    if answer.status != 101 || answer.header("sec-websocket-accept") != Some(accept.as_str()) {
        return Err(format!("the handshake was answered {}", answer.status));
    }
    let mut conn = answer.conn;
    match conn.read(wire::WITHIN).await {
        Read::Frame(Heard::Text(text)) if text.starts_with(br#"{"type":"ticket""#) => Ok(conn),
        other => Err(format!("expected the ticket, got {other:?}")),
    }
}

/// Runs one case on a session of its own; `Err` says what the server did instead.
async fn run(addr: SocketAddr, sale: &str, case: &Case) -> Result<(), String> {
    let mut conn = open(addr, sale).await?;
    for step in &case.send {
        match step {
            Step::Frame(frame) => conn.send(frame).await,
            Step::Raw(bytes) => conn.send_raw(bytes).await,
            Step::Trickle(bytes) => {
                for byte in bytes {
                    conn.send_raw(&[*byte]).await;
                }
            }
        }
    }
    for expect in &case.expect {
        hear(&mut conn, expect).await?;
    }
    Ok(())
}

/// Waits for `expect`, passing over what the case does not ask about.
async fn hear(conn: &mut wire::Conn, expect: &Expect) -> Result<(), String> {
    loop {
        let heard = match conn.read(wire::WITHIN).await {
            Read::Frame(heard) => heard,
            Read::Eof => {
                return Err(format!(
                    "TCP closed with no Close frame, waiting for {expect:?} (the client sees 1006)"
                ))
            }
            Read::Timeout => {
                return Err(format!(
                    "nothing in {:?}, waiting for {expect:?}",
                    wire::WITHIN
                ))
            }
            Read::Violation(what) => return Err(format!("the server broke the RFC: {what}")),
        };
        let is_pong = matches!(&heard, Heard::Text(t) if t.starts_with(br#"{"type":"pong"}"#));
        match (expect, heard) {
            (Expect::AppPong, _) if is_pong => return Ok(()),
            (Expect::Pong(want), Heard::Pong(got)) if &got == want => return Ok(()),
            (Expect::Failed(want), Heard::Close(Some((code, _)))) if code == *want => {
                // The client's half of the handshake (after a Close of its own the server
                // refused, a second one changes nothing).
                conn.send(&Frame::close(code, b"")).await;
                return closed_within_bound(conn).await;
            }
            (Expect::Answered(want), Heard::Close(got))
                if got.as_ref().map(|(c, _)| *c) == *want =>
            {
                return closed_within_bound(conn).await;
            }
            (Expect::Answered(_), _) if is_pong => {
                return Err("a message answered after the client's Close".into())
            }
            (_, Heard::Close(got)) => {
                return Err(format!("closed with {got:?}, waiting for {expect:?}"))
            }
            // The session's own messages (the pre-queue's size), its heartbeat, a pong to an
            // earlier ping of the case's.
            (_, Heard::Text(_) | Heard::Ping(_) | Heard::Pong(_)) => {}
            (_, Heard::Binary(_)) => return Err("a binary message from the server".into()),
        }
    }
}

/// After the closing handshake the server closes the TCP connection, within [`CLOSE_BOUND`].
async fn closed_within_bound(conn: &mut wire::Conn) -> Result<(), String> {
    match conn.read(CLOSE_BOUND).await {
        Read::Eof => Ok(()),
        Read::Timeout => Err(format!(
            "the connection still open {CLOSE_BOUND:?} after the closing handshake"
        )),
        other => Err(format!("after the closing handshake: {other:?}")),
    }
}

/// Runs every case against one gateway and fails with the list of those that did not pass.
async fn conform(db: sqlx::PgPool, cases: Vec<Case>) {
    let app = TestApp::spawn(db).await;
    let sale = app.pending_sale("rfc-").await;
    let mut failures = Vec::new();
    for case in &cases {
        if let Err(what) = run(app.gateway, &sale, case).await {
            failures.push(format!("{}: {what}", case.id));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[sqlx::test(migrations = "../migrations")]
async fn framing_and_limits(db: sqlx::PgPool) {
    let mut all = cases::framing();
    all.extend(cases::limits());
    conform(db, all).await;
}

#[sqlx::test(migrations = "../migrations")]
async fn pings_and_pongs(db: sqlx::PgPool) {
    conform(db, cases::pings()).await;
}

#[sqlx::test(migrations = "../migrations")]
async fn reserved_bits_and_opcodes(db: sqlx::PgPool) {
    conform(db, cases::reserved()).await;
}

#[sqlx::test(migrations = "../migrations")]
async fn fragmentation(db: sqlx::PgPool) {
    conform(db, cases::fragmentation()).await;
}

#[sqlx::test(migrations = "../migrations")]
async fn utf8(db: sqlx::PgPool) {
    conform(db, cases::utf8()).await;
}

#[sqlx::test(migrations = "../migrations")]
async fn the_closing_handshake(db: sqlx::PgPool) {
    conform(db, cases::closing()).await;
}

/// Section 4 (the opening handshake): what a server must answer, and refuse. Host is required
/// (section 4.1, and HTTP/1.1 itself); a refusal takes no ticket.
#[sqlx::test(migrations = "../migrations")]
async fn the_opening_handshake(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let sale = app.pending_sale("rfc-").await;
    let addr = app.gateway;
    let path = format!("/ws?sale={sale}");
    let mut failures = Vec::new();

    // The answer names the accept key of section 4.2.2, `Upgrade` and `Connection`, and a
    // subprotocol only when one was offered; header names and tokens in any case are taken.
    for (what, extra, protocol) in [
        ("no subprotocol offered", "", None),
        (
            "floodgate offered",
            "Sec-WebSocket-Protocol: chat, floodgate\r\n",
            Some("floodgate"),
        ),
    ] {
        let (key, accept) = wire::key_pair();
        let answer = wire::handshake(addr, &wire::request(addr, &path, &key, extra)).await;
        let upgrade = answer.header("upgrade").map(str::to_ascii_lowercase);
        let connection = answer.header("connection").map(str::to_ascii_lowercase);
        if answer.status != 101
            || answer.header("sec-websocket-accept") != Some(accept.as_str())
            || upgrade.as_deref() != Some("websocket")
            || connection.as_deref() != Some("upgrade")
            || answer.header("sec-websocket-protocol") != protocol
        {
            failures.push(format!(
                "{what}: answered {} {:?}",
                answer.status, answer.headers
            ));
        }
    }
    let (key, _) = wire::key_pair();
    let odd_case = format!(
        "GET {path} HTTP/1.1\r\nhost: {addr}\r\nupgrade: WebSocket\r\nconnection: keep-alive, Upgrade\r\n\
         sec-websocket-key: {key}\r\nsec-websocket-version: 13\r\n\r\n"
    );
    let answer = wire::handshake(addr, &odd_case).await;
    if answer.status != 101 {
        failures.push(format!(
            "lowercase names, mixed-case tokens: answered {}",
            answer.status
        ));
    }

    // Refusals: status, code, and no ticket taken.
    let (key, _) = wire::key_pair();
    let good = wire::request(addr, &path, &key, "");
    let without = |name: &str| -> String {
        good.split("\r\n")
            .filter(|line| !line.to_ascii_lowercase().starts_with(&format!("{name}:")))
            .collect::<Vec<_>>()
            .join("\r\n")
    };
    for (what, request, status, code) in [
        ("no Host", without("host"), 400, "host_missing"),
        (
            "two Hosts",
            good.replacen("\r\n", "\r\nHost: elsewhere.example\r\n", 1),
            400,
            "host_missing",
        ),
        ("no Upgrade", without("upgrade"), 426, "websocket_required"),
        (
            "no Connection",
            without("connection"),
            426,
            "websocket_required",
        ),
        (
            "no key",
            without("sec-websocket-key"),
            426,
            "websocket_required",
        ),
        (
            "version 8",
            good.replace("Version: 13", "Version: 8"),
            426,
            "websocket_required",
        ),
        (
            "a key of 15 bytes",
            good.replace(&key, "AAAAAAAAAAAAAAAAAAAA"),
            426,
            "websocket_required",
        ),
    ] {
        let mut answer = wire::handshake(addr, &request).await;
        let body: serde_json::Value =
            serde_json::from_slice(&answer.body().await).unwrap_or_default();
        if answer.status != status || body["error"] != code {
            failures.push(format!(
                "{what}: answered {} {body}, not {status} {code}",
                answer.status
            ));
        }
        if status == 426 && answer.header("sec-websocket-version") != Some("13") {
            failures.push(format!("{what}: a 426 without Sec-WebSocket-Version: 13"));
        }
    }
    // Nothing refused took a ticket: the three sessions above hold 1 to 3, the next is 4.
    let conn = open(addr, &sale).await;
    if let Err(e) = conn {
        failures.push(format!("a join after the refusals: {e}"));
    }
    let issued = app.redis_int(&app.keys.sale(&sale).seq()).await;
    if issued != 4 {
        failures.push(format!(
            "{issued} tickets issued, not 4: a refused handshake took one"
        ));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
