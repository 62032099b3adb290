//! What the shipped edge (`deploy/nginx/cdn.conf`) answers from its cache: the same copy for
//! everyone, which nothing a stranger sends may spoil.

use floodgate_tests::TestApp;

use super::edge::{shipped_edge, shipped_edge_with, shrunk, with_the_page};

/// A sale's puzzle, seat counts and summary are kept by path alone (the query changes none of
/// them), and the origin refuses any query on them (400 `unknown_parameter`). A request with a
/// query that missed the copy, or came as it expired, would be the one the edge sends to
/// refresh it: the refusal is not kept, the stale copy stays, and a stranger sending such
/// requests faster than the people would keep everyone's puzzle stale until it expired (and
/// every join with it refused `challenge_expired`). The edge refuses such a request itself, as
/// the origin would, before the cache. Before, it was answered 200 from the cache, and sent on
/// when the copy was stale.
#[sqlx::test(migrations = "../migrations")]
async fn a_query_on_a_cached_document_never_reaches_the_origin_to_refresh_it(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let sale = app.pending_sale("edge-query-").await;
    let edge = shipped_edge(&app).await;
    let http = reqwest::Client::new();
    for path in [
        format!("/v1/sales/{sale}"),
        format!("/v1/sales/{sale}/challenge"),
        format!("/v1/sales/{sale}/seats.json"),
    ] {
        let plain = http.get(edge.url(&path)).send().await.unwrap();
        assert_eq!(plain.status(), 200, "{path}");
        for query in ["x=1", "sale=other", "0"] {
            let asked = http
                .get(edge.url(&format!("{path}?{query}")))
                .send()
                .await
                .unwrap();
            let status = asked.status().as_u16();
            let cache = asked.headers().get("x-cache").cloned();
            let body: serde_json::Value = asked.json().await.unwrap_or_default();
            assert_eq!(
                (status, body["error"].as_str(), cache),
                (400, Some("unknown_parameter"), None),
                "{path}?{query}: refused at the edge, the copy untouched"
            );
        }
    }
    // The page takes its query (`?sale=`), and still gets it.
    let page = http
        .get(edge.url(&format!("/?sale={sale}")))
        .send()
        .await
        .unwrap();
    assert_ne!(page.status(), 400);
}

/// An answer from the edge's cache is never refused for its address: a stranger fetching the
/// page, the sale's summary and its puzzle as fast as it can from a carrier's address refuses
/// no one there any of them, and what reaches the gateways is still counted per address. The
/// shipped edge with the pages' allowance made 2 a minute (5 at once): 40 loads of each all
/// answered, each costing the origin one miss (the
/// page and the summary, which the origin marks for no browser to keep, are kept a second by
/// the edge), asks for made-up sales (each a miss) refused past the allowance. Before, the
/// address's cached answers counted too (429 `too_many_requests` after two), and the page and
/// the summary were never kept: each load a miss, counted and queued on the cache's lock.
#[sqlx::test(migrations = "../migrations")]
async fn answers_from_the_edges_cache_are_never_refused_for_their_address(db: sqlx::PgPool) {
    let app = with_the_page(db).await;
    let sale = app.pending_sale("edge-cached-").await;
    let edge = shipped_edge_with(&app, &shrunk("floodgate_pages", "2r/m", 4)).await;
    let http = reqwest::Client::new();
    for path in [
        format!("/?sale={sale}"),
        format!("/v1/sales/{sale}"),
        format!("/v1/sales/{sale}/challenge"),
    ] {
        let mut statuses = Vec::new();
        for _ in 0..40 {
            let answer = http.get(edge.url(&path)).send().await.unwrap();
            statuses.push(answer.status().as_u16());
        }
        assert!(statuses.iter().all(|s| *s == 200), "{path}: {statuses:?}");
    }
    let mut misses = Vec::new();
    for i in 0..8 {
        let made_up = edge.url(&format!("/v1/sales/made-up-{i}/challenge"));
        let answer = http.get(&made_up).send().await.unwrap();
        let status = answer.status().as_u16();
        misses.push((status, answer.text().await.unwrap()));
    }
    assert!(
        misses
            .iter()
            .any(|(status, body)| *status == 429 && body.contains("too_many_requests")),
        "{misses:?}"
    );
}

/// The page spelled otherwise (`//`, `/%69ndex.html`: the edge keys its copy by the path made
/// plain, and passes the path on as it came) never puts anything but the page in the page's
/// place in the edge's cache. Before, the gateway's folder of static files answered such a path
/// with the page as stored, nothing configured filled in (no sign-in, no checkout, the scripts'
/// plain names), and whoever asked first on a new edge, or after the copy's second, gave that to
/// everyone loading the page.
#[sqlx::test(migrations = "../migrations")]
async fn a_page_spelled_otherwise_never_takes_the_pages_place_in_the_cache(db: sqlx::PgPool) {
    let app = with_the_page(db).await;
    let http = reqwest::Client::new();
    let page = |url: String| {
        let http = http.clone();
        async move {
            let answer = http.get(url).send().await.unwrap();
            (answer.status().as_u16(), answer.text().await.unwrap())
        }
    };
    let served = page(format!("http://{}/", app.gateway)).await;
    assert_eq!(served.0, 200);
    let edge = shipped_edge(&app).await;
    for (odd, plain) in [("//", "/"), ("/%69ndex.html", "/index.html")] {
        let (status, body) = page(edge.url(odd)).await;
        assert!(
            status != 200 || body == served.1,
            "{odd}: the page as stored, not as served"
        );
        assert_eq!(page(edge.url(plain)).await, served, "{plain} after {odd}");
    }
}
