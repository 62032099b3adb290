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
    // One seat, and one unspent token allowed per seat: whoever holds the token holds the stock.
    let (app, sale) = one_seat(db, "away-", 300).await;
    let mut away = RoomClient::join(&app.ws_url(&sale)).await.unwrap();
    assert_eq!(away.position(WAIT).await, 1);
    let (ticket, token) = (away.ticket, away.resume_token.clone());
    let mut behind = RoomClient::join(&app.ws_url(&sale)).await.unwrap();
    assert_eq!(behind.position(WAIT).await, 2);
    away.leave().await;
    departed(&app, &sale, ticket).await;

    app.admission(&sale, "resume").await;
    behind.admitted(WAIT).await;
    let unspent = || unspent(&app, &sale);
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

/// A place with two sessions whose newer one leaves is taken for away, and its older session,
/// still there, is admitted with a token that was never counted: spending it takes nothing off
/// the unspent count. Before, each such claim took one off the others' count (to -1 with one
/// place, read as nothing unspent), so a stranger's places, each resumed on a second session
/// that left before its turn, let in one more person than the stock allows per place.
#[sqlx::test(migrations = "../migrations")]
async fn an_away_places_token_spent_by_its_other_session_leaves_the_count_whole(db: sqlx::PgPool) {
    let app = TestApp::spawn_with(db, TestOptions::default()).await;
    let sale = unique("away-twice-");
    let spec = SaleSpec {
        pools: vec![("p1".into(), 10), ("small".into(), 1)],
        opens_in: Duration::from_millis(300),
        token_ttl_secs: 120,
        max_seats: 2,
        ..SaleSpec::default()
    };
    paused_and_open(&app, &sale, &spec).await;
    let mut first = RoomClient::join(&app.ws_url(&sale)).await.unwrap();
    assert_eq!(first.position(WAIT).await, 1);
    let token = first.resume_token.clone();
    let mut second = RoomClient::resume(&app.ws_url(&sale), &token, &[])
        .await
        .expect("a second session of the place");
    assert_eq!(second.position(WAIT).await, 1);
    second.leave().await;
    departed(&app, &sale, first.ticket).await;

    app.admission(&sale, "resume").await;
    let pass = first.admitted(WAIT).await;
    assert_eq!(unspent(&app, &sale).await, 0, "let in away");
    // Refused in the pool (more seats than it has): the token is given back where it was.
    let refused = app.reserve(&sale, &pass, "k1", "small", 2).await;
    assert!(refused.is_err(), "{refused:?}");
    let uncounted: Option<f64> = redis::cmd("ZSCORE")
        .arg(app.keys.sale(&sale).away_admitted())
        .arg(first.ticket)
        .query_async(&mut app.redis.clone())
        .await
        .unwrap();
    assert!(uncounted.is_some(), "back among the uncounted");
    assert_eq!(unspent(&app, &sale).await, 0, "the give-back added nothing");
    app.reserve(&sale, &pass, "k2", "p1", 1).await.expect("201");
    assert_eq!(
        unspent(&app, &sale).await,
        0,
        "nothing was taken off the count"
    );
}

/// Away places take none of the rate's permits: at one admission a minute and three places
/// dropped ahead of them, the person who is there is let in with the first permit, the away
/// places passed on the way (and let in, theirs should their people come back). Before, each
/// away place took a permit as if its person were there: a stranger's joins, each dropped at
/// once, slowed the line behind them by their share of the rate (the person here would have
/// waited three minutes).
#[sqlx::test(migrations = "../migrations")]
async fn away_places_take_none_of_the_rates_permits(db: sqlx::PgPool) {
    let options = TestOptions {
        grace_ms: 60_000,
        ..TestOptions::default()
    };
    let app = TestApp::spawn_with(db, options).await;
    let sale = unique("away-rate-");
    let spec = SaleSpec {
        admission_rate: 1.0 / 60.0,
        opens_in: Duration::from_millis(300),
        ..SaleSpec::default()
    };
    paused_and_open(&app, &sale, &spec).await;
    let mut tokens = Vec::new();
    for place in 1..=3 {
        let mut gone = RoomClient::join(&app.ws_url(&sale)).await.unwrap();
        let ticket = gone.ticket;
        tokens.push(gone.resume_token.clone());
        assert_eq!(gone.position(WAIT).await, place);
        gone.leave().await;
        departed(&app, &sale, ticket).await;
    }
    let mut there = RoomClient::join(&app.ws_url(&sale)).await.unwrap();
    assert_eq!(there.position(WAIT).await, 4);

    app.admission(&sale, "resume").await;
    there.admitted(WAIT).await;
    assert_eq!(
        unspent(&app, &sale).await,
        1,
        "only the person who is there"
    );
    // The away places were let in on the way: whoever comes back finds their turn passed.
    let mut back = RoomClient::resume(&app.ws_url(&sale), &tokens[0], &[])
        .await
        .expect("resumed");
    back.admitted(WAIT).await;
    assert_eq!(unspent(&app, &sale).await, 2, "the returner counts");
}

/// Places dropped before the draw are away too: their places are not known when their people
/// leave (the line is drawn at the opening), and the leader places them once it knows the draw.
/// Before, they counted against the stock when their turn came, as if their people were there.
#[sqlx::test(migrations = "../migrations")]
async fn places_dropped_before_the_draw_hold_no_stock(db: sqlx::PgPool) {
    let (app, sale) = one_seat(db, "away-drawn-", 1_500).await;
    // Three places taken in the pre-queue and dropped before the opening.
    for _ in 0..3 {
        let gone = RoomClient::join(&app.ws_url(&sale)).await.unwrap();
        let ticket = gone.ticket;
        gone.leave().await;
        departed(&app, &sale, ticket).await;
    }
    // Drawn (the pre-queue closed at the opening): whoever joins now is fourth.
    eventually("the pre-queue is drawn", WAIT, || drawn(&app, &sale)).await;
    let mut behind = RoomClient::join(&app.ws_url(&sale)).await.unwrap();
    assert_eq!(behind.position(WAIT).await, 4);

    let_in_past_the_away(&app, &sale, &mut behind).await;
}

/// However many places are dropped before the draw, none holds stock when the line opens:
/// the leader lets nobody in until it knows the draw, and while more are unplaced than its read
/// takes in a tick, it places those just past the frontier first and goes no further. Here 700
/// of them and one person who stays, for one seat: the person is let in at once, holding the
/// one pass. Before, the tick that closed the pre-queue, and the next ones until the leader had
/// placed them all (500 a tick), counted them as people there: the seat's one pass went to one
/// of them, and the person waited out its life (two minutes).
#[sqlx::test(migrations = "../migrations")]
async fn a_crowd_of_places_dropped_before_the_draw_holds_no_stock(db: sqlx::PgPool) {
    let options = TestOptions {
        grace_ms: 120_000,
        ..TestOptions::default()
    };
    let app = TestApp::spawn_with(db, options).await;
    let sale = unique("away-crowd-");
    let spec = SaleSpec {
        pools: vec![("p1".into(), 1)],
        opens_in: Duration::from_secs(30),
        stock_factor: 1.0,
        token_ttl_secs: 120,
        ..SaleSpec::default()
    };
    app.create_sale(&sale, &spec).await;
    let url = app.ws_url(&sale);
    for _ in 0..14 {
        let joined = futures::future::join_all((0..50).map(|_| RoomClient::join(&url))).await;
        for client in joined {
            client.expect("a place in the pre-queue").leave().await;
        }
    }
    let mut there = RoomClient::join(&url).await.unwrap();
    let away = app.keys.sale(&sale).away();
    eventually("every dropped place is away, unplaced", WAIT, || async {
        let unplaced: u64 = redis::cmd("ZCOUNT")
            .arg(&away)
            .arg(0)
            .arg(0)
            .query_async(&mut app.redis.clone())
            .await
            .unwrap();
        unplaced == 700
    })
    .await;
    assert!(
        !drawn(&app, &sale).await,
        "the places were dropped before the draw"
    );

    there.admitted(Duration::from_secs(60)).await;
    assert_eq!(
        unspent(&app, &sale).await,
        1,
        "only the person who is there"
    );
}

/// The places of a gateway that died without goodbye are away once the leader hands them to
/// their grace: a crashed gateway's crowd holds no stock it is not there to use. Before, they
/// counted against the stock when their turn came, for their passes' whole life.
#[sqlx::test(migrations = "../migrations")]
async fn a_dead_gateways_places_hold_no_stock(db: sqlx::PgPool) {
    let (app, sale) = one_seat(db, "away-swept-", 300).await;
    // The first place keeps the room (and its leader) running here; it leaves later.
    let mut first = RoomClient::join(&app.ws_url(&sale)).await.unwrap();
    assert_eq!(first.position(WAIT).await, 1);
    // A second gateway handed out place 2 and died: its session set names the ticket, and it
    // has no liveness key (as `lua/join.lua` leaves them, once the key has lapsed).
    let keys = app.keys.sale(&sale);
    let mut redis = app.redis.clone();
    let ticket: u64 = redis::cmd("INCR")
        .arg(keys.seq())
        .query_async(&mut redis)
        .await
        .unwrap();
    assert_eq!(ticket, 2);
    let _: () = redis::pipe()
        .sadd(keys.gateway_sessions("ghost"), ticket)
        .sadd(keys.gateways(), "ghost")
        .query_async(&mut redis)
        .await
        .unwrap();
    departed(&app, &sale, ticket).await;
    let mut behind = RoomClient::join(&app.ws_url(&sale)).await.unwrap();
    assert_eq!(behind.position(WAIT).await, 3);
    let first_ticket = first.ticket;
    first.leave().await;
    departed(&app, &sale, first_ticket).await;

    let_in_past_the_away(&app, &sale, &mut behind).await;
}

/// A claim never takes a batch's count below nothing: should the count already be spent (an
/// older release's service claimed an uncounted token during an upgrade), the sale's unspent
/// count errs towards admitting fewer, and heals when the batch expires. Before, it went on
/// down, and the sale let in more than the stock allows.
#[sqlx::test(migrations = "../migrations")]
async fn a_claim_never_takes_a_batch_below_nothing(db: sqlx::PgPool) {
    let app = TestApp::spawn_with(db, TestOptions::default()).await;
    let sale = unique("away-floor-");
    let spec = SaleSpec {
        pools: vec![("p1".into(), 10)],
        opens_in: Duration::from_millis(300),
        token_ttl_secs: 120,
        ..SaleSpec::default()
    };
    paused_and_open(&app, &sale, &spec).await;
    let mut person = RoomClient::join(&app.ws_url(&sale)).await.unwrap();
    assert_eq!(person.position(WAIT).await, 1);
    app.admission(&sale, "resume").await;
    let pass = person.admitted(WAIT).await;
    assert_eq!(unspent(&app, &sale).await, 1);
    // Its batch's count spent already, as an older release's claim would leave it.
    let tokens = app.keys.sale(&sale).tokens();
    let mut redis = app.redis.clone();
    let batches: Vec<String> = redis::cmd("HKEYS")
        .arg(&tokens)
        .query_async(&mut redis)
        .await
        .unwrap();
    assert_eq!(batches.len(), 1, "{batches:?}");
    let _: () = redis::cmd("HSET")
        .arg(&tokens)
        .arg(&batches[0])
        .arg(0)
        .query_async(&mut redis)
        .await
        .unwrap();
    app.reserve(&sale, &pass, "k1", "p1", 1).await.expect("201");
    let left: i64 = redis::cmd("HGET")
        .arg(&tokens)
        .arg(&batches[0])
        .query_async(&mut redis)
        .await
        .unwrap();
    assert_eq!((left, unspent(&app, &sale).await), (0, 1));
}

/// A sale that holds the stock for a pass a shorter time than the pass lives: an admitted person
/// who stays and never books holds the last seat only that long, and the person behind is let
/// in after it. Before, an idle pass held its share of the stock for its whole life (a
/// stranger's thousands of idle places held the last seats from the crowd).
#[sqlx::test(migrations = "../migrations")]
async fn an_idle_pass_holds_the_stock_only_as_long_as_the_sale_says(db: sqlx::PgPool) {
    let app = TestApp::spawn_with(db, TestOptions::default()).await;
    let sale = unique("stock-hold-");
    let spec = SaleSpec {
        pools: vec![("p1".into(), 1)],
        opens_in: Duration::from_millis(300),
        stock_factor: 1.0,
        token_ttl_secs: 120,
        stock_hold_secs: Some(2),
        ..SaleSpec::default()
    };
    paused_and_open(&app, &sale, &spec).await;
    let mut idle = RoomClient::join(&app.ws_url(&sale)).await.unwrap();
    assert_eq!(idle.position(WAIT).await, 1);
    let mut behind = RoomClient::join(&app.ws_url(&sale)).await.unwrap();
    assert_eq!(behind.position(WAIT).await, 2);
    app.admission(&sale, "resume").await;
    let pass = idle.admitted(WAIT).await;
    let idle_since = std::time::Instant::now();
    // Two seconds on (not before), the idle pass no longer holds the seat: the person behind
    // is let in.
    behind.admitted(WAIT).await;
    let waited = idle_since.elapsed();
    assert!(waited >= Duration::from_millis(1_500), "held {waited:?}");
    assert_eq!(unspent(&app, &sale).await, 1, "the newer pass holds it now");
    // The idle pass is still valid for its life, and may still book the seat if it is there.
    app.reserve(&sale, &pass, "k1", "p1", 1).await.expect("201");
    assert_eq!(
        unspent(&app, &sale).await,
        1,
        "its claim took nothing off the count"
    );
}

/// A gateway whose departed keep their places a minute, and a sale of one seat with one unspent
/// token allowed per seat (whoever holds a pass holds the stock), opening in `opens_in_ms`,
/// paused.
async fn one_seat(db: sqlx::PgPool, prefix: &str, opens_in_ms: u64) -> (TestApp, String) {
    let options = TestOptions {
        grace_ms: 60_000,
        ..TestOptions::default()
    };
    let app = TestApp::spawn_with(db, options).await;
    let sale = unique(prefix);
    let spec = SaleSpec {
        pools: vec![("p1".into(), 1)],
        opens_in: Duration::from_millis(opens_in_ms),
        stock_factor: 1.0,
        token_ttl_secs: 120,
        ..SaleSpec::default()
    };
    paused_and_open(&app, &sale, &spec).await;
    (app, sale)
}

/// Resumes admission: `behind` is let in past the away places ahead of it, and holds the one
/// unspent pass (the away hold none).
async fn let_in_past_the_away(app: &TestApp, sale: &str, behind: &mut RoomClient) {
    app.admission(sale, "resume").await;
    behind.admitted(WAIT).await;
    assert_eq!(unspent(app, sale).await, 1, "only the person who is there");
}

/// A sale opened (and drawn) with nobody in the pre-queue, paused: places follow the order of
/// arrival, and nobody is admitted until the test resumes admission.
async fn paused_and_open(app: &TestApp, sale: &str, spec: &SaleSpec) {
    app.create_sale(sale, spec).await;
    app.admission(sale, "pause").await;
}

/// Waits until the departure of `ticket` is recorded (its grace has started).
async fn departed(app: &TestApp, sale: &str, ticket: u64) {
    let gone = app.keys.sale(sale).gone();
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
}

/// Whether the sale's pre-queue is drawn (it closed at the opening).
async fn drawn(app: &TestApp, sale: &str) -> bool {
    redis::cmd("HEXISTS")
        .arg(app.keys.sale(sale).meta())
        .arg("prequeue_size")
        .query_async(&mut app.redis.clone())
        .await
        .unwrap()
}

/// The sale's unspent count as Redis holds it (a negative one too).
async fn unspent(app: &TestApp, sale: &str) -> i64 {
    let unspent: Option<i64> = redis::cmd("HGET")
        .arg(app.keys.sale(sale).meta())
        .arg("unspent")
        .query_async(&mut app.redis.clone())
        .await
        .unwrap();
    unspent.unwrap_or(0)
}
