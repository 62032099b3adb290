//! A place whose person is away (they left, inside their grace) when its turn comes.

use std::time::Duration;

use floodgate_tests::client::RoomClient;
use floodgate_tests::{eventually, unique, SaleSpec, TestApp, TestOptions};

const WAIT: Duration = Duration::from_secs(20);

/// A person who left the line and is still inside their grace when their turn comes is let in
/// (the place stays theirs should they come back) but holds no stock until they do: the people
/// behind are admitted as if the place were empty, and the person who comes back counts again.
/// Before, an away place's token counted against the stock for the token's whole life, so near
/// the end of the stock the people behind waited out that life: a stranger's joins, each
/// dropped at once, held the last seats from the crowd (the hostile benchmark's late sell-outs).
#[sqlx::test(migrations = "../migrations")]
async fn an_away_place_holds_no_stock_until_its_person_comes_back(db: sqlx::PgPool) {
    let options = TestOptions {
        grace_ms: 60_000,
        ..TestOptions::default()
    };
    let app = TestApp::spawn_with(db, options).await;
    let sale = unique("away-");
    // One seat, and one unspent token allowed per seat: whoever holds the token holds the stock.
    let spec = SaleSpec {
        pools: vec![("p1".into(), 1)],
        opens_in: Duration::from_millis(300),
        admission_rate: 100.0,
        stock_factor: 1.0,
        token_ttl_secs: 120,
        ..SaleSpec::default()
    };
    app.create_sale(&sale, &spec).await;
    app.admission(&sale, "pause").await;
    // Opened (and drawn) with nobody in the pre-queue: places follow the order of arrival.
    let keys = app.keys.sale(&sale);
    let mut away = RoomClient::join(&app.ws_url(&sale)).await.unwrap();
    assert_eq!(away.position(WAIT).await, 1);
    let (ticket, token) = (away.ticket, away.resume_token.clone());
    let mut behind = RoomClient::join(&app.ws_url(&sale)).await.unwrap();
    assert_eq!(behind.position(WAIT).await, 2);
    away.leave().await;
    let gone = keys.gone();
    eventually("the departure is recorded", WAIT, || async {
        let deadline: Option<f64> = redis::cmd("ZSCORE")
            .arg(&gone)
            .arg(ticket)
            .query_async(&mut app.redis.clone())
            .await
            .unwrap();
        deadline.is_some()
    })
    .await;

    app.admission(&sale, "resume").await;
    behind.admitted(WAIT).await;
    let unspent = || async {
        let unspent: Option<i64> = redis::cmd("HGET")
            .arg(keys.meta())
            .arg("unspent")
            .query_async(&mut app.redis.clone())
            .await
            .unwrap();
        unspent.unwrap_or(0)
    };
    assert_eq!(
        unspent().await,
        1,
        "only the person who is there holds stock"
    );

    // The away person comes back inside the grace: their turn has passed, they are let in, and
    // their token counts from now on.
    let mut back = RoomClient::resume(&app.ws_url(&sale), &token, &[])
        .await
        .expect("resumed");
    assert_eq!(back.ticket, ticket);
    back.admitted(WAIT).await;
    assert_eq!(unspent().await, 2, "the returner's token counts");
}
