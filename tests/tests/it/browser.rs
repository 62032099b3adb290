//! The browser client and the ops console in real headless Chromium (Debian's, driven by
//! playwright-core; both installed by deploy/stack.sh). Each test saves screenshots under
//! tests/browser/artifacts/. [`checkout`]: the page's way to the payment; [`signed_in`] and
//! [`openid`]: a signed-in buyer, by the stand-in and by a certified OpenID provider.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use floodgate_tests::client::RoomClient;
use floodgate_tests::edge::Edge;
use floodgate_tests::eventually;
use floodgate_tests::gateways::{GatewayProcess, GatewayTimings};
use floodgate_tests::{unique, SaleSpec, TestApp, TestOptions};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

mod checkout;
mod openid;
mod signed_in;

use signed_in::asha_books_and_pays;
pub(crate) use signed_in::confirmed_buyer;

fn browser_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("browser")
}

/// Runs one of tests/browser/*.mjs with `args`; its JSON output.
fn run_script(script: &str, args: &[&str]) -> serde_json::Value {
    let dir = browser_dir();
    assert!(
        dir.join("node_modules/playwright-core").exists(),
        "playwright-core is missing: deploy/stack.sh up installs it"
    );
    let artifacts = dir.join("artifacts");
    std::fs::create_dir_all(&artifacts).unwrap();
    let output = Command::new("node")
        .arg(script)
        .args(args)
        .arg(&artifacts)
        .current_dir(&dir)
        .output()
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{script} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(stdout.trim().lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{script} printed no JSON ({e}):\n{stdout}"))
}

async fn script(name: &'static str, args: Vec<String>) -> serde_json::Value {
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run_script(name, &args)
    })
    .await
    .unwrap()
}

/// A script of tests/browser/ in conversation with its test: it prints a JSON line when it has
/// got somewhere, waits for a line on its stdin before going on (the test changes something
/// meanwhile), and prints its last JSON line before it exits.
pub(crate) struct Dialogue {
    node: tokio::process::Child,
    out: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
}

impl Dialogue {
    /// Starts `script` on the page at `url`; its screenshots go to the artifacts folder.
    pub(crate) fn start(script: &str, url: &str) -> Self {
        Self::start_with(script, &[url])
    }

    /// Starts `script` with the page's URL and then the artifacts folder, then `more`.
    pub(crate) fn start_with(script: &str, args: &[&str]) -> Self {
        let dir = browser_dir();
        let artifacts = dir.join("artifacts");
        std::fs::create_dir_all(&artifacts).unwrap();
        let mut node = tokio::process::Command::new("node")
            .arg(script)
            .arg(args[0])
            .arg(&artifacts)
            .args(&args[1..])
            .current_dir(&dir)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("node runs");
        let out = BufReader::new(node.stdout.take().unwrap()).lines();
        Self { node, out }
    }

    /// The next JSON line it prints, within `timeout` (`what` says what was awaited).
    pub(crate) async fn report(&mut self, timeout: Duration, what: &str) -> serde_json::Value {
        let line = tokio::time::timeout(timeout, self.out.next_line())
            .await
            .unwrap_or_else(|_| panic!("timed out waiting for: {what}"))
            .unwrap()
            .unwrap_or_else(|| panic!("the script ended before: {what}"));
        serde_json::from_str(&line).unwrap()
    }

    /// Lets it go on.
    pub(crate) async fn go(&mut self) {
        let mut stdin = self.node.stdin.take().unwrap();
        stdin.write_all(b"go\n").await.unwrap();
        stdin.flush().await.unwrap();
    }

    /// Waits for it to exit, successfully.
    pub(crate) async fn finished(mut self) {
        assert!(self.node.wait().await.unwrap().success());
    }
}

/// A static folder of its own for one test: the browser client's files, to which the test
/// publishes its sale's catalog as `floodgate-booking sale publish` would.
struct Site(PathBuf);

impl Site {
    fn new() -> Self {
        let dir = std::env::temp_dir().join(unique("floodgate-site-"));
        std::fs::create_dir_all(&dir).unwrap();
        floodgate_tests::copy_page(&dir);
        Self(dir)
    }

    fn options(&self) -> TestOptions {
        TestOptions {
            static_dir: Some(self.0.clone()),
            ..TestOptions::default()
        }
    }

    async fn publish(&self, app: &TestApp, sale: &str) {
        floodgate_booking::publish_static::publish(&app.db, sale, &self.0)
            .await
            .expect("publish the catalog");
    }
}

impl Drop for Site {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A gateway serving the browser client from a site of its own, with a sale (`spec`, id
/// starting with `prefix`) created, armed and published into that site.
async fn published_sale(db: sqlx::PgPool, prefix: &str, spec: SaleSpec) -> (Site, TestApp, String) {
    let site = Site::new();
    let app = TestApp::spawn_with(db, site.options()).await;
    let sale = unique(prefix);
    app.create_sale(&sale, &spec).await;
    site.publish(&app, &sale).await;
    (site, app, sale)
}

/// Pauses `sale` and, once it is open, puts two people in line (on the in-process gateway): a
/// queue that holds still, so a place can be compared before and after something happens.
async fn still_queue_with_two_ahead(app: &TestApp, sale: &str) -> Vec<RoomClient> {
    app.admission(sale, "pause").await;
    app.until_open(sale).await;
    let mut ahead = Vec::new();
    for _ in 0..2 {
        ahead.push(RoomClient::join(&app.ws_url(sale)).await.unwrap());
    }
    ahead
}

/// The home page (the list of sales) on the gateway, which passes the page's booking requests
/// to the test's booking service: the page talks to its own origin only.
fn home_url(app: &TestApp) -> String {
    format!("http://{}/", app.gateway)
}

/// The sale's page.
fn page_url(app: &TestApp, sale: &str) -> String {
    format!("{}?sale={sale}", home_url(app))
}

#[sqlx::test(migrations = "../migrations")]
async fn a_reload_during_the_wait_keeps_the_place(db: sqlx::PgPool) {
    let spec = SaleSpec {
        opens_in: Duration::from_millis(1_000),
        ..SaleSpec::default()
    };
    let (_site, app, sale) = published_sale(db, "browser-", spec).await;
    let _ahead = still_queue_with_two_ahead(&app, &sale).await;

    let seen = script("reload.mjs", vec![page_url(&app, &sale)]).await;
    assert_eq!(seen["before"]["ticket"], 3, "{seen}");
    assert_eq!(seen["before"]["position"], 3, "{seen}");
    assert_eq!(
        seen["after"], seen["before"],
        "the reload kept the ticket and the place: {seen}"
    );
    assert!(
        seen["eta"].as_str().unwrap().contains("paused"),
        "the page says admission is paused: {seen}"
    );
    assert!(
        seen["announced"]
            .as_str()
            .unwrap()
            .starts_with("Your place in line: 3."),
        "screen readers hear the place: {seen}"
    );
    assert!(browser_dir().join("artifacts/reload-after.png").exists());
}

#[sqlx::test(migrations = "../migrations")]
async fn one_user_books_and_pays_from_the_train_list_to_a_confirmation(db: sqlx::PgPool) {
    let spec = SaleSpec {
        opens_in: Duration::from_secs(3),
        ..SaleSpec::default()
    };
    let (_site, app, sale) = published_sale(db, "journey-", spec).await;

    let seen = script("journey.mjs", vec![home_url(&app), "pay".into()]).await;
    assert_eq!(
        seen["sales"],
        serde_json::json!([format!("Test sale {sale}")]),
        "{seen}"
    );
    assert_eq!(
        seen["trains"],
        serde_json::json!(["Test Rajdhani"]),
        "{seen}"
    );
    assert_eq!(seen["ticket"], 1, "{seen}");
    assert!(
        seen["announced"].as_str().unwrap().contains("your turn"),
        "admission is announced to screen readers: {seen}"
    );
    // The hold is 300 s: its countdown starts just under five minutes.
    let countdown = seen["countdown"].as_str().unwrap();
    assert!(countdown.starts_with("4:") || countdown == "5:00", "{seen}");
    let summary = seen["summary"].as_str().unwrap();
    assert!(
        summary.contains("Test Rajdhani") && summary.contains("AC 3 Tier"),
        "{seen}"
    );
    assert!(
        seen["result"].as_str().unwrap().contains("confirmed"),
        "{seen}"
    );
    // The confirmation names the booking and the amount paid (1 seat at 1,500.00 INR).
    let details = seen["details"].as_str().unwrap();
    assert!(details.contains("1,500"), "{seen}");
    // The booking is durable and confirmed.
    eventually("a CONFIRMED booking", Duration::from_secs(30), || async {
        app.bookings(&sale, "CONFIRMED").await == 1
    })
    .await;
    let reference: String =
        sqlx::query_scalar("select reservation_id from bookings where sale_id = $1")
            .bind(&sale)
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert!(
        details.contains(&reference),
        "the reference shown is the booking's: {seen}"
    );
    assert!(browser_dir()
        .join("artifacts/journey-6-confirmed.png")
        .exists());
}

#[sqlx::test(migrations = "../migrations")]
async fn an_unpaid_hold_counts_down_and_the_page_shows_its_expiry(db: sqlx::PgPool) {
    let spec = SaleSpec {
        opens_in: Duration::from_secs(2),
        hold_ttl_secs: 4,
        ..SaleSpec::default()
    };
    let (_site, app, sale) = published_sale(db, "expiry-", spec).await;

    let seen = script("journey.mjs", vec![home_url(&app), "expire".into()]).await;
    assert!(
        seen["countdown"].as_str().unwrap().starts_with("0:0"),
        "a four-second hold counts down from 0:04: {seen}"
    );
    assert!(
        seen["result"].as_str().unwrap().contains("expired"),
        "{seen}"
    );
    eventually("an EXPIRED booking", Duration::from_secs(30), || async {
        app.bookings(&sale, "EXPIRED").await == 1
    })
    .await;
    assert!(browser_dir()
        .join("artifacts/expiry-5-expired.png")
        .exists());
}

#[sqlx::test(migrations = "../migrations")]
async fn a_rate_change_in_the_ops_console_shows_in_the_admissions(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let sale = unique("console-");
    // One admission every 1,000 seconds: after the first (the limiter's burst of one), nobody
    // else gets in during this test unless the rate changes.
    let spec = SaleSpec {
        opens_in: Duration::from_millis(1_000),
        admission_rate: 0.001,
        ..SaleSpec::default()
    };
    app.create_sale(&sale, &spec).await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    let mut clients = Vec::new();
    for _ in 0..5 {
        clients.push(RoomClient::join(&app.ws_url(&sale)).await.unwrap());
    }
    let path = format!("/admin/v1/sales/{sale}");
    let figures = || async {
        app.ops(reqwest::Method::GET, &path, &app.ops_token, None)
            .await
            .1
    };
    eventually(
        "one admitted, four waiting",
        Duration::from_secs(10),
        || async {
            let f = figures().await;
            f["admitted"] == 1 && f["waiting"] == 4
        },
    )
    .await;

    let url = format!("http://{}/admin/console?sale={sale}", app.admin);
    let seen = script(
        "console.mjs",
        vec![url, app.ops_token.clone(), "50".into(), "5".into()],
    )
    .await;
    assert_eq!(seen["before"]["admitted"], "1", "{seen}");
    assert_eq!(seen["before"]["waiting"], "4", "{seen}");
    assert_eq!(seen["after"]["admitted"], "5", "{seen}");
    assert_eq!(seen["after"]["rate"], "50", "{seen}");
    // The change is the sale's, not the page's: every waiting client was admitted.
    for client in &mut clients {
        client.admitted(Duration::from_secs(10)).await;
    }
    assert_eq!(figures().await["admission_rate"], 50.0);
    // The bot check was raised from the console too.
    let door = &figures().await["door"];
    assert_eq!(
        (door["challenge"].as_str(), door["pow_difficulty"].as_u64()),
        (Some("pow"), Some(20))
    );
    // Both changes are in the console's list of operator actions, newest first, each with who
    // made it (the test's bare token: a short hash of it) and what moved.
    let audit = seen["audit"].as_array().expect("the audit rows");
    let row = |i: usize, col: usize| audit[i][col].as_str().unwrap_or_default().to_owned();
    assert!(row(0, 1).starts_with("sha256:"), "{seen}");
    assert_eq!(
        (row(0, 2), row(1, 2)),
        ("update".into(), "update".into()),
        "{seen}"
    );
    assert!(row(0, 3).contains("challenge: none → pow"), "{seen}");
    assert!(
        row(1, 3).contains("admission_rate:") && row(1, 3).contains("→ 50"),
        "{seen}"
    );
    assert!(browser_dir().join("artifacts/console-after.png").exists());
}

#[sqlx::test(migrations = "../migrations")]
async fn when_its_gateway_goes_away_the_page_reconnects_and_keeps_its_place(db: sqlx::PgPool) {
    let spec = SaleSpec {
        opens_in: Duration::from_millis(1_000),
        ..SaleSpec::default()
    };
    let (site, app, sale) = published_sale(db, "reconnect-", spec).await;
    // Two gateways behind the CDN serve the page and the waiting room.
    let timings = GatewayTimings::default();
    let mut gateways = [
        GatewayProcess::spawn_serving(&app, "gw-a", &timings, &site.0).await,
        GatewayProcess::spawn_serving(&app, "gw-b", &timings, &site.0).await,
    ];
    let edge = Edge::start(&[gateways[0].addr, gateways[1].addr], app.booking).await;
    let _ahead = still_queue_with_two_ahead(&app, &sale).await;

    let url = edge.url(&format!("/?sale={sale}"));
    let mut node = Dialogue::start("reconnect.mjs", &url);
    let before = node
        .report(Duration::from_secs(30), "the page joins in time")
        .await;
    assert_eq!(before["before"]["ticket"], 3, "{before}");
    assert_eq!(before["before"]["position"], 3, "{before}");

    // Stop (drain) the gateway holding the page's socket.
    let mut on = None;
    for (i, gateway) in gateways.iter().enumerate() {
        if app.metric(gateway.admin, "floodgate_ws_sessions").await == Some(1.0) {
            on = Some(i);
        }
    }
    let on = on.expect("one of the two gateways holds the page's socket");
    gateways[on].terminate();
    assert!(gateways[on].wait(Duration::from_secs(20)).await.is_some());
    node.go().await;
    let after = node
        .report(Duration::from_secs(40), "the page is back in time")
        .await;
    node.finished().await;
    assert_eq!(after["sockets"], 2, "one reconnect: {after}");
    assert_eq!(after["after"]["ticket"], 3, "the same ticket: {after}");
    assert_eq!(
        after["after"]["heard"], 3,
        "the same place, from the new socket: {after}"
    );
    // It came back on the other gateway, with its resume token.
    let other = &gateways[1 - on];
    assert_eq!(
        app.metric(other.admin, "floodgate_tickets_resumed_total")
            .await,
        Some(1.0)
    );
    assert!(browser_dir().join("artifacts/reconnect-after.png").exists());
}
