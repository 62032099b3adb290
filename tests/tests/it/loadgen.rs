//! The load generator's scenarios against the real services, on a small scale: `sale` (the
//! whole rush, whose invariant checks must pass, and fail with exit status 2 once the seat
//! counters are corrupted), `queue` (the fan-out of one frontier change), `burst` and `idle`.

use std::time::Duration;

use floodgate_tests::eventually;
use floodgate_tests::{fresh_database, loadgen as scenario, redis_url, unique, SaleSpec, TestApp};

/// The `sale` scenario against `app` with `clients` people.
fn sale_scenario(
    app: &TestApp,
    database_url: &str,
    sale: &str,
    clients: u64,
) -> (i32, String, serde_json::Value) {
    sale_scenario_on(app, &app.gateway.to_string(), database_url, sale, clients)
}

/// The `sale` scenario with its people spread over `gateways` (comma-separated).
fn sale_scenario_on(
    app: &TestApp,
    gateways: &str,
    database_url: &str,
    sale: &str,
    clients: u64,
) -> (i32, String, serde_json::Value) {
    sale_scenario_with(app, gateways, database_url, sale, clients, &[])
}

/// The `sale` scenario with `extra` arguments.
fn sale_scenario_with(
    app: &TestApp,
    gateways: &str,
    database_url: &str,
    sale: &str,
    clients: u64,
    extra: &[&str],
) -> (i32, String, serde_json::Value) {
    let (clients, gateway) = (clients.to_string(), gateways.to_owned());
    let (booking, sandbox) = (app.booking.to_string(), app.sandbox.to_string());
    let redis = redis_url();
    let mut args = vec![
        "sale",
        "--sale",
        sale,
        "--clients",
        &clients,
        "--gateways",
        &gateway,
        "--booking",
        &booking,
        "--sandbox",
        &sandbox,
        "--pay-ratio",
        "0.6",
        "--seats",
        "2",
        "--timeout-secs",
        "120",
        "--database-url",
        database_url,
        "--redis-url",
        &redis,
        "--redis-prefix",
        app.keys.prefix(),
    ];
    args.extend_from_slice(extra);
    scenario(&args)
}

/// [`scenario`] off the test's runtime, which the services it drives run on.
async fn run(args: &[&str]) -> (i32, String, serde_json::Value) {
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        scenario(&args)
    })
    .await
    .unwrap()
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

    let (status, stdout, report) = sale_scenario(&app, &url, &sale, 300);
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
    let (status, stdout, report) = sale_scenario(&app, &url, &sale, 0);
    assert_eq!(status, 2, "{stdout}");
    assert_eq!(report["checks"][0]["ok"], false, "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sale_scenario_signs_its_people_in_and_passes_the_bot_check() {
    use floodgate_protocol::settings::{ChallengeRule, Door, IdentityRule};
    let (url, db) = fresh_database().await;
    let app = TestApp::spawn(db.clone()).await;
    let sale = unique("buyers-rush-");
    let spec = SaleSpec {
        pools: vec![("p1".into(), 10)],
        opens_in: Duration::from_millis(1500),
        admission_rate: 200.0,
        max_seats: 2,
        hold_ttl_secs: 2,
        token_ttl_secs: 10,
        door: Door {
            identity: IdentityRule::Required,
            challenge: ChallengeRule::Pow,
            pow_difficulty: 6,
            max_seats_per_buyer: Some(2),
            ..Door::default()
        },
        ..SaleSpec::default()
    };
    app.create_sale(&sale, &spec).await;

    // Not signed in: nobody gets past the door.
    let (_, stdout, report) = sale_scenario(&app, &url, &sale, 5);
    assert_eq!(report["outcomes"]["failed"], 5, "{stdout}");

    let signin = app.sandbox.to_string();
    let gateway = app.gateway.to_string();
    let signed_in = ["--signin", signin.as_str()];
    let (status, stdout, report) = sale_scenario_with(&app, &gateway, &url, &sale, 60, &signed_in);
    assert_eq!(status, 0, "{stdout}");
    assert_eq!(report["outcomes"]["failed"], 0, "{report}");
    assert!(report["outcomes"]["paid"].as_u64().unwrap() > 0, "{report}");
    // Every booking names its buyer, and no buyer has more than one (one place each).
    let (rows, buyers, named): (i64, i64, i64) = sqlx::query_as(
        "select count(*), count(distinct buyer), count(buyer) from bookings where sale_id = $1",
    )
    .bind(&sale)
    .fetch_one(&db)
    .await
    .unwrap();
    assert!(rows > 0);
    assert_eq!((named, buyers), (rows, rows), "{report}");
}

/// Issue 12, defect 25: a person whose gateway dies resumes on another with its resume token,
/// as the protocol tells clients (and the page does), instead of counting as failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn defect_25_people_whose_gateway_dies_resume_on_another() {
    use floodgate_tests::gateways::{GatewayProcess, GatewayTimings};
    const PEOPLE: u64 = 40;
    let (url, db) = fresh_database().await;
    let app = TestApp::spawn(db).await;
    let sale = unique("rush-");
    let spec = SaleSpec {
        pools: vec![("p1".into(), 10)],
        opens_in: Duration::from_millis(500),
        admission_rate: 200.0,
        hold_ttl_secs: 2,
        token_ttl_secs: 10,
        ..SaleSpec::default()
    };
    app.create_sale(&sale, &spec).await;
    // Everyone waits until the test lets them in.
    app.admission(&sale, "pause").await;
    let timings = GatewayTimings::default();
    let mut doomed = GatewayProcess::spawn(&app, "gw-doomed", &timings).await;
    let survivor = GatewayProcess::spawn(&app, "gw-survivor", &timings).await;
    let gateways = format!("{},{}", doomed.addr, survivor.addr);

    let rush = {
        let (app_url, sale) = (url.clone(), sale.clone());
        let args = (app.keys.prefix().to_owned(), app.booking, app.sandbox);
        tokio::task::spawn_blocking(move || {
            let (prefix, booking, sandbox) = args;
            scenario(&[
                "sale",
                "--sale",
                &sale,
                "--clients",
                &PEOPLE.to_string(),
                "--gateways",
                &gateways,
                "--booking",
                &booking.to_string(),
                "--sandbox",
                &sandbox.to_string(),
                "--pay-ratio",
                "0.5",
                "--seats",
                "1",
                "--timeout-secs",
                "120",
                "--database-url",
                &app_url,
                "--redis-url",
                &redis_url(),
                "--redis-prefix",
                &prefix,
            ])
        })
    };
    // Once everyone is in line, half of them lose their gateway at once.
    let path = format!("/admin/v1/sales/{sale}");
    eventually("everyone is waiting", Duration::from_secs(60), || async {
        let (_, figures) = app
            .ops(reqwest::Method::GET, &path, &app.ops_token, None)
            .await;
        figures["live"] == PEOPLE
    })
    .await;
    doomed.kill();
    app.admission(&sale, "resume").await;

    let (status, stdout, report) = rush.await.unwrap();
    assert_eq!(report["outcomes"]["failed"], 0, "{stdout}");
    assert_eq!(status, 0, "{stdout}");
}

/// Issue 12, defect 25: the checks compare PostgreSQL with Redis only once the consumer has
/// applied everything, other buyers' events included, not as soon as the run's own bookings
/// are in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn defect_25_the_sale_checks_wait_for_the_consumer_to_apply_everything() {
    let (url, db) = fresh_database().await;
    let app = TestApp::spawn_with(
        db,
        floodgate_tests::TestOptions {
            consumer: false,
            ..floodgate_tests::TestOptions::default()
        },
    )
    .await;
    let sale = unique("rush-");
    let spec = SaleSpec {
        pools: vec![("p1".into(), 10)],
        opens_in: Duration::from_millis(100),
        ..SaleSpec::default()
    };
    app.create_sale(&sale, &spec).await;
    // Someone else bought a seat; the consumer has not written it yet.
    let token = app.token(&sale, 1, 1, 60_000);
    let held = app
        .reserve(&sale, &token, "elsewhere", "p1", 1)
        .await
        .expect("201");
    app.pay(&sale, &held.reservation_id, &held.secret, "succeed")
        .await;
    let sold = app.keys.pool(&sale, "p1").sold();
    eventually("the seat is sold", Duration::from_secs(20), || async {
        app.redis_int(&sold).await == 1
    })
    .await;

    // The run finds Redis ahead of PostgreSQL; the consumer starts as it does and catches up.
    let rush = {
        let (url, sale) = (url.clone(), sale.clone());
        let args = (
            app.gateway,
            app.keys.prefix().to_owned(),
            app.booking,
            app.sandbox,
        );
        tokio::task::spawn_blocking(move || {
            let (gateway, prefix, booking, sandbox) = args;
            scenario(&[
                "sale",
                "--sale",
                &sale,
                "--clients",
                "0",
                "--gateways",
                &gateway.to_string(),
                "--booking",
                &booking.to_string(),
                "--sandbox",
                &sandbox.to_string(),
                "--timeout-secs",
                "60",
                "--database-url",
                &url,
                "--redis-url",
                &redis_url(),
                "--redis-prefix",
                &prefix,
            ])
        })
    };
    app.start_consumer();
    let (status, stdout, report) = rush.await.unwrap();
    assert_eq!(status, 0, "a consistent sale passes its checks: {stdout}");
    assert_eq!(report["checks"][1]["ok"], true, "{report}");
}

#[sqlx::test(migrations = "../migrations")]
async fn the_queue_scenario_times_one_frontier_change_reaching_every_client(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let sale = unique("queue-");
    let spec = SaleSpec {
        opens_in: Duration::from_millis(300),
        ..SaleSpec::default()
    };
    app.create_sale(&sale, &spec).await;
    // Open and paused: nothing moves until the loadgen resumes admission.
    app.admission(&sale, "pause").await;
    app.until_open(&sale).await;

    let (gateway, admin, pid) = (
        app.gateway.to_string(),
        app.admin.to_string(),
        std::process::id().to_string(),
    );
    let (status, _, report) = run(&[
        "queue",
        "--gateways",
        &gateway,
        "--sale",
        &sale,
        "--clients",
        "200",
        "--from",
        "127.0.0.2,127.0.0.3",
        "--ops",
        &admin,
        "--ops-token",
        &app.ops_token,
        "--gateway-pids",
        &pid,
    ])
    .await;
    assert_eq!(status, 0, "{report}");
    assert_eq!(report["open"], 200, "{report}");
    assert_eq!(report["placed"], 200, "{report}");
    // Every client heard the change (a place nearer, or its admission).
    assert_eq!(report["fan_out"]["reached"], 200, "{report}");
    assert_eq!(report["fan_out"]["ms"]["n"], 200, "{report}");
    assert!(
        report["gateway_bytes_per_connection"].is_number(),
        "{report}"
    );
    let path = format!("/admin/v1/sales/{sale}");
    let (_, figures) = app
        .ops(reqwest::Method::GET, &path, &app.ops_token, None)
        .await;
    assert_eq!(figures["paused"], false, "the loadgen resumed admission");
}

#[sqlx::test(migrations = "../migrations")]
async fn the_burst_scenario_tickets_every_join_within_its_window(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let sale = unique("burst-");
    app.create_sale(&sale, &SaleSpec::default()).await;
    let gateway = app.gateway.to_string();
    let (status, _, report) = run(&[
        "burst",
        "--gateways",
        &gateway,
        "--sale",
        &sale,
        "--clients",
        "300",
        "--within-ms",
        "500",
    ])
    .await;
    assert_eq!(status, 0, "{report}");
    assert_eq!(report["ticketed"], 300, "{report}");
    assert_eq!(report["join_to_ticket_ms"]["n"], 300, "{report}");
    // The gateway agrees: 300 tickets were handed out.
    tickets_issued_become(&app, &sale, 300).await;
}

#[sqlx::test(migrations = "../migrations")]
async fn the_reserve_scenario_makes_every_reservation_through_the_booking_api(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let sale = unique("reserve-");
    let spec = SaleSpec {
        pools: vec![("p1".into(), 500)],
        opens_in: Duration::from_millis(300),
        ..SaleSpec::default()
    };
    app.create_sale(&sale, &spec).await;
    app.until_open(&sale).await;
    // The key as `--flag=value`: base64url may begin with `-`, which a parser would take for
    // a flag of its own (one run in 64).
    let (booking, kid, seed) = (
        app.booking.to_string(),
        app.signer.kid().to_owned(),
        format!("--token-signing-key={}", app.signer.seed_base64()),
    );
    let (status, _, report) = run(&[
        "reserve",
        "--booking",
        &booking,
        "--sale",
        &sale,
        "--pool",
        "p1",
        "--requests",
        "200",
        "--concurrency",
        "16",
        "--token-key-id",
        &kid,
        &seed,
    ])
    .await;
    assert_eq!(status, 0, "{report}");
    assert_eq!(
        report["statuses"],
        serde_json::json!({"201": 200}),
        "{report}"
    );
    assert!(report["reservations_per_second"].as_f64().unwrap() > 0.0);
    // The pool agrees: 200 seats are held.
    assert_eq!(app.redis_int(&app.keys.pool(&sale, "p1").held()).await, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_naive_counter_reports_its_sales_and_oversell() {
    let server = std::env::var("DATABASE_URL").expect("DATABASE_URL");
    let naive = |mode: &'static str| {
        let server = server.clone();
        async move {
            run(&[
                "naive",
                "--database-url",
                &server,
                "--mode",
                mode,
                "--capacity",
                "50",
                "--attempts",
                "400",
                "--concurrency",
                "10",
            ])
            .await
        }
    };
    let (status, _, locked) = naive("for-update").await;
    assert_eq!(status, 0, "{locked}");
    // The row lock serialises the bookings: exactly the capacity is sold.
    assert_eq!(locked["booked"], 50, "{locked}");
    assert_eq!(locked["oversold"], 0, "{locked}");
    let (status, _, race) = naive("race").await;
    assert_eq!(status, 0, "{race}");
    // Whatever the interleaving, the report's oversell is what was booked past the capacity.
    let booked = race["booked"].as_i64().unwrap();
    assert!(booked >= 50, "{race}");
    assert_eq!(race["oversold"].as_i64().unwrap(), booked - 50, "{race}");
}

#[sqlx::test(migrations = "../migrations")]
async fn the_poll_scenario_asks_for_the_status_at_its_interval(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let sale = unique("poll-");
    app.create_sale(&sale, &SaleSpec::default()).await;
    let gateway = app.gateway.to_string();
    let (status, _, report) = run(&[
        "poll",
        "--gateways",
        &gateway,
        "--sale",
        &sale,
        "--clients",
        "50",
        "--from",
        "127.0.0.2,127.0.0.3",
        "--interval-secs",
        "1",
        "--secs",
        "3",
    ])
    .await;
    assert_eq!(status, 0, "{report}");
    assert_eq!(report["failed"], 0, "{report}");
    // Each of the 50 asks about once a second for three seconds.
    let requests = report["requests"].as_u64().unwrap();
    assert!((100..=200).contains(&requests), "{report}");
}

#[sqlx::test(migrations = "../migrations")]
async fn the_idle_scenario_holds_its_people_in_line_and_weighs_them(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let sale = unique("idle-");
    // Before the opening: every session sits in the pre-queue, as in deploy/bench-idle.sh.
    let spec = SaleSpec {
        opens_in: Duration::from_secs(3600),
        ..SaleSpec::default()
    };
    app.create_sale(&sale, &spec).await;
    let gateway = app.gateway.to_string();
    let (status, stdout, report) = run(&[
        "idle",
        "--gateway",
        &gateway,
        "--sale",
        &sale,
        "--connections",
        "40",
        "--from",
        "127.0.0.2,127.0.0.3",
        "--hold-secs",
        "0",
    ])
    .await;
    assert_eq!(status, 0, "{stdout}");
    assert_eq!(
        (&report["open"], &report["failed"]),
        (&40.into(), &0.into())
    );
    assert_eq!(report["reconnects"], 0, "{report}");
    // The process weighed its own sessions (BENCHMARKS.md sizes a load test by it).
    let bytes = report["loadgen_bytes_per_session"].as_f64();
    assert!(bytes.is_some_and(|b| b >= 0.0), "{report}");
    assert!(stdout.contains("loadgen memory per session"), "{stdout}");
    // The gateway agrees: each session took a ticket of its own.
    tickets_issued_become(&app, &sale, 40).await;
}

/// Waits until the gateway's public figures count `n` tickets of `sale` (they follow its
/// room's view, read every tick).
async fn tickets_issued_become(app: &TestApp, sale: &str, n: u64) {
    let summary = format!("http://{}/v1/sales/{sale}", app.gateway);
    let what = format!("the summary counts {n} tickets");
    eventually(&what, Duration::from_secs(10), || async {
        app.get_json(&summary).await["tickets_issued"] == n
    })
    .await;
}
