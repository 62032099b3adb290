//! The autopilot's loop against the real services, under a pool Redis made slow by the chaos
//! proxy (single Redis: a cluster's redirects would go around a proxy). The crowd is real: people
//! join the waiting room over WebSocket, are admitted at the sale's rate, think for a second and
//! then reserve, so a change of rate reaches the backend only seconds later (the delay that makes
//! such controllers oscillate).
//!
//! One sale, four phases: calm at the ceiling; a slow pool (every reply of the booking service's
//! Redis 150 ms late, far below its timeout) cuts the rate within a bounded number of steps, down
//! to the floor and never below, with no reservation failing; the pool well again, the rate climbs
//! back to the ceiling; and a pool slow and well by turns, each spell longer than the health
//! window, never swings the rate back up to the ceiling.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use floodgate_protocol::ws::ServerMessage;
use floodgate_tests::chaos::ChaosProxy;
use floodgate_tests::client::{Heard, RoomClient};
use floodgate_tests::{eventually, redis_addr, SaleSpec, TestApp, TestOptions};
use reqwest::Method;
use serde_json::{json, Value};
use tokio::time::Instant;

const FLOOR: f64 = 4.0;
const CEILING: f64 = 16.0;
/// How long each person thinks between admission and reserving.
const THINK: Duration = Duration::from_secs(1);
/// The latency the slow pool adds to each reply: 3x the script target set below. The pool's
/// times are measured on the Redis every test shares: beside other tests (a browser's, say) the
/// calm pool's p99 was seen at 100 to 145 ms, so this test runs alone (.config/nextest.toml).
const SLOW: Duration = Duration::from_millis(150);

/// What the crowd saw: every reservation's outcome (`Ok` or the refusal's code).
#[derive(Default)]
struct Outcomes {
    booked: u64,
    failed: Vec<String>,
}

#[sqlx::test(migrations = "../migrations")]
async fn a_slow_pool_cuts_the_rate_to_the_floor_and_its_recovery_restores_it(db: sqlx::PgPool) {
    let proxy = ChaosProxy::start(redis_addr()).await;
    let app = TestApp::spawn_with(db, TestOptions::booking_redis_at(proxy.addr)).await;
    let spec = SaleSpec {
        pools: vec![("p1".into(), 20_000)],
        admission_rate: CEILING,
        ..SaleSpec::default()
    };
    let sale = app.open_sale("pilot-slow-", spec).await;
    let path = format!("/admin/v1/sales/{sale}");
    super::turn_on(
        &app,
        &sale,
        json!({
            "enabled": true, "floor": FLOOR, "ceiling": CEILING, "settle_secs": 1,
            // Loopback answers in well under these; the slow pool is far past them.
            "targets": {"script_p99_ms": 50.0, "reservation_p99_ms": 2_000.0},
        }),
    )
    .await;

    let outcomes = Arc::new(Mutex::new(Outcomes::default()));
    let crowd = tokio::spawn(crowd(
        app.ws_url(&sale),
        app.booking_client(),
        sale.clone(),
        outcomes.clone(),
    ));
    let app = Arc::new(app);
    let figures = {
        let (app, path) = (app.clone(), path.clone());
        move || {
            let (app, path) = (app.clone(), path.clone());
            async move { app.ops(Method::GET, &path, &app.ops_token, None).await.1 }
        }
    };
    let decision = |f: &Value| f["autopilot"]["last_step"]["decision"].clone();

    // 1. Calm: the leader judges fresh health from every service and holds at the ceiling.
    eventually("calm at the ceiling", Duration::from_secs(30), || async {
        let f = figures().await;
        let d = decision(&f);
        d["action"] == "held" && d["why"] == "at_ceiling" && f["admission_rate"] == CEILING
    })
    .await;
    let booked_calm = outcomes.lock().unwrap().booked;
    assert!(booked_calm > 0, "people book while it is calm");

    // 2. The pool slows: a cut within a bounded number of steps (the slow replies reach the
    // health window within a second or two, the summary is written every second, the leader
    // steps every second), then down to the floor and never below it.
    proxy.delay(SLOW);
    let slowed = Instant::now();
    let mut seen = Vec::new();
    let cut = watch_until(&figures, &mut seen, Duration::from_secs(20), |f| {
        decision(f)["action"] == "cut"
    })
    .await;
    assert!(cut, "no cut within 20 s of the slow pool: {seen:?}");
    let first_cut = decision(seen.last().unwrap());
    // The slow Redis shows first in the times measured on it (the pool scripts', or the whole
    // reservation's, which waits for several of its replies).
    assert!(
        ["script_latency", "reservation_latency"].contains(&first_cut["signal"].as_str().unwrap()),
        "{first_cut}"
    );
    assert!(first_cut["pressure"].as_f64().unwrap() > 1.0);
    let at_floor = watch_until(&figures, &mut seen, Duration::from_secs(30), |f| {
        f["admission_rate"] == FLOOR
    })
    .await;
    assert!(
        at_floor,
        "the rate never reached the floor: {:?}",
        rates(&seen)
    );
    eprintln!(
        "cut to the floor {:?} after the pool slowed",
        slowed.elapsed()
    );
    assert!(
        rates(&seen).iter().all(|r| *r >= FLOOR),
        "{:?}",
        rates(&seen)
    );
    let booked_slow = outcomes.lock().unwrap().booked;
    assert!(
        booked_slow > booked_calm,
        "people still book on a slow pool"
    );

    // 3. The pool is well again: the rate climbs back to the ceiling by probes.
    proxy.delay(Duration::ZERO);
    let mut climb = Vec::new();
    let back = watch_until(&figures, &mut climb, Duration::from_secs(90), |f| {
        f["admission_rate"] == CEILING
    })
    .await;
    let cuts: Vec<_> = climb
        .iter()
        .map(decision)
        .filter(|d| d["action"] == "cut")
        .collect();
    assert!(
        back,
        "the rate never climbed back: {:?}; cut by {cuts:?}",
        rates(&climb)
    );
    let climbed = rates(&climb);
    assert!(
        climbed.windows(2).filter(|w| w[1] > w[0]).count() >= 3,
        "a climb by probes, not a jump: {climbed:?}"
    );

    // 4. A flapping pool, slow for 10 s, well for 10 s, twice (each longer than the health
    // window, so the backend really is strained, then calm): the rate is cut each time, and
    // in each calm spell it climbs only by probes, a quarter of one near the rate that strained
    // it, so it never swings back up to the ceiling.
    let mut flapping = Vec::new();
    for _ in 0..2 {
        proxy.delay(SLOW);
        watch_until(&figures, &mut flapping, Duration::from_secs(10), |_| false).await;
        proxy.delay(Duration::ZERO);
        watch_until(&figures, &mut flapping, Duration::from_secs(10), |_| false).await;
    }
    let flapped = rates(&flapping);
    assert!(
        flapped.iter().all(|r| *r >= FLOOR && *r <= CEILING),
        "{flapped:?}"
    );
    let cuts = flapping
        .iter()
        .filter(|f| decision(f)["action"] == "cut")
        .count();
    assert!(cuts >= 1, "a flapping pool is cut: {flapped:?}");
    let high = flapped[flapped.len() / 4..]
        .iter()
        .copied()
        .fold(0.0, f64::max);
    assert!(
        high <= FLOOR + (CEILING - FLOOR) / 2.0,
        "a flapping pool swung the rate up to {high}: {flapped:?}"
    );

    crowd.abort();
    let (booked, failed) = {
        let outcomes = outcomes.lock().unwrap();
        (outcomes.booked, outcomes.failed.clone())
    };
    assert!(
        failed.is_empty(),
        "{} reservations failed: {failed:?}",
        failed.len()
    );
    eprintln!("{booked} booked, none failed");

    // The moves of a fifth or more are in the audit trail, far fewer than the steps taken.
    let (_, rows) = app
        .ops(Method::GET, &format!("{path}/audit"), &app.ops_token, None)
        .await;
    let audited = rows
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["action"] == "autopilot")
        .count();
    let changes = [&seen, &climb, &flapping]
        .iter()
        .map(|s| rates(s).windows(2).filter(|w| w[0] != w[1]).count())
        .sum::<usize>();
    assert!(audited >= 2, "the cut and the climb are audited: {rows}");
    assert!(audited < changes, "{audited} rows for {changes} changes");
}

/// People joining at 25 a second (more than the ceiling admits, so a line forms), each admitted,
/// thinking, then reserving one seat, and leaving.
async fn crowd(
    url: String,
    booking: floodgate_client::booking::BookingClient,
    sale: String,
    outcomes: Arc<Mutex<Outcomes>>,
) {
    let mut every = tokio::time::interval(Duration::from_millis(40));
    for n in 0u64.. {
        every.tick().await;
        let (url, booking, sale, outcomes) =
            (url.clone(), booking.clone(), sale.clone(), outcomes.clone());
        tokio::spawn(async move {
            let mut person = RoomClient::join(&url).await.expect("joins");
            // Still waiting when the test ends (the services stop): nothing to record.
            let Heard::Message(ServerMessage::Admitted { token, .. }) =
                person.outcome(Duration::from_secs(300)).await
            else {
                return;
            };
            tokio::time::sleep(THINK).await;
            let answer = booking
                .reserve(&sale, &token, &format!("k{n}"), "p1", 1)
                .await;
            {
                let mut outcomes = outcomes.lock().unwrap();
                match answer {
                    Ok(_) => outcomes.booked += 1,
                    Err(e) => outcomes.failed.push(format!("{e:?}")),
                }
            }
            person.leave().await;
        });
    }
}

/// Reads the figures every 250 ms into `seen` until `done` holds (true) or `within` passes
/// (false).
async fn watch_until<F, Fut>(
    figures: &F,
    seen: &mut Vec<Value>,
    within: Duration,
    done: impl Fn(&Value) -> bool,
) -> bool
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Value>,
{
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        let f = figures().await;
        let finished = done(&f);
        seen.push(f);
        if finished {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    false
}

fn rates(seen: &[Value]) -> Vec<f64> {
    seen.iter()
        .filter_map(|f| f["admission_rate"].as_f64())
        .collect()
}
