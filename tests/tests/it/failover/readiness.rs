//! One Redis Cluster primary too busy to answer, then dead until its replica is promoted, under a
//! rush through the edge: every gateway's and booking instance's `/readyz` stays 200 all along
//! (were Redis a gating check, its `PING` to every primary would take every Pod out of its
//! Services at once, and the edge would refuse everyone), and only the requests whose slot is on
//! that primary are refused, with a JSON 503; a sale whose keys live elsewhere goes on selling.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use floodgate_client::booking::BookingClient;
use floodgate_protocol::api::code;
use floodgate_tests::client::RoomClient;
use floodgate_tests::edge::Edge;
use floodgate_tests::gateways::{GatewayProcess, GatewayTimings};
use floodgate_tests::redis_cluster::PrivateCluster;
use floodgate_tests::{fresh_database, unique, SaleSpec, TestApp, TestOptions};

/// Seats in each pool: more than the rush takes, so that neither sale sells out.
const SEATS: u32 = 5_000;
/// How long a saturated primary answers nothing: past the readiness check's 0.8 s, short of the
/// cluster's node timeout (2 s: deploy/stack.sh), so that it is slow, not failed over.
const STALL: Duration = Duration::from_millis(1_500);

/// What one request of the rush got, and whether the victim was at fault while it ran.
#[derive(Debug)]
struct Outcome {
    /// `reserve` or `join`.
    kind: &'static str,
    victim: bool,
    during_fault: bool,
    /// `Ok` for a 201 or a joined ticket; else the status and code.
    answer: Result<(), (u16, String)>,
}

/// Every `/readyz` that answered anything but 200, and when.
type Unready = Arc<Mutex<Vec<String>>>;

/// Sale ids whose every key (the sale's and its pool's) is served by a primary other than
/// `victim`, with its pool: found by asking the cluster where each key's slot lives.
async fn elsewhere(cluster: &PrivateCluster, app: &TestApp, victim: u16) -> String {
    for _ in 0..64 {
        let sale = unique("bystander-");
        let keys = [
            app.keys.sale(&sale).meta(),
            app.keys.pool(&sale, "p1").config(),
        ];
        let mut apart = true;
        for key in &keys {
            apart &= cluster.primary(key).await != victim;
        }
        if apart {
            return sale;
        }
    }
    panic!("no sale id found whose keys all live away from {victim}")
}

fn spec() -> SaleSpec {
    SaleSpec {
        pools: vec![("p1".into(), SEATS)],
        opens_in: Duration::from_secs(1),
        ..SaleSpec::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_then_dead_primary_keeps_every_pod_ready_and_refuses_only_its_slot() {
    let cluster = PrivateCluster::start();
    let (_url, db) = fresh_database().await;
    let options = TestOptions {
        redis_cluster: Some(cluster.seeds.clone()),
        ..TestOptions::default()
    };
    let app = Arc::new(TestApp::spawn_with(db, options).await);
    let gateway =
        GatewayProcess::spawn_with_env(&app, "steady", &GatewayTimings::default(), &[]).await;
    let edge = Edge::start(&[app.gateway, gateway.addr], app.booking).await;

    let victim_sale = unique("victim-");
    let victim = cluster.primary(&app.keys.sale(&victim_sale).meta()).await;
    let bystander = elsewhere(&cluster, &app, victim).await;
    for sale in [&victim_sale, &bystander] {
        app.create_sale(sale, &spec()).await;
    }
    for sale in [&victim_sale, &bystander] {
        app.until_open(sale).await;
    }

    let stop = Arc::new(AtomicBool::new(false));
    let fault = Arc::new(AtomicBool::new(false));
    let outcomes = Arc::new(Mutex::new(Vec::<Outcome>::new()));
    let unready: Unready = Arc::default();
    let mut rush = Vec::new();

    // Every process's readiness, public and admin listeners, ten times a second.
    let probes = [
        format!("http://{}/readyz", app.gateway),
        format!("http://{}/readyz", app.gateway_admin),
        format!("http://{}/readyz", gateway.addr),
        format!("http://{}/readyz", gateway.admin),
        format!("http://{}/readyz", app.booking),
        format!("http://{}/readyz", app.admin),
    ];
    {
        let (stop, unready, http) = (stop.clone(), unready.clone(), app.http.clone());
        rush.push(tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                for url in &probes {
                    let status = match http.get(url).send().await {
                        Ok(answer) => answer.status().as_u16().to_string(),
                        Err(e) => e.to_string(),
                    };
                    if status != "200" {
                        unready.lock().unwrap().push(format!("{url}: {status}"));
                    }
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }));
    }

    // Reservations and joins through the edge, for both sales, paced under the edge's
    // per-address limits (one address here stands for a crowd).
    for (victim, sale) in [(true, victim_sale.clone()), (false, bystander.clone())] {
        for worker in 0..2u64 {
            let (app, sale, stop, fault, outcomes) = (
                app.clone(),
                sale.clone(),
                stop.clone(),
                fault.clone(),
                outcomes.clone(),
            );
            let booking = BookingClient::new(app.http.clone(), edge.addr);
            rush.push(tokio::spawn(async move {
                let mut ticket = worker * 1_000_000;
                while !stop.load(Ordering::SeqCst) {
                    ticket += 1;
                    let during_fault = fault.load(Ordering::SeqCst);
                    let token = app.token(&sale, ticket, 1, 120_000);
                    let key = format!("k{ticket}");
                    let answer = booking
                        .reserve(&sale, &token, &key, "p1", 1)
                        .await
                        .map(drop)
                        .map_err(|refused| (refused.status(), refused.code().to_owned()));
                    outcomes.lock().unwrap().push(Outcome {
                        kind: "reserve",
                        victim,
                        during_fault: during_fault || fault.load(Ordering::SeqCst),
                        answer,
                    });
                    tokio::time::sleep(Duration::from_millis(150)).await;
                }
            }));
        }
        let (url, stop, fault, outcomes) = (
            edge.ws_url(&sale),
            stop.clone(),
            fault.clone(),
            outcomes.clone(),
        );
        rush.push(tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                let during_fault = fault.load(Ordering::SeqCst);
                let joined = tokio::time::timeout(Duration::from_secs(10), RoomClient::join(&url));
                let answer = match joined.await {
                    Ok(Ok(_room)) => Ok(()),
                    Ok(Err(refused)) => Err((
                        refused.status,
                        refused.body["error"]
                            .as_str()
                            .unwrap_or_default()
                            .to_owned(),
                    )),
                    Err(_) => Err((0, "no ticket within 10 s".to_owned())),
                };
                outcomes.lock().unwrap().push(Outcome {
                    kind: "join",
                    victim,
                    during_fault: during_fault || fault.load(Ordering::SeqCst),
                    answer,
                });
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        }));
    }

    let settle = Duration::from_secs(2);
    tokio::time::sleep(settle).await;
    // Saturated: three spells in which the victim answers nothing, each longer than a
    // readiness check may take.
    fault.store(true, Ordering::SeqCst);
    for _ in 0..3 {
        cluster.signal(victim, "STOP");
        tokio::time::sleep(STALL).await;
        cluster.signal(victim, "CONT");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // Dead, until its replica is promoted; then back, as that replica's own replica.
    let key = app.keys.sale(&victim_sale).meta();
    cluster.kill(victim);
    let promoted = cluster.failed_over(&key, victim).await;
    assert_ne!(promoted, victim);
    cluster.restart(victim);
    fault.store(false, Ordering::SeqCst);
    tokio::time::sleep(settle).await;
    stop.store(true, Ordering::SeqCst);
    for task in rush {
        task.await.unwrap();
    }

    let unready = unready.lock().unwrap().clone();
    assert!(unready.is_empty(), "a pod left its Services: {unready:?}");
    let outcomes = std::mem::take(&mut *outcomes.lock().unwrap());
    let of = |victim: bool, during_fault: bool| {
        outcomes
            .iter()
            .filter(move |o| o.victim == victim && o.during_fault == during_fault)
    };
    // The bystander sold all along: not one of its requests refused, during the fault or not.
    let refused: Vec<_> = of(false, true)
        .chain(of(false, false))
        .filter(|o| o.answer.is_err())
        .collect();
    assert!(
        refused.is_empty(),
        "the bystander was refused: {refused:?}\nthe edge: {}",
        edge.errors()
    );
    for kind in ["join", "reserve"] {
        let asked = of(false, true).filter(|o| o.kind == kind).count();
        assert!(
            asked >= 10,
            "the bystander hardly tried a {kind} during the fault: {asked}"
        );
    }
    // The victim's slot was refused while its primary could not answer, each time with a
    // JSON 503 saying so (never a bare edge error, never a hang), and served before and after.
    let victim_refusals: Vec<_> = of(true, true).filter(|o| o.answer.is_err()).collect();
    assert!(
        !victim_refusals.is_empty(),
        "the victim's slot was never refused: was its primary at fault?"
    );
    for refusal in &victim_refusals {
        let Err((status, said)) = &refusal.answer else {
            unreachable!()
        };
        assert!(
            *status == 503
                && [code::REDIS_UNAVAILABLE, code::REPLICA_UNAVAILABLE].contains(&said.as_str()),
            "the victim's slot was refused otherwise: {refusal:?}\nthe edge: {}",
            edge.errors()
        );
    }
    assert!(
        of(true, false).any(|o| o.answer.is_ok()),
        "the victim never sold"
    );
}
