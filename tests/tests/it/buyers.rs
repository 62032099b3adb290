//! Who is buying (docs/protocol.md, "Buyers"): identity at the door, one place in line per
//! buyer, the pass bound to its buyer, the per-buyer seat limit, the buyer on the booking row and
//! on every event, and the bot check, against a real gateway, booking service, Redis, broker and
//! PostgreSQL, with identity tokens from the sandbox's sign-in stand-in (keys fetched over HTTP).
//! [`sessions`]: what docs/protocol.md 1.12 says of a buyer's several sessions and spent pass,
//! and of the stand-in's own API. [`resume`]: resume tokens bound to their ticket and buyer.
//! [`background`]: the sale's grace and the place answer, for apps in the background.
//! [`issuer_keys`]: how the issuer's key set is fetched. [`flood`]: the proof of work under a
//! join flood. [`code_flow`]: the stand-in's sign-in by the authorization code flow with PKCE.
//! [`passes`]: the pass bound to its buyer and the per-buyer limit; [`privacy`]: what is kept of
//! a buyer.

mod background;
mod code_flow;
mod flood;
mod issuer_keys;
mod passes;
mod privacy;
mod resume;
mod sessions;

use std::time::Duration;

use floodgate_platform::identity::{IssuedIdentity, IssuerKey};
use floodgate_protocol::challenge::{ProofOfWork, Puzzle};
use floodgate_protocol::events::Envelope;
use floodgate_protocol::settings::{ChallengeRule, Door, IdentityRule};
use floodgate_protocol::ws::ServerMessage;
use floodgate_tests::client::{Heard, RoomClient};
use floodgate_tests::{eventually, unique, SaleSpec, TestApp, IDENTITY_AUDIENCE};
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::Message as _;

fn door(identity: IdentityRule) -> Door {
    Door {
        identity,
        ..Door::default()
    }
}

/// A sale whose waiting room stays closed for the whole test (nobody is admitted).
async fn pending_sale(app: &TestApp, door: Door) -> String {
    app.pending_sale_with("buyers-", door).await
}

async fn join_as(app: &TestApp, sale: &str, identity: &str) -> RoomClient {
    RoomClient::join_with(&app.ws_url(sale), &[("floodgate-identity", identity)])
        .await
        .unwrap_or_else(|r| panic!("joining as a buyer: {r:?}"))
}

/// The refusal of a join with `headers` to `url`: its status and error code.
async fn refused(url: &str, headers: &[(&str, &str)]) -> (u16, String) {
    RoomClient::refusal(url, headers).await
}

#[sqlx::test(migrations = "../migrations")]
async fn one_buyer_from_three_connections_holds_one_ticket_and_two_buyers_hold_two(
    db: sqlx::PgPool,
) {
    let app = TestApp::spawn(db).await;
    let sale = pending_sale(&app, door(IdentityRule::Required)).await;
    let alice = app.identity("alice").await;
    let bob = app.identity("bob").await;

    // Three tabs opening at once, the third as a browser does (the token as a subprotocol).
    let url = app.ws_url(&sale);
    let protocols = format!("floodgate, floodgate-identity.{alice}");
    let browser = [("sec-websocket-protocol", protocols.as_str())];
    let (a, b, c) = tokio::join!(
        join_as(&app, &sale, &alice),
        join_as(&app, &sale, &alice),
        RoomClient::join_with(&url, &browser),
    );
    let c = c.expect("a browser's join");
    assert_eq!(
        (a.ticket, b.ticket),
        (c.ticket, c.ticket),
        "one place for alice"
    );
    let fresh = [a.resumed, b.resumed, c.resumed]
        .iter()
        .filter(|r| !**r)
        .count();
    assert_eq!(
        fresh, 1,
        "one connection took the ticket, the others took it back"
    );
    let other = join_as(&app, &sale, &bob).await;
    assert_ne!(other.ticket, a.ticket, "bob has a place of his own");

    // Two tickets were ever taken, and the pre-queue's lottery counts each buyer once.
    let keys = app.keys.sale(&sale);
    assert_eq!(app.redis_int(&keys.seq()).await, 2);
    assert_eq!(app.redis_int_cmd("LLEN", &keys.prequeue()).await, 2);
    // The buyers' records live outside the sale's slot.
    let record = app
        .keys
        .buyer(&sale, &floodgate_protocol::identity::BuyerId::new("alice"));
    assert!(!record.contains(&format!("{{s:{sale}}}")), "{record}");

    // A stranger is told to sign in.
    assert_eq!(refused(&url, &[]).await, (401, "identity_required".into()));
}

#[sqlx::test(migrations = "../migrations")]
async fn every_bad_identity_is_refused_with_its_own_code(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let sale = pending_sale(&app, door(IdentityRule::Required)).await;
    let url = app.ws_url(&sale);
    let as_header = |token: &str| vec![("floodgate-identity".to_owned(), token.to_owned())];
    let claims = IssuedIdentity::new(
        &format!("http://{}", app.sandbox),
        IDENTITY_AUDIENCE,
        "mallory",
        Duration::from_secs(300),
    );
    // Signed by a key that claims the stand-in's key id but is not the stand-in's.
    let forged = IssuerKey::generate("standin-1").sign(&claims);
    let unknown_kid = IssuerKey::generate("not-published").sign(&claims);
    let hs256 = jsonwebtoken::encode(
        &jsonwebtoken::Header {
            kid: Some("standin-1".into()),
            ..jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256)
        },
        &claims,
        &jsonwebtoken::EncodingKey::from_secret(b"anything"),
    )
    .unwrap();
    // Unsigned (`alg: none`): an algorithm never accepted, not a malformed token.
    let unsigned = {
        use base64::Engine as _;
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let header = serde_json::json!({ "alg": "none", "typ": "JWT", "kid": "standin-1" });
        let payload = serde_json::to_string(&claims).unwrap();
        format!(
            "{}.{}.",
            b64.encode(header.to_string()),
            b64.encode(payload)
        )
    };
    let expired = app
        .identity_with(&serde_json::json!({ "sub": "mallory", "expires_in_secs": -120 }))
        .await;
    let other_audience = app
        .identity_with(&serde_json::json!({ "sub": "mallory", "aud": "another-app" }))
        .await;
    let other_issuer = app
        .identity_with(&serde_json::json!({ "sub": "mallory", "iss": "https://evil.example" }))
        .await;
    for (token, code) in [
        (forged.as_str(), "identity_invalid"),
        (&unknown_kid, "identity_unknown_key"),
        (&hs256, "identity_algorithm"),
        (&unsigned, "identity_algorithm"),
        (&expired, "identity_expired"),
        (&other_audience, "identity_wrong_audience"),
        (&other_issuer, "identity_wrong_issuer"),
        ("not-a-jwt", "identity_malformed"),
    ] {
        let headers = as_header(token);
        let headers: Vec<(&str, &str)> = headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(refused(&url, &headers).await, (401, code.to_owned()));
    }
    // Nothing was taken for any of them.
    assert_eq!(app.redis_int(&app.keys.sale(&sale).seq()).await, 0);
}

#[sqlx::test(migrations = "../migrations")]
async fn a_rotated_signing_key_is_fetched_from_the_issuer(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let sale = pending_sale(&app, door(IdentityRule::Required)).await;
    let before = app.identity("alice").await;
    join_as(&app, &sale, &before).await;

    let kid = app.rotate_identity_key().await;
    let after = app.identity("bob").await;
    let header = jsonwebtoken::decode_header(&after).unwrap();
    assert_eq!(header.kid.as_deref(), Some(kid.as_str()));
    // The gateway has never seen this key: it fetches the issuer's keys again (at most every
    // couple of seconds) and then takes the token.
    let url = app.ws_url(&sale);
    eventually(
        "a token signed with the new key is taken",
        Duration::from_secs(15),
        || {
            let (url, after) = (url.clone(), after.clone());
            async move {
                RoomClient::join_with(&url, &[("floodgate-identity", &after)])
                    .await
                    .is_ok()
            }
        },
    )
    .await;
    // Tokens signed with the old key stay good until they expire.
    let again = join_as(&app, &sale, &before).await;
    assert!(again.resumed);
}

/// A sale open now that admits at once, requiring signed-in buyers.
async fn open_sale(app: &TestApp, door: Door, hold_ttl_secs: u32) -> String {
    let sale = unique("buyers-");
    let spec = SaleSpec {
        opens_in: Duration::from_secs(1),
        max_seats: 2,
        hold_ttl_secs,
        pools: vec![("p1".into(), 50)],
        door,
        ..SaleSpec::default()
    };
    app.create_sale(&sale, &spec).await;
    app.until_open(&sale).await;
    sale
}

/// Waits in line as `identity` until admitted: the admission token.
async fn admitted(app: &TestApp, sale: &str, identity: &str) -> String {
    let mut client = join_as(app, sale, identity).await;
    loop {
        match client.next(Duration::from_secs(20)).await {
            Heard::Message(ServerMessage::Admitted { token, .. }) => return token,
            Heard::Message(_) => continue,
            other => panic!("expected admission, got {other:?}"),
        }
    }
}

/// Every event of `sale` on the app's topic so far (read from the beginning).
async fn events_of(app: &TestApp, sale: &str, at_least: usize) -> Vec<Envelope> {
    let consumer: StreamConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", floodgate_tests::kafka_brokers())
        .set("group.id", unique("events-reader-"))
        .set("auto.offset.reset", "earliest")
        .create()
        .unwrap();
    consumer.subscribe(&[&app.topic]).unwrap();
    let mut events = Vec::new();
    while events.len() < at_least {
        let message = tokio::time::timeout(Duration::from_secs(30), consumer.recv())
            .await
            .expect("events arrive")
            .unwrap();
        let envelope = Envelope::from_json(message.payload().unwrap_or_default()).unwrap();
        if envelope.sale == sale {
            events.push(envelope);
        }
    }
    events
}

#[sqlx::test(migrations = "../migrations")]
async fn the_bot_check_at_the_door(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let pow = Door {
        challenge: ChallengeRule::Pow,
        pow_difficulty: 8,
        ..Door::default()
    };
    let sale = pending_sale(&app, pow).await;
    let other = pending_sale(&app, pow).await;
    let puzzle = |sale: String| {
        let app = &app;
        async move {
            let body = app
                .get_json(&format!("http://{}/v1/sales/{sale}/challenge", app.gateway))
                .await;
            serde_json::from_value::<Puzzle>(body).unwrap()
        }
    };
    let url = |answer: &str| format!("{}&challenge={answer}", app.ws_url(&sale));

    assert_eq!(
        refused(&app.ws_url(&sale), &[]).await,
        (403, "challenge_required".into())
    );
    let first = puzzle(sale.clone()).await;
    assert_eq!((first.kind.as_str(), first.difficulty), ("pow", 8));
    // The gateways' own puzzle key (derived from the signing key every gateway holds).
    let gateways_pow = app.signer.challenge_key();
    let now = floodgate_protocol::now_millis();
    let wrong = (0u64..)
        .map(|n| format!("{}~{n:x}", first.puzzle))
        .find(|a| gateways_pow.check(&sale, a, 8, now).is_err())
        .unwrap();
    assert_eq!(
        refused(&url(&wrong), &[]).await,
        (403, "challenge_failed".into())
    );
    let solved = ProofOfWork::solve(&first);
    let client = RoomClient::join(&url(&solved))
        .await
        .expect("a solved puzzle lets one in");
    assert!(client.ticket > 0);
    assert_eq!(
        refused(&url(&solved), &[]).await,
        (403, "challenge_reused".into())
    );
    let elsewhere = ProofOfWork::solve(&puzzle(other.clone()).await);
    assert_eq!(
        refused(&url(&elsewhere), &[]).await,
        (403, "challenge_failed".into())
    );

    // During an attack the operator raises the difficulty; easier puzzles are no longer enough.
    let easy = ProofOfWork::solve(&puzzle(sale.clone()).await);
    let path = format!("/admin/v1/sales/{sale}");
    let (status, body) = app
        .ops(
            reqwest::Method::PATCH,
            &path,
            &app.ops_token,
            Some(serde_json::json!({ "pow_difficulty": 12 })),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["door"]["pow_difficulty"], 12);
    eventually(
        "gateways ask for 12 bits",
        Duration::from_secs(10),
        || async { puzzle(sale.clone()).await.difficulty == 12 },
    )
    .await;
    assert_eq!(
        refused(&url(&easy), &[]).await,
        (403, "challenge_expired".into())
    );
    let (status, body) = app
        .ops(
            reqwest::Method::PATCH,
            &path,
            &app.ops_token,
            Some(serde_json::json!({ "pow_difficulty": 40 })),
        )
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (422, Some("invalid_difficulty"))
    );
}

#[sqlx::test(migrations = "../migrations")]
async fn a_buyer_whose_turn_came_and_went_joins_again_at_the_back(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let sale = unique("buyers-");
    let spec = SaleSpec {
        opens_in: Duration::from_millis(300),
        token_ttl_secs: 1,
        door: door(IdentityRule::Required),
        ..SaleSpec::default()
    };
    app.create_sale(&sale, &spec).await;
    app.until_open(&sale).await;
    let erin = app.identity("erin").await;
    let token = admitted(&app, &sale, &erin).await;
    let first = app.signer.verifier().verify(&token, 0).unwrap().ticket;
    // Until the admission expires the same place comes back; after it, a new one at the back.
    let url = app.ws_url(&sale);
    let again = eventually(
        "a new place once the turn has passed",
        Duration::from_secs(15),
        || {
            let (url, erin) = (url.clone(), erin.clone());
            async move {
                let client = RoomClient::join_with(&url, &[("floodgate-identity", &erin)])
                    .await
                    .ok()?;
                (client.ticket != first).then_some(client)
            }
        },
    )
    .await;
    assert!(!again.resumed, "a new ticket, not the old one taken back");
    assert!(again.ticket > first);
}
