//! The benchmarks' own tools, on a small scale: `floodgate-booking scripts bench` and
//! `deploy/bench-scripts.sh` time the scripts a reservation runs exactly as the booking service
//! sends them, and refuse to time anything else (a script that errs, or a refusal's cheaper
//! path, which is what the raw benchmark timed for days before these existed).

use std::path::Path;
use std::process::Command;

use floodgate_tests::{
    fresh_database, redis_addr, run_to_end, test_cluster, unique, SaleSpec, TestApp, TestOptions,
};

/// `deploy/bench-scripts.sh <calls> <script> 100 5` against the test Redis: exit status and
/// what it printed.
fn time_script(calls: &Path, script: &str) -> (i32, String) {
    time_script_on(calls, script, redis_addr().port(), false)
}

/// The same against the Redis at `port`, a seed of a cluster if `cluster`.
fn time_script_on(calls: &Path, script: &str, port: u16, cluster: bool) -> (i32, String) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut command = Command::new(root.join("deploy/bench-scripts.sh"));
    command
        .arg(calls)
        .args([script, "100", "5"])
        .env("BENCH_REDIS_PORT", port.to_string());
    if cluster {
        command.env("BENCH_REDIS_CLUSTER", "1");
    }
    run_to_end(&mut command)
}

/// The calls of `scripts bench` for `pool` of `sale`, in a file.
fn bench_calls(app: &TestApp, url: &str, sale: &str, pool: &str) -> std::path::PathBuf {
    let (status, printed) =
        app.booking_command(url, &["scripts", "bench", "--sale", sale, "--pool", pool]);
    assert_eq!(status, 0, "{printed}");
    let path = std::env::temp_dir().join(format!("{}.json", unique("calls-")));
    std::fs::write(&path, &printed).unwrap();
    path
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
    let calls = bench_calls(&app, &url, &sale, "p1");

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
    let unarmed = bench_calls(&app, &url, &unique("unarmed-"), "p1");
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

/// On a Redis Cluster each script is timed on the primary that serves its keys (the claim on the
/// sale's slot, the reserve and ack on the pool's), which a seed node would answer with MOVED.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster_each_script_is_timed_on_the_primary_that_serves_it() {
    let (url, db) = fresh_database().await;
    let seeds = test_cluster();
    let options = TestOptions {
        redis_cluster: Some(seeds.clone()),
        ..TestOptions::default()
    };
    let app = TestApp::spawn_with(db, options).await;
    let spec = SaleSpec {
        pools: vec![("p1".into(), 500)],
        ..SaleSpec::default()
    };
    let sale = app.open_sale("bench-cluster-", spec).await;
    let calls = bench_calls(&app, &url, &sale, "p1");
    let seed_port: u16 = seeds[0].rsplit(':').next().unwrap().parse().unwrap();

    let mut ran_on = Vec::new();
    for script in ["claim_token", "reserve", "ack"] {
        let (status, printed) = time_script_on(&calls, script, seed_port, true);
        assert_eq!(status, 0, "{script}: {printed}");
        let words: Vec<&str> = printed.split_whitespace().collect();
        assert_eq!(words.len(), 2, "a rate and a port: {printed}");
        let rate: f64 = words[0].parse().expect(&printed);
        assert!(rate > 0.0, "{script}: {printed}");
        ran_on.push(words[1].parse::<u16>().expect(&printed));
    }
    // Each port is a primary that holds the script's keys: asked without following redirects, it
    // answers for the key itself.
    let holds = |port: u16, key: String| async move {
        let mut node = redis::Client::open(format!("redis://127.0.0.1:{port}"))
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        let exists: redis::RedisResult<bool> =
            redis::cmd("EXISTS").arg(&key).query_async(&mut node).await;
        exists
    };
    assert_eq!(
        holds(ran_on[0], app.keys.sale(&sale).meta()).await,
        Ok(true)
    );
    let pool = app.keys.pool(&sale, "p1");
    assert_eq!(holds(ran_on[1], pool.config()).await, Ok(true));
    assert_eq!(
        ran_on[1], ran_on[2],
        "reserve and ack share the pool's slot"
    );
    // The reserve runs took seats on the cluster: 100 timed, one checked before and one after.
    assert_eq!(app.redis_int(&pool.available()).await, 500 - 102);
    let _ = std::fs::remove_file(calls);
}
