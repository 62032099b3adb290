//! The protocol's two clients (issue 17). The JavaScript module (static/floodgate-client.js): its
//! unit tests in Node, and a live session against a real gateway in which every message it
//! receives is checked against docs/asyncapi.yaml's schemas before it books a seat with the
//! module's booking calls (in Chromium, the page runs on the same module: tests/it/browser.rs).
//! The Rust crate (`floodgate-client`): a wait in line told as typed events.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use floodgate_tests::{fresh_db, unique, SaleSpec, TestApp};

fn node_tests() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("browser")
}

#[test]
fn the_client_modules_unit_tests_pass_in_node() {
    let out = Command::new("node")
        .args(["--test", "client-unit.test.mjs"])
        .current_dir(node_tests())
        .output()
        .expect("node runs");
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("# fail 0"), "{said}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_module_follows_a_live_gateway_every_message_as_the_asyncapi_document_says() {
    let app = TestApp::spawn(fresh_db().await).await;
    let sale = unique("js-");
    let spec = SaleSpec {
        opens_in: Duration::from_millis(1500),
        ..SaleSpec::default()
    };
    app.create_sale(&sale, &spec).await;
    let gateway = format!("http://{}", app.gateway);
    let asyncapi = node_tests().join("../../docs/asyncapi.yaml");
    let out = tokio::task::spawn_blocking(move || {
        Command::new("node")
            .arg("--experimental-websocket")
            .arg("client-live.mjs")
            .args([&gateway, &sale, "p1"])
            .arg(asyncapi)
            .current_dir(node_tests())
            .output()
            .expect("node runs")
    })
    .await
    .unwrap();
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_str(said.trim()).expect(&said);
    assert_eq!(
        report["strict"], true,
        "the schemas refuse a broken message"
    );
    assert_eq!(report["invalid"], serde_json::json!([]), "{report}");
    let seen: Vec<&str> = report["seen"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    // Before the opening the pre-queue, then the turn; the ping's answer on the way.
    for kind in ["ticket", "pre_queue", "pong", "admitted"] {
        assert!(seen.contains(&kind), "{kind} in {seen:?}");
    }
    assert_eq!(seen[0], "ticket", "{seen:?}");
    assert_eq!(report["reserve"], 201, "{report}");
    assert_eq!(report["read"], 200, "{report}");
    assert_eq!(report["status"], "held", "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rust_client_tells_a_wait_in_line_as_typed_events() {
    use floodgate_client::room::{wait_in_line_with, Line, RoomEvent, Waited};
    let app = TestApp::spawn(fresh_db().await).await;
    let sale = unique("rs-");
    let spec = SaleSpec {
        opens_in: Duration::from_millis(1500),
        ..SaleSpec::default()
    };
    app.create_sale(&sale, &spec).await;
    let gateways = [app.gateway];
    let mut line = Line::new(&gateways, &sale);
    let mut events = Vec::new();
    let waited = wait_in_line_with(&mut line, |event| events.push(event)).await;
    let Waited::Admitted(token) = waited else {
        panic!("{waited:?} after {events:?}");
    };
    assert!(floodgate_client::claims(&token).is_some(), "a token");
    let RoomEvent::Ticket(ticket) = &events[0] else {
        panic!("a ticket first: {events:?}");
    };
    assert!(!ticket.resumed);
    assert!(
        events
            .iter()
            .any(|e| matches!(e, RoomEvent::PreQueue { size } if *size >= 1)),
        "the pre-queue before the opening: {events:?}"
    );
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, RoomEvent::Reconnecting { .. })),
        "{events:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rust_client_stays_connected_to_a_still_room_that_pings_it() {
    use floodgate_client::room::{wait_in_line_with, Line, RoomEvent};
    use floodgate_tests::TestOptions;
    // The gateway pings every 200 ms; the client takes 1 s with nothing at all for a dead
    // connection. The room is open and paused: no message comes for the whole wait.
    let options = TestOptions {
        heartbeat_ms: 200,
        ..TestOptions::default()
    };
    let app = TestApp::spawn_with(fresh_db().await, options).await;
    let sale = app.open_sale("still-", SaleSpec::default()).await;
    app.admission(&sale, "pause").await;
    let gateways = [app.gateway];
    let mut line = Line::new(&gateways, &sale);
    line.silence = Duration::from_secs(1);
    let mut events = Vec::new();
    let waiting = wait_in_line_with(&mut line, |event| events.push(event));
    // Four silences long: without the pings counting as life it reconnects three times.
    let ended = tokio::time::timeout(Duration::from_secs(4), waiting).await;
    assert!(ended.is_err(), "the wait goes on: {ended:?}");
    let reconnections = events
        .iter()
        .filter(|e| matches!(e, RoomEvent::Reconnecting { .. }))
        .count();
    assert_eq!(reconnections, 0, "{events:?}");
    assert!(matches!(events[0], RoomEvent::Ticket(_)), "{events:?}");
}
