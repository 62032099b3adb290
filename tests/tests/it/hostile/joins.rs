//! Joins and puzzles from an address shared with a stranger (a carrier's, say): the stranger's
//! junk is charged to the address, and the people behind it pay with what is their own (a solved
//! puzzle, their sign-in, their place), so the junk cannot spend their joins (crate::limits and
//! crate::join in the gateway).

use std::time::Duration;

use floodgate_protocol::challenge::{ProofOfWork, Puzzle};
use floodgate_protocol::settings::{ChallengeRule, Door, IdentityRule};
use floodgate_protocol::ws::close;
use floodgate_tests::client::{Heard, RoomClient};
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

/// A join's URL to `sale` with the answer to its puzzle, solved now.
async fn solved(app: &TestApp, sale: &str) -> String {
    let puzzle_url = format!("http://{}/v1/sales/{sale}/challenge", app.gateway);
    let puzzle: Puzzle = serde_json::from_value(app.get_json(&puzzle_url).await).unwrap();
    let answer = ProofOfWork::solve(&puzzle);
    format!("{}&challenge={answer}", app.ws_url(sale))
}

/// The resume tokens of `n` places, each joined with a puzzle solved and then left.
async fn solved_places_left(app: &TestApp, sale: &str, n: usize) -> Vec<String> {
    let mut tokens = Vec::new();
    for _ in 0..n {
        let place = RoomClient::join(&solved(app, sale).await)
            .await
            .unwrap_or_else(|r| panic!("a solved place: {r:?}"));
        tokens.push(place.resume_token.clone());
        place.leave().await;
    }
    tokens
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
    let mut people = Vec::new();
    for _ in 0..4 {
        let client = RoomClient::join(&solved(&app, &pow).await)
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

/// One place, however often its genuine token comes back, holds its first session and its
/// newest: each session it was taken back from is closed 4409, and its first (the new place's
/// own, never recorded as a holder) stays. Before, each resumed join of a sale with a proof of
/// work was one more session, up to a person's cap on every gateway.
#[sqlx::test(migrations = "../migrations")]
async fn one_place_holds_its_first_session_and_its_newest_at_most(db: sqlx::PgPool) {
    let (app, pow) = with_a_proof_of_work(db).await;
    let url = solved(&app, &pow).await;
    let mut first = RoomClient::join(&url).await.unwrap();
    let token = first.resume_token.clone();
    let mut newest: Option<RoomClient> = None;
    // A place's returns: three at once (then one in ten seconds).
    for _ in 0..3 {
        let again = RoomClient::join_with(&app.ws_url(&pow), &[("floodgate-resume", &token)])
            .await
            .unwrap_or_else(|r| panic!("the place comes back: {r:?}"));
        if let Some(mut older) = newest.replace(again) {
            let heard = older.outcome(Duration::from_secs(10)).await;
            assert!(
                matches!(heard, Heard::Closed(code, _) if code == close::TAKEN_OVER),
                "the session it was taken from: {heard:?}"
            );
        }
    }
    assert!(first.ping(Duration::from_secs(5)).await, "the first stays");
    let mut newest = newest.expect("the newest session");
    assert!(
        newest.ping(Duration::from_secs(5)).await,
        "the newest stays"
    );
}

/// A solved answer sent again and again is held to a person's allowance before its single-use
/// mark is looked up in Redis: a replay flood costs a map lookup. Before, every copy ran a
/// Redis command and was told `challenge_reused`.
#[sqlx::test(migrations = "../migrations")]
async fn a_replayed_answer_is_held_to_a_persons_allowance(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let door = Door {
        challenge: ChallengeRule::Pow,
        pow_difficulty: 4,
        ..Door::default()
    };
    let pow = sale_with(&app, door).await;
    let url = solved(&app, &pow).await;
    let _in = RoomClient::join(&url).await.unwrap();
    let mut codes = Vec::new();
    for _ in 0..8 {
        codes.push(RoomClient::refusal(&url, &[]).await.1);
    }
    let reused = codes.iter().filter(|c| *c == "challenge_reused").count();
    assert!(reused <= 2, "{codes:?}");
    assert!(
        codes
            .iter()
            .all(|c| c == "challenge_reused" || c == "join_rate_limited"),
        "{codes:?}"
    );
}

/// A place over for good, named again and again: the first refusal is remembered, and the rest
/// run no script. Before, every resume ran `resume.lua` in the sale's slot until the draw.
#[sqlx::test(migrations = "../migrations")]
async fn a_dead_place_named_again_costs_no_script(db: sqlx::PgPool) {
    let options = TestOptions {
        grace_ms: 300,
        ..TestOptions::default()
    };
    let app = TestApp::spawn_with(db, options).await;
    let sale = app.pending_sale("dead-join-").await;
    let _stays = RoomClient::join(&app.ws_url(&sale)).await.unwrap();
    let gone = RoomClient::join(&app.ws_url(&sale)).await.unwrap();
    let (token, ticket) = (gone.resume_token.clone(), gone.ticket);
    gone.leave().await;
    // Its grace runs out (the departure's deadline in the sale's slot passes).
    let departures = app.keys.sale(&sale).gone();
    floodgate_tests::eventually("the grace runs out", Duration::from_secs(20), || async {
        let deadline: Option<f64> = redis::cmd("ZSCORE")
            .arg(&departures)
            .arg(ticket)
            .query_async(&mut app.redis.clone())
            .await
            .unwrap();
        deadline.is_some_and(|d| d < floodgate_protocol::now_millis() as f64)
    })
    .await;
    let resumes = || async {
        let series = r#"floodgate_redis_script_duration_seconds_count{script="resume"}"#;
        app.metric(app.gateway_admin, series).await.unwrap_or(0.0)
    };
    let url = app.ws_url(&sale);
    let back = || async {
        let headers = [("floodgate-resume", token.as_str())];
        RoomClient::join_with(&url, &headers)
            .await
            .err()
            .map(|r| r.status)
    };
    assert_eq!(back().await, Some(410), "the first is told by its script");
    let before = resumes().await;
    for _ in 0..5 {
        assert_eq!(back().await, Some(410));
    }
    assert_eq!(resumes().await, before, "no script for a dead place");
}

/// On a sale that asks for nothing, a stranger's junk spends its address's joins; someone
/// behind the same address coming back to their place (a drain, a lost network) pays with the
/// place's own allowance and the address's returns, and gets in. Before, a place coming back
/// was charged to the address's joins: 429 `join_rate_limited`.
#[sqlx::test(migrations = "../migrations")]
async fn a_place_coming_back_is_not_spent_by_a_strangers_junk(db: sqlx::PgPool) {
    let app = TestApp::spawn_with(db, one_join_a_second()).await;
    let sale = app.pending_sale("back-").await;
    let person = RoomClient::join(&app.ws_url(&sale)).await.unwrap();
    let token = person.resume_token.clone();
    // The stranger's junk: joins with a made-up resume token.
    let mut codes = Vec::new();
    for i in 0..6 {
        let junk = format!("made-up-{i}");
        let headers = [("floodgate-resume", junk.as_str())];
        codes.push(RoomClient::refusal(&app.ws_url(&sale), &headers).await.1);
    }
    assert!(
        codes.iter().any(|c| c == "join_rate_limited"),
        "the junk spends the address's joins: {codes:?}"
    );
    drop(person);
    let headers = [("floodgate-resume", token.as_str())];
    RoomClient::join_with(&app.ws_url(&sale), &headers)
        .await
        .unwrap_or_else(|r| panic!("a person coming back: {r:?}"));
}

/// A stranger holding one genuine place sends its resume token with forged identity tokens
/// (the edge lets them past its ceiling: the resume token is sealed). Each identity's signature
/// is checked only within the place's own allowance (three at once, then one a second), so the
/// forgeries neither cost a check each nor spend the address's joins. Before, every copy was
/// checked, and each failure spent a join of the address: the person behind it was refused.
#[sqlx::test(migrations = "../migrations")]
async fn forged_identities_with_a_genuine_resume_token_are_checked_at_the_places_rate(
    db: sqlx::PgPool,
) {
    let options = TestOptions {
        joins_per_sec_per_ip: 5,
        ..TestOptions::default()
    };
    let app = TestApp::spawn_with(db, options).await;
    let sale = app.pending_sale("forged-").await;
    let stranger = RoomClient::join(&app.ws_url(&sale)).await.unwrap();
    let token = stranger.resume_token.clone();
    stranger.leave().await;
    let identity = floodgate_tests::with_a_wrong_signature(&app.identity("someone").await);
    let headers = [
        ("floodgate-resume", token.as_str()),
        ("floodgate-identity", identity.as_str()),
    ];
    let mut codes = Vec::new();
    for _ in 0..12 {
        codes.push(RoomClient::refusal(&app.ws_url(&sale), &headers).await.1);
    }
    let checked = codes.iter().filter(|c| *c == "identity_invalid").count();
    assert!(checked <= 3, "{codes:?}");
    RoomClient::join(&app.ws_url(&sale))
        .await
        .unwrap_or_else(|r| panic!("a new person behind the address: {r:?}"));
}

/// A place taken back runs its script in the sale's slot alone (a new place's join is
/// batched), and each place is held only to its own allowance: a stranger holding thousands of
/// places could send tens of thousands of scripts a second from one address. A gateway takes
/// back at most `FLOODGATE_RESUMES_PER_SEC` places a second (made 10 here), one address a tenth
/// of them: the stranger's eight places, taken back at once, are mostly refused 429
/// `join_rate_limited`, and a person on another network (another /24: a /24 takes one share)
/// takes theirs back. Before, every one of the stranger's was taken back.
#[sqlx::test(migrations = "../migrations")]
async fn one_address_takes_back_at_most_its_share_of_a_gateways_returns(db: sqlx::PgPool) {
    let options = TestOptions {
        resumes_per_sec: 10,
        ..TestOptions::default()
    };
    let app = TestApp::spawn_with(db, options).await;
    let sale = app.pending_sale("returns-").await;
    let person_at = "127.0.1.2".parse().ok();
    let person = RoomClient::join_from(&app.ws_url(&sale), person_at, &[])
        .await
        .unwrap();
    let person_token = person.resume_token.clone();
    person.leave().await;
    let mut tokens = Vec::new();
    for _ in 0..8 {
        let place = RoomClient::join(&app.ws_url(&sale)).await.unwrap();
        tokens.push(place.resume_token.clone());
        place.leave().await;
    }
    let mut back = Vec::new();
    let mut codes = Vec::new();
    for token in &tokens {
        match RoomClient::resume(&app.ws_url(&sale), token, &[]).await {
            Ok(client) => back.push(client),
            Err(refused) => codes.push(refused.body["error"].as_str().unwrap_or("").to_owned()),
        }
    }
    assert!(back.len() <= 3, "{} of 8 taken back: {codes:?}", back.len());
    assert!(codes.iter().all(|c| c == "join_rate_limited"), "{codes:?}");
    let protocols = format!("floodgate, floodgate-resume.{person_token}");
    let returned = RoomClient::join_from(
        &app.ws_url(&sale),
        person_at,
        &[("sec-websocket-protocol", &protocols)],
    )
    .await;
    assert!(returned.is_ok(), "the person: {:?}", returned.err());
}

/// A resume token the gateway cannot read as text (a byte past ASCII) is a bad token, not no
/// token: the edge counts such a join as a place coming back (not among the address's new
/// places' sockets), so taken for a new place it escaped the edge's caps on those. Refused 401
/// `resume_invalid` now; before, it took a new place.
#[sqlx::test(migrations = "../migrations")]
async fn an_unreadable_resume_token_is_refused_not_taken_for_a_new_place(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let sale = sale_with(&app, Door::default()).await;
    let url = format!("http://{}/ws?sale={sale}", app.gateway);
    let value = reqwest::header::HeaderValue::from_bytes(b"r2.1..\x80\x81.x").unwrap();
    let answer = reqwest::Client::new()
        .get(&url)
        .header("floodgate-resume", value)
        .send()
        .await
        .unwrap();
    let status = answer.status().as_u16();
    let body: serde_json::Value = answer.json().await.unwrap_or_default();
    assert_eq!(
        (status, body["error"].as_str()),
        (401, Some("resume_invalid"))
    );
}

/// Each return of a place runs a script and spends its address's share of the gateway's
/// returns: a place no buyer signed in to comes back 3 times at once, then once in 10 s (a lost
/// network or a drain comes back once), so a stranger's places coming back every second cannot
/// spend the share of the people behind its address. Before, a place came back once a second.
#[sqlx::test(migrations = "../migrations")]
async fn a_place_comes_back_three_times_at_once_then_once_in_ten_seconds(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let sale = sale_with(&app, Door::default()).await;
    let place = RoomClient::join(&app.ws_url(&sale)).await.unwrap();
    let token = place.resume_token.clone();
    place.leave().await;
    for _ in 0..3 {
        let back = RoomClient::resume(&app.ws_url(&sale), &token, &[]).await;
        back.expect("three at once").leave().await;
    }
    // Well past the second a person's join waits, well within the ten a place's return does.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let refused = RoomClient::resume(&app.ws_url(&sale), &token, &[])
        .await
        .err()
        .expect("a fourth return within ten seconds");
    assert_eq!(refused.status, 429, "{refused:?}");
    assert_eq!(refused.body["error"], "join_rate_limited");
}

/// On a sale that asks for a proof of work, a place coming back (no buyer signed in) spends its
/// address's allowance of returns too, as on a sale that asks for nothing: a stranger's solved
/// places, each coming back as often as its own allowance lets it, would otherwise spend the
/// whole gateway's budget of returns (each a script in the sale's slot) from ten addresses, and
/// everyone else's returns be refused 503 `resume_busy`. Here 40 places come back at once from
/// an address allowed 10 returns a second (20 at once): the rest are refused 429
/// `join_rate_limited`. Before, all 40 came back.
#[sqlx::test(migrations = "../migrations")]
async fn a_solved_places_returns_spend_its_addresss_allowance_of_returns(db: sqlx::PgPool) {
    let (app, sale) = with_a_proof_of_work(db).await;
    let tokens = solved_places_left(&app, &sale, 40).await;
    let url = app.ws_url(&sale);
    let returns = tokens
        .iter()
        .map(|token| RoomClient::resume(&url, token, &[]));
    let answers = futures::future::join_all(returns).await;
    let mut codes = Vec::new();
    let mut back = 0;
    for answer in answers {
        match answer {
            Ok(_) => back += 1,
            Err(refused) => codes.push(refused.body["error"].as_str().unwrap_or("").to_owned()),
        }
    }
    assert!(back < 30, "{back} of 40 came back at once: {codes:?}");
    assert!(back >= 20, "the address's burst of returns: {back}");
    assert!(codes.iter().all(|c| c == "join_rate_limited"), "{codes:?}");
}

/// A machine's places, each left and then taken back, are held to their address's cap of places
/// coming back (32 times its anonymous sessions, here 32): the 33rd is refused 429
/// `too_many_connections` however long it waits for its allowance of returns. Before, a place
/// coming back on a sale that asks for a proof of work counted against nothing of its address's,
/// and one address could fill every gateway with places of its own (a solved puzzle each).
#[sqlx::test(migrations = "../migrations")]
async fn an_addresss_places_coming_back_are_held_to_a_cap(db: sqlx::PgPool) {
    let (app, sale) = with_a_proof_of_work(db).await;
    let tokens = solved_places_left(&app, &sale, 40).await;
    let url = app.ws_url(&sale);
    let mut held = Vec::new();
    let mut refused = None;
    'places: for token in &tokens {
        loop {
            match RoomClient::resume(&url, token, &[]).await {
                Ok(back) => {
                    held.push(back);
                    break;
                }
                // The address's allowance of returns (10 a second): wait for the next.
                Err(r) if r.body["error"] == "join_rate_limited" => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(r) => {
                    refused = Some(r);
                    break 'places;
                }
            }
        }
    }
    assert_eq!(held.len(), 32, "the address's places coming back");
    let refused = refused.expect("the 33rd is refused");
    assert_eq!(
        (refused.status, refused.body["error"].as_str()),
        (429, Some("too_many_connections")),
        "{refused:?}"
    );
}

/// A made-up identity offered in a subprotocol line that is not plain ASCII is checked, and
/// refused, like any other: the edge reads such a line and counts the socket as a person's,
/// outside its address's caps. Before, the gateway dropped the line, and the join was a new
/// place that no cap of its address counted at the edge.
#[sqlx::test(migrations = "../migrations")]
async fn an_identity_in_a_subprotocol_line_past_ascii_is_still_checked(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let sale = sale_with(&app, Door::default()).await;
    // Written by hand: a WebSocket client library will not send a header that is not text.
    let offered = "Sec-WebSocket-Protocol: floodgate, floodgate-identity.j\u{fc}nk\r\n";
    let path = format!("/ws?sale={sale}");
    let answer =
        floodgate_tests::client::hand_written_join(app.gateway, None, &path, offered).await;
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    assert!(answer.contains("identity_malformed"), "{answer}");
}

/// Where the services trust no identity issuer, a join that shows an identity is refused 401
/// `identity_wrong_issuer`, and one without joins: before, the identity was ignored, and the
/// edge counted the socket as a person's, outside its address's caps, for a made-up token.
#[sqlx::test(migrations = "../migrations")]
async fn an_identity_where_no_issuer_is_trusted_is_refused(db: sqlx::PgPool) {
    let options = TestOptions {
        without_sign_in: true,
        ..TestOptions::default()
    };
    let app = TestApp::spawn_with(db, options).await;
    let sale = sale_with(&app, Door::default()).await;
    let shown = [("floodgate-identity", "made-up")];
    let (status, code) = RoomClient::refusal(&app.ws_url(&sale), &shown).await;
    assert_eq!((status, code.as_str()), (401, "identity_wrong_issuer"));
    assert!(RoomClient::join(&app.ws_url(&sale)).await.is_ok());
}
