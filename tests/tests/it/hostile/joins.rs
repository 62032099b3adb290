//! Joins and puzzles from an address shared with a stranger (a carrier's, say): the stranger's
//! junk is charged to the address, and the people behind it pay with what is their own (a solved
//! puzzle, their sign-in, their place), so the junk cannot spend their joins (crate::limits and
//! crate::join in the gateway).

use floodgate_protocol::challenge::{ProofOfWork, Puzzle};
use floodgate_protocol::settings::{ChallengeRule, Door, IdentityRule};
use floodgate_tests::client::RoomClient;
use floodgate_tests::{unique, TestApp, TestOptions};

/// A sale opening in an hour, with `door`.
async fn sale_with(app: &TestApp, door: Door) -> String {
    app.pending_sale_with("joins-", door).await
}

/// The services of [`one_join_a_second`], and a sale asking for a (small) proof of work.
async fn with_a_proof_of_work(db: sqlx::PgPool) -> (TestApp, String) {
    let app = TestApp::spawn_with(db, one_join_a_second()).await;
    let door = Door {
        challenge: ChallengeRule::Pow,
        pow_difficulty: 4,
        ..Door::default()
    };
    let sale = sale_with(&app, door).await;
    (app, sale)
}

/// Every test client here comes from 127.0.0.1: the stranger and the people share the address,
/// whose allowance is one join a second (two at once) and one anonymous session.
fn one_join_a_second() -> TestOptions {
    TestOptions {
        joins_per_sec_per_ip: 1,
        max_connections_per_ip: 1,
        challenges_per_sec_per_ip: 1,
        ..TestOptions::default()
    }
}

#[sqlx::test(migrations = "../migrations")]
async fn a_strangers_junk_joins_do_not_spend_the_joins_of_people_behind_its_address(
    db: sqlx::PgPool,
) {
    let (app, pow) = with_a_proof_of_work(db).await;
    // The stranger: joins with made-up answers, and without any. The address pays for them, and
    // is soon refused.
    let url = |answer: &str| format!("{}&challenge={answer}", app.ws_url(&pow));
    let mut codes = Vec::new();
    for i in 0..10 {
        codes.push(RoomClient::refusal(&url(&format!("junk~{i}")), &[]).await.1);
    }
    codes.push(RoomClient::refusal(&app.ws_url(&pow), &[]).await.1);
    assert!(
        codes.iter().filter(|c| *c == "join_rate_limited").count() >= 7,
        "{codes:?}"
    );
    // The people behind the same address, each with a puzzle solved: in, every one of them, past
    // the address's allowance and its one anonymous session. Before, the first was refused 429
    // `join_rate_limited`.
    let puzzle_url = format!("http://{}/v1/sales/{pow}/challenge", app.gateway);
    let mut people = Vec::new();
    for _ in 0..4 {
        let puzzle: Puzzle = serde_json::from_value(app.get_json(&puzzle_url).await).unwrap();
        let client = RoomClient::join(&url(&ProofOfWork::solve(&puzzle)))
            .await
            .unwrap_or_else(|r| panic!("a person with a solved puzzle: {r:?}"));
        people.push(client);
    }
    // One of them loses their connection and comes back to their place: their own allowance.
    let back = people.pop().unwrap();
    let token = back.resume_token.clone();
    drop(back);
    RoomClient::join_with(&app.ws_url(&pow), &[("floodgate-resume", &token)])
        .await
        .unwrap_or_else(|r| panic!("a person coming back: {r:?}"));
    // A place joined over and over is held to a person's allowance (three at once, then one a
    // second), whatever address it comes from.
    let mut again = Vec::new();
    for _ in 0..6 {
        match RoomClient::join_with(&app.ws_url(&pow), &[("floodgate-resume", &token)]).await {
            Ok(_) => again.push("joined".to_owned()),
            Err(r) => again.push(r.body["error"].as_str().unwrap_or("").to_owned()),
        }
    }
    assert!(
        again.iter().any(|c| c == "join_rate_limited"),
        "a place is held to its own allowance: {again:?}"
    );
}

#[sqlx::test(migrations = "../migrations")]
async fn a_strangers_forged_identities_do_not_spend_the_joins_of_signed_in_people(
    db: sqlx::PgPool,
) {
    let app = TestApp::spawn_with(db, one_join_a_second()).await;
    let signed_in = sale_with(
        &app,
        Door {
            identity: IdentityRule::Required,
            ..Door::default()
        },
    )
    .await;
    let url = app.ws_url(&signed_in);
    let mut codes = Vec::new();
    for i in 0..10 {
        let forged = format!("eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ4In0.forged{i}");
        codes.push(
            RoomClient::refusal(&url, &[("floodgate-identity", &forged)])
                .await
                .1,
        );
    }
    assert!(
        codes.iter().filter(|c| *c == "join_rate_limited").count() >= 7,
        "{codes:?}"
    );
    // Signed-in people behind the same address: in. Before, 429 `join_rate_limited`.
    let mut people = Vec::new();
    for name in ["amrita", "bilal", "chen"] {
        let identity = app.identity(name).await;
        let client = RoomClient::join_with(&url, &[("floodgate-identity", &identity)])
            .await
            .unwrap_or_else(|r| panic!("{name}, signed in: {r:?}"));
        people.push(client);
    }
}

#[sqlx::test(migrations = "../migrations")]
async fn a_live_sales_puzzle_is_everyones_and_asking_again_is_never_refused(db: sqlx::PgPool) {
    let (app, pow) = with_a_proof_of_work(db).await;
    let ask = |sale: String| {
        let app = &app;
        async move {
            app.http
                .get(format!("http://{}/v1/sales/{sale}/challenge", app.gateway))
                .send()
                .await
                .unwrap()
        }
    };
    // Twenty asks at once from one address, against an allowance of one a second: every one is
    // answered (before, most were 429 `challenge_rate_limited`), with one puzzle unless a window
    // turned between them, and an edge may keep it for a second.
    let mut puzzles = std::collections::BTreeSet::new();
    for _ in 0..20 {
        let response = ask(pow.clone()).await;
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["cache-control"], "public, max-age=1");
        let puzzle: Puzzle = response.json().await.unwrap();
        puzzles.insert(puzzle.puzzle);
    }
    assert!(puzzles.len() <= 2, "{puzzles:?}");
    // Made-up sale ids cost a Redis read each: those are the address's to pay for.
    let mut made_up = Vec::new();
    for _ in 0..10 {
        made_up.push(ask(unique("made-up-")).await.status().as_u16());
    }
    assert!(
        made_up.iter().filter(|s| **s == 429).count() >= 7,
        "{made_up:?}"
    );
    assert!(
        made_up.iter().all(|s| *s == 429 || *s == 404),
        "{made_up:?}"
    );
}
