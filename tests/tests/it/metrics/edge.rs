//! The edge's own metrics (deploy/nginx/cdn.conf, its metrics server): every answer counted by
//! status and by who made it, so that the edge's own 503s (no origin answering), which no
//! service sees, can page (FloodgateEdgeUnavailable), and an origin's own refusals passed on
//! are not taken for them.

use std::time::Duration;

use floodgate_tests::edge::Edge;
use floodgate_tests::{eventually, fresh_db, unique, SaleSpec, TestApp};

use super::promtool_check;

const WAIT: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_edge_counts_its_answers_by_who_made_them() {
    let app = TestApp::spawn(fresh_db().await).await;
    let sale = unique("edge-metrics-");
    let spec = SaleSpec {
        opens_in: Duration::from_secs(3_600),
        ..SaleSpec::default()
    };
    app.create_sale(&sale, &spec).await;
    let edge = Edge::start(&[app.gateway], app.booking).await;
    let http = reqwest::Client::new();

    // The origins' answers: a gateway's 404 (through the pages' server inside the edge), the
    // booking service's 401, and a seat count fetched, then served from the edge's cache.
    let nowhere = http.get(edge.url("/v1/nowhere")).send().await.unwrap();
    assert_eq!(nowhere.status(), 404);
    let refused = http
        .post(edge.url(&format!("/v1/sales/{sale}/reservations")))
        .header("authorization", "Bearer not-a-pass")
        .header("idempotency-key", unique("k"))
        .json(&serde_json::json!({ "pool": "p1", "seats": 1 }))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
    let seats = edge.url(&format!("/v1/sales/{sale}/seats.json"));
    let first = http.get(&seats).send().await.unwrap();
    assert_eq!(first.status(), 200);
    assert_eq!(first.headers()["x-cache"], "MISS");
    // Kept a second: the copy (or, on a slow machine, the stale copy served while the edge
    // fetches the next).
    let second = http.get(&seats).send().await.unwrap();
    assert_eq!(second.status(), 200);
    let copy = second.headers()["x-cache"].to_str().unwrap().to_owned();
    assert!(
        ["HIT", "STALE", "UPDATING"].contains(&copy.as_str()),
        "{copy}"
    );
    eventually("the origins' answers counted", WAIT, async || {
        edge.answers(404, "origin").await == 1
            && edge.answers(401, "origin").await == 1
            && edge.answers(200, "origin").await >= 1
            && edge.answers(200, "cache").await == 1
    })
    .await;
    assert_eq!(edge.answers(404, "edge").await, 0);
    assert_eq!(edge.answers(401, "edge").await, 0);

    // A join is counted at its upgrade, while the person waits (not an hour later, when the
    // socket closes).
    let waiting = floodgate_tests::client::RoomClient::join(&edge.ws_url(&sale))
        .await
        .expect("joins through the edge");
    eventually(
        "the upgrade counted while the socket is open",
        WAIT,
        async || edge.answers(101, "origin").await == 1,
    )
    .await;
    drop(waiting);

    // An edge whose origins are all gone answers by itself: a 503 made by its public server
    // (the booking path), one made by the pages' server inside it (the page: to the public
    // server, an origin's answer, marked as the edge's own), and a flood's 429s.
    let gone = floodgate_tests::gateways::free_port();
    let dark = Edge::start(&[gone], gone).await;
    for path in ["/", "/v1/sales/s/reservations"] {
        let answer = http.get(dark.url(path)).send().await.unwrap();
        assert_eq!(answer.status(), 503, "{path}");
        assert!(
            !answer.headers().contains_key("x-floodgate-by"),
            "the mark stays inside the edge: {:?}",
            answer.headers()
        );
    }
    let flood =
        futures::future::join_all((0..200).map(|_| http.get(dark.url("/ws?sale=s")).send())).await;
    let statuses: Vec<u16> = flood
        .into_iter()
        .map(|r| r.unwrap().status().as_u16())
        .collect();
    let of = |status: u16| statuses.iter().filter(|&&s| s == status).count() as u64;
    assert!(
        of(429) > 0,
        "200 joins at once from one address, none refused"
    );
    assert_eq!(of(429) + of(503), 200, "{statuses:?}");
    eventually("the edge's own answers counted", WAIT, async || {
        dark.answers(503, "edge").await == 2 + of(503) && dark.answers(429, "edge").await == of(429)
    })
    .await;
    assert_eq!(
        dark.answers(503, "origin").await,
        0,
        "{}",
        dark.scrape().await
    );

    // What Prometheus reads: the answers and the connections, in a form promtool accepts.
    let text = dark.scrape().await;
    for state in ["active", "reading", "writing", "waiting"] {
        let series = format!("floodgate_edge_connections{{state=\"{state}\"}} ");
        assert!(text.contains(&series), "{series} missing from:\n{text}");
    }
    let (ok, said) = promtool_check(&text);
    assert!(ok, "promtool check metrics: {said}\n{text}");
}
