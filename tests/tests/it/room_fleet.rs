//! One waiting room served by several gateway processes (the real binary): consistent
//! positions, the fleet-wide rate, leader failover with fencing, and draining.

use std::time::Duration;

use floodgate_gateway::scripts::leader::Advanced;
use floodgate_protocol::ws::close;
use floodgate_tests::client::{Heard, RoomClient};
use floodgate_tests::eventually;
use floodgate_tests::gateways::{GatewayProcess, GatewayTimings};
use floodgate_tests::{fresh_db, unique, SaleSpec, TestApp};

const WAIT: Duration = Duration::from_secs(30);

/// A sale that opens in `opens_in`, paused, with plenty of stock.
async fn paused_sale(app: &TestApp, rate: f64, opens_in: Duration) -> String {
    let sale = unique("fleet-");
    let spec = SaleSpec {
        pools: vec![("p1".into(), 1_000)],
        opens_in,
        admission_rate: rate,
        ..SaleSpec::default()
    };
    app.create_sale(&sale, &spec).await;
    app.admission(&sale, "pause").await;
    sale
}

/// When each admission happened, by Redis' clock: every token of a batch expires at the batch's
/// time plus the token lifetime.
fn admitted_at(app: &TestApp, tokens: &[String], ttl_ms: i64) -> Vec<i64> {
    let verifier = app.signer.verifier();
    let mut times: Vec<i64> = tokens
        .iter()
        .map(|t| {
            verifier
                .verify(t, floodgate_protocol::now_millis())
                .unwrap()
                .exp_ms
                - ttl_ms
        })
        .collect();
    times.sort_unstable();
    times
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_gateways_show_consistent_positions_and_admit_within_the_rate_together() {
    const CLIENTS: usize = 60;
    const RATE: f64 = 20.0;
    let app = TestApp::spawn(fresh_db().await).await;
    let timings = GatewayTimings::default();
    let gateways = [
        GatewayProcess::spawn(&app, "g1", &timings).await,
        GatewayProcess::spawn(&app, "g2", &timings).await,
    ];
    let sale = paused_sale(&app, RATE, Duration::from_secs(2)).await;
    let mut clients = Vec::new();
    for i in 0..CLIENTS {
        let gateway = &gateways[i % 2];
        clients.push((
            i % 2,
            RoomClient::join(&gateway.ws_url(&sale)).await.unwrap(),
        ));
    }
    // Opened and paused: each client, on either gateway, is told exactly its drawn place.
    for (_, c) in clients.iter_mut() {
        c.position(WAIT).await;
    }
    let order = app.drawn_order(gateways[0].addr, &sale).await;
    for (g, c) in &clients {
        assert_eq!(
            c.positions[0],
            order.place(c.ticket),
            "gateway g{} told ticket {} a position that is not its place",
            g + 1,
            c.ticket
        );
    }

    app.admission(&sale, "resume").await;
    let admitted = futures::future::join_all(clients.into_iter().map(|(g, mut c)| async move {
        let token = c.admitted(WAIT).await;
        assert!(c.positions_never_rose(), "{:?}", c.positions);
        (g, token)
    }))
    .await;
    assert!(admitted.iter().any(|(g, _)| *g == 0) && admitted.iter().any(|(g, _)| *g == 1));

    // Over any window, both gateways together admitted at most rate x window + burst (one
    // tick's worth), plus one for the moment between the limiter and Redis.
    let tokens: Vec<String> = admitted.into_iter().map(|(_, t)| t).collect();
    let times = admitted_at(&app, &tokens, 120_000);
    let burst = (RATE * timings.tick_ms as f64 / 1000.0).ceil();
    for window_ms in [250i64, 500, 1_000, 2_000] {
        let allowed = RATE * window_ms as f64 / 1000.0 + burst + 1.0;
        for (i, start) in times.iter().enumerate() {
            let within = times[i..]
                .iter()
                .take_while(|t| **t <= start + window_ms)
                .count();
            assert!(
                within as f64 <= allowed,
                "{within} admissions within {window_ms} ms (allowed {allowed}): {times:?}"
            );
        }
    }
    let span = (times[CLIENTS - 1] - times[0]) as f64 / 1000.0;
    assert!(
        span >= (CLIENTS as f64 - burst) / RATE - 0.2,
        "{CLIENTS} admitted in {span} s"
    );
}

/// Which of `gateways` holds the sale's lease now.
async fn leader(app: &TestApp, sale: &str) -> String {
    let holder: Option<String> = redis::cmd("GET")
        .arg(app.keys.sale(sale).leader())
        .query_async(&mut app.redis.clone())
        .await
        .unwrap();
    holder.unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_leader_hands_over_admission_and_its_clients_keep_their_places() {
    const CLIENTS: usize = 30;
    let app = TestApp::spawn(fresh_db().await).await;
    let timings = GatewayTimings::default();
    let mut gateways = [
        GatewayProcess::spawn(&app, "g1", &timings).await,
        GatewayProcess::spawn(&app, "g2", &timings).await,
    ];
    let sale = unique("failover-");
    let spec = SaleSpec {
        pools: vec![("p1".into(), 1_000)],
        opens_in: Duration::from_secs(2),
        admission_rate: 8.0,
        ..SaleSpec::default()
    };
    app.create_sale(&sale, &spec).await;
    let mut clients = Vec::new();
    for i in 0..CLIENTS {
        clients.push((
            i % 2,
            RoomClient::join(&gateways[i % 2].ws_url(&sale))
                .await
                .unwrap(),
        ));
    }
    // Admission runs for a while, then the leader dies without a word.
    let frontier = app.keys.sale(&sale).frontier();
    eventually("some admissions", WAIT, || async {
        app.redis_int(&frontier).await >= 6
    })
    .await;
    let holder = leader(&app, &sale).await;
    let dead = gateways
        .iter()
        .position(|g| holder.starts_with(&format!("{}.", g.name)))
        .unwrap_or_else(|| panic!("the leader {holder} is one of the gateways"));
    gateways[dead].kill();
    let survivor = &gateways[1 - dead];
    let survivor_url = survivor.ws_url(&sale);
    let survivor_url = &survivor_url;

    // Everyone ends admitted: the dead gateway's clients reconnect to the survivor with their
    // resume tokens and keep their tickets and places.
    let tokens = futures::future::join_all(clients.into_iter().map(|(g, mut c)| async move {
        match c.outcome(WAIT).await {
            Heard::Message(floodgate_protocol::ws::ServerMessage::Admitted { token, .. }) => token,
            Heard::Dropped | Heard::Closed(..) if g == dead => {
                let before = c.positions.last().copied();
                let mut back = RoomClient::resume(survivor_url, &c.resume_token, &[])
                    .await
                    .expect("resumes elsewhere");
                assert!(back.resumed);
                assert_eq!(back.ticket, c.ticket, "the same ticket");
                let token = back.admitted(WAIT).await;
                if let (Some(before), Some(after)) = (before, back.positions.first()) {
                    assert!(after <= &before, "place lost: {before} then {after}");
                }
                token
            }
            other => panic!("gateway g{} client ended with {other:?}", g + 1),
        }
    }))
    .await;
    let tickets: std::collections::BTreeSet<u64> = tokens
        .iter()
        .map(|t| {
            app.signer
                .verifier()
                .verify(t, floodgate_protocol::now_millis())
                .unwrap()
                .ticket
        })
        .collect();
    assert_eq!(tickets.len(), CLIENTS, "every ticket admitted once");

    // The survivor took over within the lease (plus a tick or two): no gap in admissions
    // longer than that, and the lease changed hands with a new epoch.
    let times = admitted_at(&app, &tokens, 120_000);
    let longest_gap = times.windows(2).map(|w| w[1] - w[0]).max().unwrap();
    assert!(
        longest_gap <= timings.lease_ms as i64 + 1_000,
        "admission stalled for {longest_gap} ms"
    );
    let now = leader(&app, &sale).await;
    assert!(now.starts_with(&format!("{}.", survivor.name)), "{now}");
    let epoch = |h: &str| h.rsplit('#').next().unwrap().parse::<u64>().unwrap();
    assert!(epoch(&now) > epoch(&holder));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draining_gateway_hands_each_client_its_resume_token() {
    let app = TestApp::spawn(fresh_db().await).await;
    let timings = GatewayTimings::default();
    let mut draining = GatewayProcess::spawn(&app, "g1", &timings).await;
    let other = GatewayProcess::spawn(&app, "g2", &timings).await;
    let sale = paused_sale(&app, 10.0, Duration::from_millis(500)).await;
    let mut clients = Vec::new();
    for _ in 0..5 {
        let mut c = RoomClient::join(&draining.ws_url(&sale)).await.unwrap();
        c.position(WAIT).await;
        clients.push(c);
    }
    draining.terminate();
    for mut c in clients {
        let Heard::Closed(code, reason) = c.outcome(WAIT).await else {
            panic!("expected a close frame");
        };
        assert_eq!(code, close::SERVICE_RESTART);
        assert_eq!(
            reason, c.resume_token,
            "the close reason is the resume token"
        );
        let mut back = RoomClient::resume(&other.ws_url(&sale), &reason, &[])
            .await
            .expect("resumes on another gateway");
        assert_eq!(back.ticket, c.ticket);
        assert_eq!(
            back.position(WAIT).await,
            c.positions[0],
            "paused: the same place"
        );
    }
    let status = draining.wait(Duration::from_secs(10)).await;
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
}

#[sqlx::test(migrations = "../migrations")]
async fn a_former_leader_cannot_advance_with_its_old_fencing_token(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let sale = unique("fence-");
    let spec = SaleSpec {
        opens_in: Duration::from_millis(300),
        ..SaleSpec::default()
    };
    app.create_sale(&sale, &spec).await;
    let keys = app.keys.sale(&sale);
    let mut conn = app.redis.clone();
    let _: () = redis::cmd("SET")
        .arg(keys.seq())
        .arg(10)
        .query_async(&mut conn)
        .await
        .unwrap();
    use floodgate_gateway::scripts::leader;
    let lease = |id: &'static str, ms: u64| {
        let (mut conn, keys) = (app.redis.clone(), &keys);
        async move {
            let lease = leader::lease(&mut conn, keys, id, Duration::from_millis(ms));
            lease.await.unwrap().unwrap_or_default()
        }
    };
    let advance = |fence: String| {
        let (mut conn, keys) = (app.redis.clone(), &keys);
        async move {
            match leader::advance(&mut conn, keys, (&fence, 1), &Default::default())
                .await
                .unwrap()
            {
                Advanced::Moved { admitted, .. } => admitted as i64,
                Advanced::NotLeader => -1,
                Advanced::NotArmed => -2,
            }
        }
    };
    tokio::time::sleep(Duration::from_millis(400)).await; // past the opening
    let a = lease("a", 200).await;
    assert!(a.starts_with("a#"));
    assert_eq!(lease("b", 200).await, "", "held by a");
    assert_eq!(advance(a.clone()).await, 1, "the holder advances");

    // a stalls past its lease; b takes over with a new epoch.
    eventually("a's lease lapses", WAIT, || async {
        leader(&app, &sale).await.is_empty()
    })
    .await;
    let b = lease("b", 60_000).await;
    assert!(b.starts_with("b#") && b != a);
    assert_eq!(advance(a.clone()).await, -1, "a's old token is fenced off");
    assert_eq!(advance(b.clone()).await, 1);
    assert_eq!(
        app.redis_int(&keys.frontier()).await,
        2,
        "only the two fenced-in advances"
    );
}

/// A place taken back with its resume token moves, it is not copied: the session it was taken
/// from is closed 4409 on whichever gateway holds it (here on the other gateway, then on the
/// same one), and the newest keeps the place. Before, every such session stayed open until it
/// idled out, so one place could hold sessions on every gateway of the fleet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_place_taken_back_closes_the_session_it_was_taken_from_on_any_gateway() {
    let app = TestApp::spawn(fresh_db().await).await;
    let timings = GatewayTimings::default();
    let g1 = GatewayProcess::spawn(&app, "g1", &timings).await;
    let g2 = GatewayProcess::spawn(&app, "g2", &timings).await;
    let sale = paused_sale(&app, 10.0, Duration::from_millis(500)).await;
    let mut first = RoomClient::join(&g1.ws_url(&sale)).await.unwrap();
    let place = first.position(WAIT).await;
    let token = first.resume_token.clone();

    let mut on_g2 = RoomClient::resume(&g2.ws_url(&sale), &token, &[])
        .await
        .unwrap();
    on_g2.position(WAIT).await;
    let mut back_on_g1 = RoomClient::resume(&g1.ws_url(&sale), &token, &[])
        .await
        .unwrap();
    back_on_g1.position(WAIT).await;
    let taken = |heard: Heard| matches!(heard, Heard::Closed(code, _) if code == close::TAKEN_OVER);
    let heard = on_g2.outcome(Duration::from_secs(10)).await;
    assert!(
        taken(heard.clone()),
        "the other gateway's session: {heard:?}"
    );

    let mut newest = RoomClient::resume(&g1.ws_url(&sale), &token, &[])
        .await
        .unwrap();
    let heard = back_on_g1.outcome(Duration::from_secs(10)).await;
    assert!(
        taken(heard.clone()),
        "the same gateway's session: {heard:?}"
    );
    assert_eq!(newest.position(WAIT).await, place, "the place is kept");
    // The session closed there was g1's, and so is the newest: the ticket is still registered
    // as g1's, for a sweep of g1 to find should it die.
    let keys = app.keys.sale(&sale);
    let mut redis = app.redis.clone();
    let gateways: Vec<String> = redis::cmd("SMEMBERS")
        .arg(keys.gateways())
        .query_async(&mut redis)
        .await
        .unwrap();
    let g1_id = gateways
        .iter()
        .find(|id| id.starts_with("g1."))
        .expect("g1 is registered");
    let registered: bool = redis::cmd("SISMEMBER")
        .arg(keys.gateway_sessions(g1_id))
        .arg(newest.ticket)
        .query_async(&mut redis)
        .await
        .unwrap();
    assert!(registered, "the newest session's ticket is g1's");
    drop(first);
}
