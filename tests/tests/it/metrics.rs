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

mod admission;
mod edge;

/// promtool: `FLOODGATE_PROMTOOL`, else where `deploy/stack.sh` unpacks it.
fn promtool() -> PathBuf {
    if let Ok(path) = std::env::var("FLOODGATE_PROMTOOL") {
        return path.into();
    }
    floodgate_tests::tool("prometheus/usr/bin/promtool")
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

/// A sale on a fresh app, and one buyer's way through it: a join (a ticket sent), the turn (the
/// token pushed, the socket closed normally), a reservation (the claim and reserve scripts, the
/// broker's acknowledgement).
async fn one_buyer(prefix: &str) -> (TestApp, String) {
    let app = TestApp::spawn(fresh_db().await).await;
    let sale = unique(prefix);
    let spec = SaleSpec {
        opens_in: Duration::from_millis(600),
        ..SaleSpec::default()
    };
    app.create_sale(&sale, &spec).await;
    let mut client = RoomClient::join(&app.ws_url(&sale))
        .await
        .expect("a ticket");
    let token = client.admitted(Duration::from_secs(10)).await;
    app.reserve(&sale, &token, &unique("k"), "p1", 1)
        .await
        .expect("a reservation");
    (app, sale)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_listener_script_and_send_is_measured_and_promtool_accepts_it() {
    let (app, sale) = one_buyer("metrics-").await;
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

fn observability(file: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../deploy/observability")
        .join(file);
    std::fs::read_to_string(path).unwrap()
}

/// Every `floodgate_*` series name in `expr`.
fn series_names(expr: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = expr;
    while let Some(at) = rest.find("floodgate_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_lowercase() || c == '_' || c.is_ascii_digit()))
            .unwrap_or(tail.len());
        names.push(tail[..end].to_owned());
        rest = &tail[end..];
    }
    names
}

/// `promtool check rules` on `rules` (YAML text): whether it passes, and what it said.
fn promtool_rules(rules: &str) -> (bool, String) {
    let file = std::env::temp_dir()
        .join(unique("rules-"))
        .with_extension("yaml");
    std::fs::write(&file, rules).unwrap();
    let out = Command::new(promtool())
        .args(["check", "rules"])
        .arg(&file)
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&file);
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), said)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_and_the_alert_rules_use_only_series_the_services_serve() {
    // The alert rules load in Prometheus' own checker.
    let rules = observability("alerts.yaml");
    let (ok, said) = promtool_rules(&rules);
    assert!(ok, "promtool check rules: {said}");
    assert!(said.contains("16 rules found"), "{said}");

    // The dashboard has the rush's panels, and every query parses (each checked as a
    // recording rule by promtool, with the sale variable filled in).
    let dashboard: serde_json::Value =
        serde_json::from_str(&observability("floodgate-rush.json")).expect("the dashboard is JSON");
    let panels = dashboard["panels"].as_array().expect("panels");
    let titles: Vec<&str> = panels.iter().filter_map(|p| p["title"].as_str()).collect();
    for title in [
        "Waiting",
        "Admitted per second against the set rate",
        "Active against the cap",
        "Sold and held per pool",
        "Reservation latency",
        "Reservation errors",
        "Broker latency",
        "Consumer lag",
        "Gateway memory per instance",
        "Sessions per instance",
        "The edge's answers",
        "Edge connections",
    ] {
        assert!(titles.contains(&title), "no panel {title:?} in {titles:?}");
    }
    let exprs: Vec<String> = panels
        .iter()
        .flat_map(|p| p["targets"].as_array().cloned().unwrap_or_default())
        .filter_map(|t| t["expr"].as_str().map(|e| e.replace("$sale", ".+")))
        .collect();
    let recording: String = exprs
        .iter()
        .enumerate()
        .map(|(i, e)| {
            format!(
                "      - record: panel_{i}\n        expr: {}\n",
                serde_json::to_string(e).unwrap()
            )
        })
        .collect();
    let (ok, said) = promtool_rules(&format!(
        "groups:\n  - name: dashboard\n    rules:\n{recording}"
    ));
    assert!(ok, "a dashboard query does not parse: {said}");

    // Every series they name is served by some service (the in-process ones share a recorder).
    let (app, sale) = one_buyer("observe-").await;
    let body = serde_json::json!({ "pool": "p1", "seats": 1 });
    let (status, _) = app
        .post_reservation(&sale, "not-a-pass", &unique("k"), &body)
        .await;
    assert_eq!(status, 401, "an API error, counted by its code");
    let names: Vec<String> = exprs
        .iter()
        .map(String::as_str)
        .chain([rules.as_str()])
        .flat_map(series_names)
        .collect();
    // The edge's series are the edge's own (deploy/nginx/cdn.conf): one in front of the app,
    // having answered once.
    let edge = floodgate_tests::edge::Edge::start(&[app.gateway], app.booking).await;
    let _ = app.http.get(edge.url("/v1/nowhere")).send().await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        // What readiness found is served once a probe has asked (a kubelet asks every few
        // seconds).
        let _ = app
            .http
            .get(format!("http://{}/readyz", app.admin))
            .send()
            .await;
        let services = scrape(&app.http, app.admin).await;
        let edges = edge.scrape().await;
        let missing: Vec<&String> = names
            .iter()
            .filter(|name| {
                let text = if name.starts_with("floodgate_edge_") {
                    &edges
                } else {
                    &services
                };
                !text.lines().any(|line| {
                    line.strip_prefix(name.as_str())
                        .is_some_and(|rest| rest.starts_with(['{', ' ']))
                })
            })
            .collect();
        if missing.is_empty() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "series the dashboard or the rules use that no service serves: {missing:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The alert rules' unit tests (deploy/observability/alerts.test.yaml) pass in `promtool test
/// rules`, and every alert has one in which it fires: a rule changed without its test, or added
/// without one, fails here.
#[test]
fn every_alert_rule_has_a_unit_test_that_passes() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/observability");
    let out = Command::new(promtool())
        .args(["test", "rules", "alerts.test.yaml"])
        .current_dir(&dir)
        .output()
        .unwrap();
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "promtool test rules: {said}");

    let rules: serde_yaml::Value = serde_yaml::from_str(&observability("alerts.yaml")).unwrap();
    let tests: serde_yaml::Value =
        serde_yaml::from_str(&observability("alerts.test.yaml")).unwrap();
    let fired: Vec<&str> = tests["tests"]
        .as_sequence()
        .unwrap()
        .iter()
        .flat_map(|t| t["alert_rule_test"].as_sequence().into_iter().flatten())
        .filter(|t| t["exp_alerts"].as_sequence().is_some_and(|a| !a.is_empty()))
        .filter_map(|t| t["alertname"].as_str())
        .collect();
    let alerts: Vec<&str> = rules["groups"]
        .as_sequence()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_sequence().into_iter().flatten())
        .filter_map(|r| r["alert"].as_str())
        .collect();
    assert_eq!(alerts.len(), 16, "{alerts:?}");
    for alert in alerts {
        assert!(
            fired.contains(&alert),
            "{alert} has no unit test in which it fires"
        );
    }
}

/// Every alert says where its page in the runbook is: a `runbook_url` ending in the anchor of a
/// heading of docs/runbook.md named after the alert (what it means, what to do), under the
/// project's published docs.
#[test]
fn every_alert_links_its_section_of_the_runbook() {
    let runbook = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/runbook.md"),
    )
    .unwrap();
    let rules: serde_yaml::Value = serde_yaml::from_str(&observability("alerts.yaml")).unwrap();
    let rules: Vec<&serde_yaml::Value> = rules["groups"]
        .as_sequence()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_sequence().into_iter().flatten())
        .collect();
    assert!(!rules.is_empty());
    // The project's own address, as the workspace's manifest gives it.
    let manifest = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.toml"),
    )
    .unwrap();
    let repository = manifest
        .lines()
        .find_map(|l| l.strip_prefix("repository = "))
        .map(|v| v.trim_matches('"'))
        .expect("the workspace names its repository");
    for rule in rules {
        let alert = rule["alert"].as_str().unwrap();
        let url = rule["annotations"]["runbook_url"]
            .as_str()
            .unwrap_or_else(|| panic!("{alert} has no runbook_url"));
        let anchor = alert.to_lowercase();
        assert_eq!(
            url,
            format!("{repository}/docs/runbook.md#{anchor}"),
            "{alert}"
        );
        assert!(
            runbook.lines().any(|l| l == format!("### {alert}")),
            "docs/runbook.md has no section ### {alert}"
        );
    }
}
