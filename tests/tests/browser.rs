//! The browser client in real headless Chromium (Debian's, driven by playwright-core; both
//! installed by deploy/stack.sh). Each test saves screenshots under tests/browser/artifacts/.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use floodgate_tests::client::RoomClient;
use floodgate_tests::{unique, SaleSpec, TestApp, TestOptions};

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

#[sqlx::test(migrations = "../migrations")]
async fn a_reload_during_the_wait_keeps_the_place(db: sqlx::PgPool) {
    let options = TestOptions {
        static_dir: Some(Path::new(env!("CARGO_MANIFEST_DIR")).join("../static")),
        ..TestOptions::default()
    };
    let app = TestApp::spawn_with(db, options).await;
    let sale = unique("browser-");
    let spec = SaleSpec {
        opens_in: Duration::from_millis(300),
        ..SaleSpec::default()
    };
    app.create_sale(&sale, &spec).await;
    // Open, but paused: everyone keeps their place while the page reloads.
    app.admission(&sale, "pause").await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    // Two people are ahead.
    let mut ahead = Vec::new();
    for _ in 0..2 {
        ahead.push(RoomClient::join(&app.ws_url(&sale)).await.unwrap());
    }

    let url = format!(
        "http://{}/?sale={sale}&api=http://{}",
        app.gateway, app.booking
    );
    let seen = tokio::task::spawn_blocking(move || run_script("reload.mjs", &[&url]))
        .await
        .unwrap();
    assert_eq!(seen["before"]["ticket"], 3, "{seen}");
    assert_eq!(seen["before"]["position"], 3, "{seen}");
    assert_eq!(
        seen["after"], seen["before"],
        "the reload kept the ticket and the place: {seen}"
    );
    assert!(browser_dir().join("artifacts/reload-after.png").exists());
}

#[sqlx::test(migrations = "../migrations")]
async fn one_user_books_and_pays_from_the_waiting_room_to_a_confirmation(db: sqlx::PgPool) {
    let options = TestOptions {
        static_dir: Some(Path::new(env!("CARGO_MANIFEST_DIR")).join("../static")),
        ..TestOptions::default()
    };
    let app = TestApp::spawn_with(db, options).await;
    let sale = unique("journey-");
    let spec = SaleSpec {
        opens_in: Duration::from_secs(2),
        ..SaleSpec::default()
    };
    app.create_sale(&sale, &spec).await;
    let url = format!(
        "http://{}/?sale={sale}&api=http://{}",
        app.gateway, app.booking
    );
    let seen = tokio::task::spawn_blocking(move || run_script("journey.mjs", &[&url]))
        .await
        .unwrap();
    assert_eq!(seen["ticket"], 1, "{seen}");
    assert!(
        seen["result"].as_str().unwrap().contains("confirmed"),
        "{seen}"
    );
    // The booking is durable and confirmed.
    app.eventually("a CONFIRMED booking", Duration::from_secs(30), || async {
        app.bookings(&sale, "CONFIRMED").await == 1
    })
    .await;
    assert!(browser_dir()
        .join("artifacts/journey-5-confirmed.png")
        .exists());
}
