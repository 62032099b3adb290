//! Metrics people can aggregate (issue 17): every latency a histogram, every HTTP listener
//! counted and timed per route and status, Redis per script and command, the broker's produce
//! latency, the WebSocket messages and closes, the admission figures per sale; and each
//! service's output passes `promtool check metrics` (Debian's, unpacked by `deploy/stack.sh`).

use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use floodgate_tests::client::RoomClient;
use floodgate_tests::{eventually, fresh_db, unique, SaleSpec, TestApp};

/// promtool: `FLOODGATE_PROMTOOL`, else where `deploy/stack.sh` unpacks it.
fn promtool() -> PathBuf {
    if let Ok(path) = std::env::var("FLOODGATE_PROMTOOL") {
        return path.into();
    }
    let home = std::env::var("FLOODGATE_HOME").map_or_else(
        |_| {
            PathBuf::from(std::env::var("HOME").unwrap_or_else(|_| "/root".into()))
                .join(".cache/floodgate")
        },
        PathBuf::from,
    );
    home.join("tools/prometheus/usr/bin/promtool")
}

/// `promtool check metrics` on `text`: whether it passes, and what it said.
fn promtool_check(text: &str) -> (bool, String) {
    let mut child = Command::new(promtool())
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool runs (deploy/stack.sh up unpacks it)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), said)
}

async fn scrape(http: &reqwest::Client, admin: std::net::SocketAddr) -> String {
    http.get(format!("http://{admin}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_listener_script_and_send_is_measured_and_promtool_accepts_it() {
    let app = TestApp::spawn(fresh_db().await).await;
    let sale = unique("metrics-");
    let spec = SaleSpec {
        opens_in: Duration::from_millis(600),
        ..SaleSpec::default()
    };
    app.create_sale(&sale, &spec).await;
    // A join (a ticket sent), then a reservation (the claim and reserve scripts, the produce).
    let mut client = RoomClient::join(&app.ws_url(&sale))
        .await
        .expect("a ticket");
    // Its turn comes: the gateway pushes the token and closes the socket normally.
    let token = client.admitted(Duration::from_secs(10)).await;
    app.reserve(&sale, &token, &unique("k"), "p1", 1)
        .await
        .expect("a reservation");
    let (status, _) = app
        .answer(app.http.get(format!("http://{}/no/such/path", app.booking)))
        .await;
    assert_eq!(status, 404);

    let text = eventually(
        "the admission figures are reported",
        Duration::from_secs(10),
        || async {
            let text = scrape(&app.http, app.admin).await;
            text.contains(&format!("floodgate_admission_rate{{sale=\"{sale}\"}} 50"))
                .then_some(text)
        },
    )
    .await;
    for series in [
        // Per listener, route (the pattern, never the path sent), method and status.
        "floodgate_http_requests_total{listener=\"booking\",route=\"/v1/sales/{sale}/reservations\",method=\"POST\",status=\"201\"} 1",
        "floodgate_http_requests_total{listener=\"booking\",route=\"fallback\",method=\"GET\",status=\"404\"} 1",
        "floodgate_http_request_duration_seconds_bucket{listener=\"booking\",route=\"/v1/sales/{sale}/reservations\",method=\"POST\",le=\"10\"} 1",
        "floodgate_http_requests_total{listener=\"gateway\",route=\"/ws\",method=\"GET\"",
        // Redis by script and by command.
        "floodgate_redis_script_duration_seconds_bucket{script=\"reserve\",le=\"10\"} 1",
        "floodgate_redis_script_duration_seconds_bucket{script=\"claim_token\",le=\"10\"} 1",
        "floodgate_redis_script_duration_seconds_bucket{script=\"join\"",
        "floodgate_redis_command_duration_seconds_bucket{command=\"PIPELINE\"",
        // The broker's acknowledgement.
        "floodgate_kafka_produce_duration_seconds_bucket{outcome=\"acked\",le=\"10\"}",
        // The waiting room.
        "floodgate_ws_messages_sent_total{type=\"ticket\"} 1",
        "floodgate_ws_messages_sent_total{type=\"admitted\"} 1",
        "floodgate_ws_sessions",
        "floodgate_admission_frontier{sale=",
        "floodgate_admission_active_cap{sale=",
    ] {
        assert!(text.contains(series), "{series} is missing from:\n{text}");
    }
    assert!(!text.contains("quantile="), "every latency is a histogram");
    assert!(
        !text.contains("/no/such/path"),
        "a stranger's path is never a label"
    );
    let (ok, said) = promtool_check(&text);
    assert!(ok, "promtool check metrics: {said}");

    // The admitted client was closed normally: the close is counted by its code.
    let gateway = eventually("the close is counted", Duration::from_secs(10), || async {
        let text = scrape(&app.http, app.gateway_admin).await;
        text.contains("floodgate_ws_closes_total{code=\"1000\"} 1")
            .then_some(text)
    })
    .await;
    let (ok, said) = promtool_check(&gateway);
    assert!(ok, "promtool check metrics: {said}");
}
