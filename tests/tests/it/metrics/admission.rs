//! What the stalled-admission alert reads (deploy/observability/alerts.yaml,
//! FloodgateAdmissionStalled): the leader's `floodgate_admission_allowed`, the people the cap and
//! the stock would let in now. It is above 0 while only the rate holds people back, and 0 while
//! people wait for seats that are all promised (the normal wait of a rush, which must not
//! page); the gateway that leads says so in `floodgate_admission_leading`.

use std::time::Duration;

use floodgate_tests::client::RoomClient;
use floodgate_tests::{eventually, fresh_db, scrape, unique, SaleSpec, TestApp};

const WAIT: Duration = Duration::from_secs(20);

async fn gauge(app: &TestApp, name: &str, sale: &str) -> Option<f64> {
    scrape(app.gateway_admin, &format!("{name}{{sale=\"{sale}\"}}")).await
}

/// Three people join `sale` before it opens; they are held (the sessions stay open).
async fn three_waiting(app: &TestApp, sale: &str) -> Vec<RoomClient> {
    let mut people = Vec::new();
    for _ in 0..3 {
        people.push(RoomClient::join(&app.ws_url(sale)).await.expect("joins"));
    }
    people
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_says_whom_it_could_let_in_and_says_nobody_while_seats_are_all_promised() {
    let app = TestApp::spawn(fresh_db().await).await;

    // One seat, one pass a seat: the first person admitted holds the only pass the stock allows,
    // and the other two wait for it (the rate would let them in at once).
    let promised = unique("promised-");
    app.create_sale(
        &promised,
        &SaleSpec {
            pools: vec![("p1".into(), 1)],
            stock_factor: 1.0,
            opens_in: Duration::from_secs(1),
            ..SaleSpec::default()
        },
    )
    .await;
    let _waiting = three_waiting(&app, &promised).await;
    eventually("one admitted, two waiting for the seat", WAIT, async || {
        let issued = gauge(&app, "floodgate_admission_issued", &promised).await;
        let frontier = gauge(&app, "floodgate_admission_frontier", &promised).await;
        let leading = gauge(&app, "floodgate_admission_leading", &promised).await;
        let allowed = gauge(&app, "floodgate_admission_allowed", &promised).await;
        issued == Some(3.0) && frontier == Some(1.0) && leading == Some(1.0) && allowed == Some(0.0)
    })
    .await;

    // Ten seats, one admission a second: the leader could let the waiting in, and only the rate
    // holds them back for a moment.
    let paced = unique("paced-");
    app.create_sale(
        &paced,
        &SaleSpec {
            admission_rate: 1.0,
            opens_in: Duration::from_secs(1),
            ..SaleSpec::default()
        },
    )
    .await;
    let _paced = three_waiting(&app, &paced).await;
    eventually("the leader could let people in", WAIT, async || {
        let leading = gauge(&app, "floodgate_admission_leading", &paced).await;
        let allowed = gauge(&app, "floodgate_admission_allowed", &paced).await;
        leading == Some(1.0) && allowed.is_some_and(|a| a >= 1.0)
    })
    .await;
}
