//! The benchmarks' own tools, on a small scale: `floodgate-booking scripts bench` and
//! `deploy/bench-scripts.sh` time the scripts a reservation runs exactly as the booking service
//! sends them, and refuse to time anything else (a script that errs, or a refusal's cheaper
//! path, which is what the raw benchmark timed for days before these existed).

use std::path::Path;
use std::process::Command;

use floodgate_tests::{fresh_database, redis_addr, run_to_end, unique, SaleSpec, TestApp};

/// `deploy/bench-scripts.sh <calls> <script> 100 5` against the test Redis: exit status and
/// what it printed.
fn time_script(calls: &Path, script: &str) -> (i32, String) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut command = Command::new(root.join("deploy/bench-scripts.sh"));
    command
        .arg(calls)
        .args([script, "100", "5"])
        .env("BENCH_REDIS_PORT", redis_addr().port().to_string());
    run_to_end(&mut command)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scripts_are_timed_as_a_reservation_runs_them_and_nothing_else() {
    let (url, db) = fresh_database().await;
    let app = TestApp::spawn(db).await;
    let spec = SaleSpec {
        pools: vec![("p1".into(), 500)],
        ..SaleSpec::default()
    };
    let sale = app.open_sale("bench-", spec).await;
    let calls_for = |sale: &str| {
        let (status, printed) =
            app.booking_command(&url, &["scripts", "bench", "--sale", sale, "--pool", "p1"]);
        assert_eq!(status, 0, "{printed}");
        let path = std::env::temp_dir().join(format!("{}.json", unique("calls-")));
        std::fs::write(&path, &printed).unwrap();
        path
    };
    let calls = calls_for(&sale);

    // Each script answers as on a reservation's path; the rate is printed.
    for script in ["claim_token", "reserve", "ack"] {
        let (status, printed) = time_script(&calls, script);
        assert_eq!(status, 0, "{script}: {printed}");
        let rate: f64 = printed.trim().parse().expect(&printed);
        assert!(rate > 0.0, "{script}: {printed}");
    }
    // The reserve runs really took seats: 100 timed, and one checked before and after.
    let available = app.redis_int(&app.keys.pool(&sale, "p1").available()).await;
    assert_eq!(available, 500 - 102);

    // A sale that is not armed answers with a refusal: not timed.
    let unarmed = calls_for(&unique("unarmed-"));
    let (status, printed) = time_script(&unarmed, "reserve");
    assert_eq!(status, 1, "{printed}");
    assert!(
        printed.contains("\"not_armed\", not \"reserved\""),
        "{printed}"
    );
    // Nor a run during which the pool sold out: 398 seats left, 102 a run.
    for _ in 0..3 {
        let (status, printed) = time_script(&calls, "reserve");
        assert_eq!(status, 0, "{printed}");
    }
    let (status, printed) = time_script(&calls, "reserve");
    assert_eq!(status, 1, "{printed}");
    assert!(
        printed.contains("reserve after the run answered \"sold_out\""),
        "{printed}"
    );
    let _ = std::fs::remove_file(calls);
    let _ = std::fs::remove_file(unarmed);
}
