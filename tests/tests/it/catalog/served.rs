//! The catalog the page reads, served by the booking service for the edge to cache (issue 49):
//! in a cluster the gateways' static folders are read-only and hold the page only, so a sale's
//! trains, classes and fares must reach the page with nothing published. Through the edge, an
//! armed sale's catalog and the list of sales are there at once, as `sale publish` would write
//! them, and what a stranger names costs nothing kept and a bounded number of reads.

use std::sync::Arc;
use std::time::Duration;

use floodgate_booking::catalog::served::{Shelf, KNOWN_FRESH};
use floodgate_booking::publish_static::{catalog, sales_index};
use floodgate_tests::edge::Edge;
use floodgate_tests::{unique, SaleSpec, TestApp};

#[sqlx::test(migrations = "../migrations")]
async fn through_the_edge_an_armed_sales_catalog_needs_no_publishing(db: sqlx::PgPool) {
    // No static folder: the gateway has no catalog file, as in a cluster.
    let app = TestApp::spawn(db.clone()).await;
    let sale = unique("served-");
    let spec = SaleSpec {
        pools: vec![("p1".into(), 10), ("p2".into(), 4)],
        opens_in: Duration::from_secs(3_600),
        ..SaleSpec::default()
    };
    app.create_sale(&sale, &spec).await;
    let file = format!("/data/sales/{sale}.json");
    let at_gateway = app
        .http
        .get(format!("http://{}{file}", app.gateway))
        .send()
        .await
        .unwrap();
    assert_eq!(
        at_gateway.status(),
        404,
        "the gateway's folder has no catalog"
    );

    let edge = Edge::start(&[app.gateway], app.booking).await;
    let first = app.http.get(edge.url(&file)).send().await.unwrap();
    assert_eq!(first.status(), 200);
    assert_eq!(
        first.headers()["cache-control"],
        "public, max-age=60, stale-while-revalidate=600"
    );
    let served: serde_json::Value = first.json().await.unwrap();
    assert_eq!(
        served,
        catalog(&db, &sale).await.unwrap(),
        "as publish writes it"
    );
    assert_eq!(served["pools"].as_array().unwrap().len(), 2);
    assert_eq!(served["trains"][0]["id"], "12951");
    let second = app.http.get(edge.url(&file)).send().await.unwrap();
    assert_eq!(
        second.headers()["x-cache"],
        "HIT",
        "the second viewer, from the edge's cache"
    );

    let index: serde_json::Value = app.get_json(&edge.url("/data/sales/index.json")).await;
    assert_eq!(index, sales_index(&db).await.unwrap());
    assert!(
        index["sales"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["sale"] == sale.as_str()),
        "{index}"
    );

    // Compressed, and revalidated, as the static folder serves it (at the booking service).
    let direct = format!("http://{}{file}", app.booking);
    let br = app
        .http
        .get(&direct)
        .header("accept-encoding", "br, gzip")
        .send()
        .await
        .unwrap();
    assert_eq!(br.headers()["content-encoding"], "br");
    let etag = br.headers()["etag"].to_str().unwrap().to_owned();
    let again = app
        .http
        .get(&direct)
        .header("accept-encoding", "br")
        .header("if-none-match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 304);

    // A sale nobody armed, a name that is no sale's, a query: clear refusals.
    let (status, body) = app
        .answer(app.http.get(edge.url("/data/sales/no-such-sale.json")))
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (404, Some("unknown_sale"))
    );
    let (status, body) = app
        .answer(
            app.http
                .get(format!("http://{}/data/sales/x.txt", app.booking)),
        )
        .await;
    assert_eq!((status, body["error"].as_str()), (404, Some("not_found")));
    // A name spelled otherwise than the page writes it is refused at the edge (the cache keys
    // the path made plain: such a spelling would share the real copy's key).
    let (status, body) = app
        .answer(app.http.get(edge.url(&format!("/data/sales//{sale}.json"))))
        .await;
    assert_eq!((status, body["error"].as_str()), (404, Some("not_found")));
    let (status, body) = app
        .answer(app.http.get(edge.url(&format!("{file}?v=2"))))
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("unknown_parameter"))
    );
}

/// A stranger naming sale after sale costs a read of PostgreSQL now and then, and nothing kept;
/// a crowd asking for one sale's catalog costs a read per `FRESH`; an ended sale is not served;
/// with PostgreSQL away, nobody waits behind another's read.
#[sqlx::test(migrations = "../migrations")]
async fn made_up_names_cost_no_memory_and_few_reads(db: sqlx::PgPool) {
    let app = TestApp::spawn(db.clone()).await;
    let sale = unique("shelf-");
    app.create_sale(&sale, &SaleSpec::default()).await;
    let shelf = Arc::new(Shelf::default());
    let started = tokio::time::Instant::now();
    for n in 0..500 {
        let refused = shelf.document(&db, &format!("made-up-{n}")).await;
        assert_eq!(refused.err().map(|e| e.code()), Some("unknown_sale"));
    }
    let periods = started.elapsed().as_secs() / KNOWN_FRESH.as_secs() + 1;
    assert!(
        shelf.reads() <= periods,
        "{} reads for 500 made-up names in {:?}",
        shelf.reads(),
        started.elapsed()
    );
    assert_eq!(shelf.kept(), 0, "nothing kept for a made-up name");

    let before = shelf.reads();
    for _ in 0..200 {
        let asset = shelf
            .document(&db, &sale)
            .await
            .expect("the armed sale's catalog");
        assert!(!asset.body().is_empty());
    }
    assert!(
        shelf.reads() - before <= 3,
        "{} reads",
        shelf.reads() - before
    );
    assert_eq!(shelf.kept(), 1);

    // An ended sale's catalog is not served (a fresh shelf: this one trusts its ids a minute).
    sqlx::query("update sales set ended_at = now() where id = $1")
        .bind(&sale)
        .execute(&db)
        .await
        .unwrap();
    let fresh = Arc::new(Shelf::default());
    let ended = fresh.document(&db, &sale).await;
    assert_eq!(ended.err().map(|e| e.code()), Some("unknown_sale"));

    // PostgreSQL away: refused at once, with one read a period whoever asks (nobody waits
    // behind another's read).
    let away = sqlx::postgres::PgPoolOptions::new()
        .acquire_timeout(Duration::from_millis(500))
        .connect_lazy("postgres://postgres@127.0.0.1:1/none")
        .unwrap();
    let dark = Arc::new(Shelf::default());
    for _ in 0..20 {
        let refused = dark.document(&away, "index").await;
        assert_eq!(refused.err().map(|e| e.code()), Some("catalog_unavailable"));
    }
    assert_eq!(dark.reads(), 1, "one read a period, whoever asks");
}
