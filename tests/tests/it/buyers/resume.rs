//! A resume token is no skeleton key (docs/protocol.md 1.5): it takes back its own ticket, for
//! its own buyer, while that ticket lives; it never travels in a URL; and a dead ticket is never
//! traded for a new place by a join that skipped the door.

use std::time::Duration;

use floodgate_protocol::challenge::{ProofOfWork, Puzzle};
use floodgate_protocol::settings::{ChallengeRule, Door, IdentityRule};
use floodgate_tests::client::RoomClient;
use floodgate_tests::{eventually, TestApp, TestOptions};

use super::{door, join_as, pending_sale, refused};

/// What a resume of `token` at `sale`'s room with `headers` was refused with (panics if it
/// was not).
async fn resume_refused(
    app: &TestApp,
    sale: &str,
    token: &str,
    headers: &[(&str, &str)],
) -> (u16, String) {
    match RoomClient::resume(&app.ws_url(sale), token, headers).await {
        Ok(client) => panic!("resumed as ticket {}", client.ticket),
        Err(r) => (r.status, r.body["error"].as_str().unwrap_or("").to_owned()),
    }
}

async fn tickets_issued(app: &TestApp, sale: &str) -> i64 {
    app.redis_int(&app.keys.sale(sale).seq()).await
}

#[sqlx::test(migrations = "../migrations")]
async fn another_buyers_resume_token_is_refused(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let sale = pending_sale(&app, door(IdentityRule::Optional)).await;
    let ada = app.identity("ada").await;
    let bob = app.identity("bob").await;
    let ada_place = join_as(&app, &sale, &ada).await;
    let token = ada_place.resume_token.clone();

    // Bob holds Ada's token while she is still in line: refused, and nothing is taken for him.
    let as_bob = [("floodgate-identity", bob.as_str())];
    assert_eq!(
        resume_refused(&app, &sale, &token, &as_bob).await,
        (403, "resume_other_buyer".into())
    );
    // Nor may someone who shows no identity at all take her place.
    assert_eq!(
        resume_refused(&app, &sale, &token, &[]).await,
        (403, "resume_other_buyer".into())
    );
    assert_eq!(tickets_issued(&app, &sale).await, 1, "no ticket for Bob");
    // Ada herself takes it back, from another device.
    let as_ada = [("floodgate-identity", ada.as_str())];
    let again = RoomClient::resume(&app.ws_url(&sale), &token, &as_ada)
        .await
        .unwrap();
    assert_eq!((again.ticket, again.resumed), (ada_place.ticket, true));
}

#[sqlx::test(migrations = "../migrations")]
async fn a_place_taken_before_signing_in_becomes_the_buyers_once(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let sale = pending_sale(&app, door(IdentityRule::Optional)).await;
    let _ahead = RoomClient::join(&app.ws_url(&sale)).await.unwrap();
    let anonymous = RoomClient::join(&app.ws_url(&sale)).await.unwrap();
    let token = anonymous.resume_token.clone();
    // Back from the sign-in page: the same place, now Ada's, with a token bound to her.
    let ada = app.identity("ada").await;
    let as_ada = [("floodgate-identity", ada.as_str())];
    let signed_in = RoomClient::resume(&app.ws_url(&sale), &token, &as_ada)
        .await
        .unwrap();
    assert_eq!(
        (signed_in.ticket, signed_in.resumed),
        (anonymous.ticket, true)
    );
    assert_ne!(
        signed_in.resume_token, token,
        "the new token names its buyer"
    );
    // It is hers: a join from elsewhere with her identity alone takes it back.
    let elsewhere = join_as(&app, &sale, &ada).await;
    assert_eq!(elsewhere.ticket, anonymous.ticket);

    // The buyerless token it was taken with is spent: nobody else can take the place with it,
    // signed in or not.
    let bob = app.identity("bob").await;
    assert_eq!(
        resume_refused(&app, &sale, &token, &[("floodgate-identity", &bob)]).await,
        (403, "resume_other_buyer".into())
    );
    assert_eq!(
        resume_refused(&app, &sale, &token, &[]).await,
        (403, "resume_other_buyer".into())
    );
    assert_eq!(tickets_issued(&app, &sale).await, 2);
}

#[sqlx::test(migrations = "../migrations")]
async fn a_dead_ticket_is_never_traded_for_a_place_without_the_door(db: sqlx::PgPool) {
    let options = TestOptions {
        grace_ms: 300,
        ..TestOptions::default()
    };
    let app = TestApp::spawn_with(db, options).await;
    let pow = Door {
        identity: IdentityRule::Optional,
        challenge: ChallengeRule::Pow,
        pow_difficulty: 8,
        ..Door::default()
    };
    let sale = pending_sale(&app, pow).await;
    let solved = || async {
        let url = format!("http://{}/v1/sales/{sale}/challenge", app.gateway);
        let puzzle: Puzzle = serde_json::from_value(app.get_json(&url).await).unwrap();
        format!(
            "{}&challenge={}",
            app.ws_url(&sale),
            ProofOfWork::solve(&puzzle)
        )
    };
    let ada = app.identity("ada").await;
    let anonymous = RoomClient::join(&solved().await).await.unwrap();
    let ada_place = RoomClient::join_with(&solved().await, &[("floodgate-identity", &ada)])
        .await
        .unwrap();
    let tokens = [
        (anonymous.ticket, anonymous.resume_token.clone()),
        (ada_place.ticket, ada_place.resume_token.clone()),
    ];
    anonymous.leave().await;
    ada_place.leave().await;
    // Both graces run out (Redis' clock decides, as resume.lua does).
    let gone = app.keys.sale(&sale).gone();
    for (ticket, _) in &tokens {
        eventually(
            "the ticket's grace runs out",
            Duration::from_secs(10),
            || {
                let (app, gone) = (&app, &gone);
                async move {
                    let deadline: Option<f64> = redis::cmd("ZSCORE")
                        .arg(gone)
                        .arg(ticket)
                        .query_async(&mut app.redis.clone())
                        .await
                        .unwrap();
                    deadline.is_some_and(|d| (d as i64) < floodgate_protocol::now_millis())
                }
            },
        )
        .await;
    }

    let cara = app.identity("cara").await;
    let (anonymous_token, ada_token) = (&tokens[0].1, &tokens[1].1);
    // A dead token is no ticket to a new place: not for whoever holds it, signed in or not, and
    // not for its own buyer either. A new place is taken through the door (the puzzle).
    for (token, headers) in [
        (anonymous_token, vec![]),
        (anonymous_token, vec![("floodgate-identity", cara.as_str())]),
        (ada_token, vec![("floodgate-identity", ada.as_str())]),
    ] {
        assert_eq!(
            resume_refused(&app, &sale, token, &headers).await,
            (410, "ticket_expired".into())
        );
    }
    assert_eq!(tickets_issued(&app, &sale).await, 2, "no place was made");
    let back = RoomClient::join_with(&solved().await, &[("floodgate-identity", &ada)])
        .await
        .expect("through the door, a new place");
    assert!(back.ticket > tokens[1].0 && !back.resumed);
}

#[sqlx::test(migrations = "../migrations")]
async fn the_resume_token_travels_outside_the_url(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let sale = pending_sale(&app, door(IdentityRule::Optional)).await;
    let mine = RoomClient::join(&app.ws_url(&sale)).await.unwrap();
    assert!(
        !mine.resume_token.contains(':'),
        "a subprotocol value is an RFC 6455 token: {}",
        mine.resume_token
    );
    // In a URL it would land in every proxy's and CDN's log: refused, and nothing taken.
    let in_url = format!("{}&resume={}", app.ws_url(&sale), mine.resume_token);
    assert_eq!(refused(&in_url, &[]).await, (400, "resume_in_url".into()));
    // As a subprotocol (browsers), or in the Floodgate-Resume header (apps): the same place.
    let back = RoomClient::resume(&app.ws_url(&sale), &mine.resume_token, &[])
        .await
        .unwrap();
    assert_eq!((back.ticket, back.resumed), (mine.ticket, true));
    let by_header = RoomClient::join_with(
        &app.ws_url(&sale),
        &[("floodgate-resume", &mine.resume_token)],
    )
    .await
    .unwrap();
    assert_eq!((by_header.ticket, by_header.resumed), (mine.ticket, true));
    assert_eq!(tickets_issued(&app, &sale).await, 1);
}

#[sqlx::test(migrations = "../migrations")]
async fn a_place_taken_by_its_buyer_gives_the_session_it_left_no_pass(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let sale = floodgate_tests::unique("buyers-");
    let spec = floodgate_tests::SaleSpec {
        opens_in: Duration::from_millis(500),
        pools: vec![("p1".into(), 10)],
        ..floodgate_tests::SaleSpec::default()
    };
    app.create_sale(&sale, &spec).await;
    app.admission(&sale, "pause").await;
    // Someone joins before signing in, then signs in on another device with the same place's
    // token: the place is Ada's now, and the first session is left behind, still connected.
    let mut left_behind = RoomClient::join(&app.ws_url(&sale)).await.unwrap();
    let ada = app.identity("ada").await;
    let as_ada = [("floodgate-identity", ada.as_str())];
    let mut hers = RoomClient::resume(&app.ws_url(&sale), &left_behind.resume_token, &as_ada)
        .await
        .unwrap();
    assert_eq!(hers.ticket, left_behind.ticket);
    app.until_open(&sale).await;
    app.admission(&sale, "resume").await;
    // Ada is admitted with a pass naming her; the session she left gets no pass of its own
    // (an anonymous one would book her place without her identity).
    let pass = hers.admitted(Duration::from_secs(15)).await;
    let claims = app.signer.verifier().verify(&pass, 0).unwrap();
    assert_eq!(claims.buyer.as_deref(), Some("ada"));
    match left_behind.outcome(Duration::from_secs(15)).await {
        floodgate_tests::client::Heard::Closed(4410, reason) => {
            assert!(reason.contains("buyer"), "{reason}");
        }
        other => panic!("the session left behind heard {other:?}"),
    }
}
