//! What the shipped edge (`deploy/nginx/cdn.conf`) answers from its cache: the same copy for
//! everyone, which nothing a stranger sends may spoil.

use floodgate_tests::TestApp;

use super::edge::shipped_edge_with;

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
    let edge = shipped_edge_with(&app, &[]).await;
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
