//! The load generator's `sale` scenario against the real services: the whole rush on a small
//! scale (join, wait, admitted, reserve, pay or walk away, expire), whose invariant checks must
//! pass; and the same checks failing, with exit status 2, once the seat counters are corrupted.

use std::process::Command;
use std::time::Duration;

use floodgate_tests::{binary, fresh_database, redis_url, unique, SaleSpec, TestApp};

fn loadgen(
    app: &TestApp,
    database_url: &str,
    sale: &str,
    clients: u64,
) -> (i32, String, serde_json::Value) {
    let json = std::env::temp_dir().join(format!("{}.json", unique("loadgen-")));
    let output = Command::new(binary("floodgate-loadgen"))
        .args(["sale", "--sale", sale, "--clients", &clients.to_string()])
        .args(["--gateways", &app.gateway.to_string()])
        .args(["--booking", &app.booking.to_string()])
        .args(["--sandbox", &app.sandbox.to_string()])
        .args([
            "--pay-ratio",
            "0.6",
            "--seats",
            "2",
            "--timeout-secs",
            "120",
        ])
        .args(["--database-url", database_url, "--redis-url", &redis_url()])
        .args(["--redis-prefix", app.keys.prefix()])
        .arg("--json")
        .arg(&json)
        .output()
        .expect("the loadgen binary runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let report = std::fs::read(&json)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_else(|| {
            panic!(
                "no JSON report:\n{stdout}\n{}",
                String::from_utf8_lossy(&output.stderr)
            )
        });
    let _ = std::fs::remove_file(&json);
    (output.status.code().unwrap_or(-1), stdout, report)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sale_scenario_runs_the_whole_rush_and_checks_its_invariants() {
    let (url, db) = fresh_database().await;
    let app = TestApp::spawn(db.clone()).await;
    let sale = unique("rush-");
    // 30 seats for 300 people: some arrive before the opening (the lottery), most after; holds
    // of those who walk away lapse after two seconds and go back on sale.
    let spec = SaleSpec {
        pools: vec![("p1".into(), 15), ("p2".into(), 15)],
        opens_in: Duration::from_millis(1500),
        admission_rate: 200.0,
        max_seats: 2,
        hold_ttl_secs: 2,
        token_ttl_secs: 10,
        ..SaleSpec::default()
    };
    app.create_sale(&sale, &spec).await;

    let (status, stdout, report) = loadgen(&app, &url, &sale, 300);
    assert_eq!(status, 0, "{stdout}");
    let checks = report["checks"].as_array().unwrap();
    assert_eq!(checks.len(), 4, "{report}");
    assert!(checks.iter().all(|c| c["ok"] == true), "{stdout}");
    let outcomes = &report["outcomes"];
    assert_eq!(outcomes["failed"], 0, "{report}");
    assert!(outcomes["paid"].as_u64().unwrap() > 0, "{report}");
    assert!(outcomes["walked_away"].as_u64().unwrap() > 0, "{report}");
    assert!(
        outcomes["sold_out_while_waiting"].as_u64().unwrap() > 0,
        "300 people for 30 seats: {report}"
    );
    // Independently of the loadgen's own checks: PostgreSQL confirms exactly 30 seats, the
    // sale's whole capacity (walk-aways' seats were sold again).
    let confirmed: i64 = sqlx::query_scalar(
        "select coalesce(sum(seats), 0)::bigint from bookings where sale_id = $1 and status = 'CONFIRMED'",
    )
    .bind(&sale)
    .fetch_one(&db)
    .await
    .unwrap();
    assert_eq!(confirmed, 30, "{report}");
    assert!(
        stdout.contains("no oversell"),
        "the table names the checks:\n{stdout}"
    );

    // Corrupt a counter (one seat more available than exists): the checks catch it.
    let mut redis = app.redis.clone();
    let _: i64 = redis::cmd("INCR")
        .arg(app.keys.pool(&sale, "p1").available())
        .query_async(&mut redis)
        .await
        .unwrap();
    let (status, stdout, report) = loadgen(&app, &url, &sale, 0);
    assert_eq!(status, 2, "{stdout}");
    assert_eq!(report["checks"][0]["ok"], false, "{report}");
}
