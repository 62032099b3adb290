//! The edge's ceiling on an address (`deploy/nginx/cdn.conf`, `floodgate_ceiling`) counts only
//! what the edge cannot prove is a person's own: a stranger's junk from a carrier's address
//! fills it, and the people behind that address still get in with what is theirs.

use floodgate_protocol::challenge::Puzzle;
use floodgate_protocol::settings::{ChallengeRule, Door};
use floodgate_tests::client::RoomClient;
use floodgate_tests::{SaleSpec, TestApp};

use super::edge::{refused_at_the_edge, shipped_edge, shipped_edge_with, shrunk};

/// The shipped edge in front of `app` with its ceiling made 5 a minute.
async fn ceiling_of_five(app: &TestApp) -> floodgate_tests::edge::Edge {
    shipped_edge_with(app, &shrunk("floodgate_ceiling", "5r/m", 5)).await
}

/// A new place on a sale that asks for a proof of work carries the puzzle's answer and the
/// answer's MD5, which the edge checks (`secure_link_md5`) with the puzzle's window against its
/// clock and the hash's leading zero bits against its floor: an answer that holds is proven
/// work, counted against itself and not against its address's ceiling. A stranger sending
/// made-up answers (free to make) from the people's address fills the ceiling, and a person
/// there with a puzzle solved still gets in; an answer whose proof does not hold is junk like
/// the rest. Before, every answer counted against the ceiling, and the person was refused 429
/// `too_many_requests` with the junk.
#[sqlx::test(migrations = "../migrations")]
async fn a_strangers_junk_answers_at_the_ceiling_do_not_refuse_its_peoples_solved_puzzles(
    db: sqlx::PgPool,
) {
    let app = TestApp::spawn(db).await;
    let door = Door {
        challenge: ChallengeRule::Pow,
        // The edge's floor: an easier puzzle's answers are counted as before.
        pow_difficulty: 16,
        ..Door::default()
    };
    let sale = app.pending_sale_with("edge-pow-", door).await;
    let edge = ceiling_of_five(&app).await;
    let ws = edge.ws_url(&sale);
    let puzzle: Puzzle = serde_json::from_value(
        app.get_json(&edge.url(&format!("/v1/sales/{sale}/challenge")))
            .await,
    )
    .unwrap();
    let answer = floodgate_protocol::challenge::ProofOfWork::solve(&puzzle);

    let made_up = format!("AAA{}", "x".repeat(19));
    let mut at_the_edge = 0;
    for i in 0..20 {
        let junk = format!("{}~{i:x}~{made_up}", puzzle.puzzle);
        let (status, code) = RoomClient::refusal(&format!("{ws}&challenge={junk}"), &[]).await;
        at_the_edge += usize::from(status == 429 && code == "too_many_requests");
    }
    assert!(
        at_the_edge >= 10,
        "the junk fills the ceiling: {at_the_edge} of 20 refused"
    );

    let person = RoomClient::join(&format!("{ws}&challenge={answer}")).await;
    assert!(
        person.is_ok(),
        "a person with a solved puzzle: {:?}",
        person.err()
    );

    // A puzzle of the hundred seconds before the edge's clock's (an answer begun as the clock
    // turned) is proven work too. Before, it was counted with the junk and refused 429. (At one
    // turn in a thousand three digits carry and the edge cannot tell: then this is not asked.)
    // Begun early enough in the clock's hundred seconds that it has not turned again by the time
    // the answer reaches the edge: a solve takes a good part of a second on a busy machine, and
    // an answer two hundreds old is junk to the edge, by design.
    let into = floodgate_protocol::now_millis().rem_euclid(100_000);
    if into > 90_000 {
        tokio::time::sleep(std::time::Duration::from_millis((100_100 - into) as u64)).await;
    }
    let now = floodgate_protocol::now_millis();
    if (now / 100_000) % 1_000 != 0 {
        let earlier = app.signer.challenge_key().issue(&sale, 16, now - 100_000);
        let answer = floodgate_protocol::challenge::ProofOfWork::solve(&earlier);
        let person = RoomClient::join(&format!("{ws}&challenge={answer}")).await;
        assert!(
            person.is_ok(),
            "a puzzle of the hundred seconds before: {:?}",
            person.err()
        );
    }

    // The same answer with its last character changed proves nothing: held like the junk.
    let mut tampered = answer.clone();
    let last = tampered.pop().unwrap();
    tampered.push(if last == 'A' { 'B' } else { 'A' });
    let (status, code) = RoomClient::refusal(&format!("{ws}&challenge={tampered}"), &[]).await;
    assert_eq!((status, code.as_str()), (429, "too_many_requests"));
}

/// One IPv6 host is routinely given a whole /64, and could take a fresh address per request:
/// the edge counts an IPv6 client by its /64, as the services do. The shipped edge behind a hop
/// that names the client (the realip module, as docs/deploy.md sets up behind a CDN), its
/// ceiling made 5 a minute and the pages' allowance 2 a minute: junk from twenty addresses of one
/// /64 is refused after the first few, on the services' paths and on pages the cache cannot
/// answer alike, while a client of the next /64 is not. Before, each address had a ceiling of
/// its own, and nothing was refused.
#[sqlx::test(migrations = "../migrations")]
async fn every_address_of_one_ipv6_64_shares_its_ceiling_at_the_edge(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let sale = app.pending_sale("edge-ipv6-").await;
    let mut changes = vec![(
        "        __REAL_IP__\n".to_owned(),
        "        set_real_ip_from 127.0.0.1;\n        real_ip_header X-Real-IP;\n".to_owned(),
    )];
    changes.extend(shrunk("floodgate_ceiling", "5r/m", 5));
    changes.extend(shrunk("floodgate_pages", "2r/m", 4));
    let edge = shipped_edge_with(&app, &changes).await;
    let http = reqwest::Client::new();
    let place = edge.url(&format!("/v1/sales/{sale}/place"));
    let (mut junk_refused, mut misses_refused) = (0, 0);
    for host in 1..=20 {
        let from = format!("2001:db8:0:7::{host:x}");
        let junk = http
            .get(&place)
            .header("x-real-ip", &from)
            .header("floodgate-resume", format!("r2.{host}..AAAA{host}.{sale}"))
            .send()
            .await
            .unwrap();
        junk_refused += usize::from(refused_at_the_edge(junk).await);
        let made_up = edge.url(&format!("/v1/sales/made-up-{host}/challenge"));
        let miss = http
            .get(&made_up)
            .header("x-real-ip", &from)
            .send()
            .await
            .unwrap();
        misses_refused += usize::from(refused_at_the_edge(miss).await);
    }
    assert!(junk_refused >= 10, "{junk_refused} of 20 junk refused");
    assert!(
        misses_refused >= 10,
        "{misses_refused} of 20 misses refused"
    );

    let next_64 = http
        .get(&place)
        .header("x-real-ip", "2001:db8:0:8::1")
        .header("floodgate-resume", format!("r2.0..BBBB.{sale}"))
        .send()
        .await
        .unwrap();
    assert!(
        !refused_at_the_edge(next_64).await,
        "another /64 has its own"
    );
}

/// The edge's ceiling on an address counts only what it cannot prove the services issued. The
/// services seal the resume tokens, passes and reservations' secrets they hand out
/// (`<credential>~<seal>`, platform::clients::seal); a stranger's junk credentials fill its
/// address's ceiling (the shipped edge with it made 5 a minute), and the person behind the same
/// address still asks after their place, reserves with their pass, reads their reservation and
/// comes back to their place on `/ws`, while more junk is still refused. Before, every request
/// of the address counted, and the person was refused 429 `too_many_requests` with the junk.
#[sqlx::test(migrations = "../migrations")]
async fn a_strangers_junk_at_the_ceiling_does_not_refuse_its_peoples_own_credentials(
    db: sqlx::PgPool,
) {
    use floodgate_client::booking::BookingClient;
    let app = TestApp::spawn(db).await;
    let sale = app.open_sale("edge-seal-", SaleSpec::default()).await;
    let mut person = RoomClient::join(&app.ws_url(&sale)).await.unwrap();
    let pass = person.admitted(std::time::Duration::from_secs(10)).await;
    let token = person.resume_token.clone();
    person.leave().await;
    for issued in [&token, &pass] {
        assert_eq!(
            floodgate_platform::clients::unsealed(issued).len() + 23,
            issued.len(),
            "sealed by the gateway: {issued}"
        );
    }

    let edge = ceiling_of_five(&app).await;
    let http = reqwest::Client::new();
    let place = edge.url(&format!("/v1/sales/{sale}/place"));
    let reservations = edge.url(&format!("/v1/sales/{sale}/reservations/p1-x"));
    let junk_seal = "A".repeat(22);
    let mut refused = 0;
    for i in 0..20 {
        let junk = http
            .get(&place)
            .header(
                "floodgate-resume",
                format!("r2.{i}..AAAA.{sale}~{junk_seal}"),
            )
            .send();
        let junk_secret = http
            .get(&reservations)
            .bearer_auth(format!("secret{i}~{junk_seal}"))
            .send();
        for answer in [junk.await.unwrap(), junk_secret.await.unwrap()] {
            if answer.status() == 429 && answer.text().await.unwrap().contains("too_many_requests")
            {
                refused += 1;
            }
        }
    }
    assert!(
        refused >= 30,
        "the junk fills the ceiling: {refused} of 40 refused"
    );

    let asked = http
        .get(&place)
        .header("floodgate-resume", &token)
        .send()
        .await
        .unwrap();
    assert_eq!(asked.status(), 200, "{}", asked.text().await.unwrap());
    let booking = BookingClient::new(http.clone(), edge.addr);
    let held = booking
        .reserve(&sale, &pass, &uuid::Uuid::new_v4().to_string(), "p1", 1)
        .await
        .expect("the person reserves with their pass");
    let read = booking
        .reservation(&sale, &held.reservation_id, &held.secret)
        .await;
    assert!(read.is_ok(), "the holder reads: {:?}", read.err());
    let ws = edge.ws_url(&sale);
    let back = RoomClient::resume(&ws, &token, &[]).await;
    assert!(back.is_ok(), "the person comes back: {:?}", back.err());

    // A genuine token made longer is no longer sealed: the ceiling still holds it.
    let mut more_junk = Vec::new();
    for _ in 0..5 {
        let answer = http
            .get(&place)
            .header("floodgate-resume", format!("{token}x"))
            .send()
            .await
            .unwrap();
        more_junk.push(answer.status().as_u16());
    }
    assert!(
        more_junk.contains(&429),
        "junk is still held: {more_junk:?}"
    );
}

/// Sealed credentials skip the ceiling for junk, but not every limit of their address: a seal
/// names no sale and does not expire, so a stranger could hoard thousands of genuine tokens and
/// send them all. Every request of an address to the services is held to a second, higher
/// ceiling (made 5 at once here), which what the first one refuses does not spend. Before,
/// sealed requests had no ceiling at all.
#[sqlx::test(migrations = "../migrations")]
async fn hoarded_sealed_tokens_still_meet_a_ceiling_of_their_address(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let sale = app.pending_sale("edge-hoard-").await;
    let mut tokens = Vec::new();
    for _ in 0..8 {
        let person = RoomClient::join(&app.ws_url(&sale)).await.unwrap();
        tokens.push(person.resume_token.clone());
        person.leave().await;
    }
    let edge = shipped_edge_with(&app, &shrunk("floodgate_everything_place", "1r/m", 5)).await;
    let http = reqwest::Client::new();
    let place = edge.url(&format!("/v1/sales/{sale}/place"));
    let mut at_the_edge = 0;
    for token in &tokens {
        let answer = http
            .get(&place)
            .header("floodgate-resume", token)
            .send()
            .await
            .unwrap();
        if answer.text().await.unwrap().contains("too_many_requests") {
            at_the_edge += 1;
        }
    }
    assert!(at_the_edge >= 2, "{at_the_edge} of 8 refused by the edge");
    // A ceiling of /place's own: the address's joins are not held to it, and a place comes back.
    let ws = edge.ws_url(&sale);
    let back = RoomClient::resume(&ws, &tokens[7], &[]).await;
    assert!(back.is_ok(), "a place comes back: {:?}", back.err());
}

/// A sealed credential gets from the edge no more than the services would take of it: a
/// place's standing three times at once, then once in 5 s. So a stranger who hoarded genuine
/// tokens needs thousands more of them to reach its address's last ceiling. Before, each
/// token had 10 a second (20 at once), 50 times what the gateways answer.
#[sqlx::test(migrations = "../migrations")]
async fn a_sealed_token_gets_no_more_from_the_edge_than_the_services_take(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let sale = app.pending_sale("edge-own-").await;
    let person = RoomClient::join(&app.ws_url(&sale)).await.unwrap();
    let token = person.resume_token.clone();
    person.leave().await;
    let edge = shipped_edge(&app).await;
    let http = reqwest::Client::new();
    let place = edge.url(&format!("/v1/sales/{sale}/place"));
    let mut statuses = Vec::new();
    for _ in 0..8 {
        let answer = http
            .get(&place)
            .header("floodgate-resume", &token)
            .send()
            .await
            .unwrap();
        statuses.push(answer.status().as_u16());
    }
    let answered = statuses.iter().filter(|s| **s == 200).count();
    assert!((3..=5).contains(&answered), "{statuses:?}");
}

/// `/ws` has two last ceilings per address: places coming back, and the rest. A stranger who
/// hoarded places' sealed tokens fills the first (made 5 here) coming back with them, and a
/// person behind the same address still takes a new place. Before, one ceiling held both, and
/// the new place was refused 429 `too_many_requests`.
#[sqlx::test(migrations = "../migrations")]
async fn a_hoard_of_places_coming_back_holds_back_no_new_place(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let sale = app.pending_sale("edge-returns-").await;
    let mut tokens = Vec::new();
    for _ in 0..8 {
        let place = RoomClient::join(&app.ws_url(&sale)).await.unwrap();
        tokens.push(place.resume_token.clone());
        place.leave().await;
    }
    let edge = shipped_edge_with(&app, &shrunk("floodgate_everything_returns", "1r/m", 5)).await;
    let ws = edge.ws_url(&sale);
    let mut at_the_edge = 0;
    for token in &tokens {
        if let Err(refused) = RoomClient::resume(&ws, token, &[]).await {
            at_the_edge += usize::from(refused.body["error"] == "too_many_requests");
        }
    }
    assert!(at_the_edge >= 2, "{at_the_edge} of 8 refused by the edge");
    let new_place = RoomClient::join(&ws).await;
    assert!(new_place.is_ok(), "a new place: {:?}", new_place.err());
}

/// nginx trims the spaces at the end of a header's value, but not a tab: a sealed pass sent
/// with a different run of blanks after it each time was still sealed to the edge (its pattern
/// allowed blanks at the end) and yet a new credential to it (counted by its last 48
/// characters), so one pass went past its own allowance and the ceiling both. A sealed
/// credential with anything after its seal is no longer sealed: the ceiling (made 5 a minute)
/// holds its variants.
#[sqlx::test(migrations = "../migrations")]
async fn blanks_after_a_sealed_pass_make_it_junk_not_a_new_credential(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let sale = app.open_sale("edge-blanks-", SaleSpec::default()).await;
    let mut person = RoomClient::join(&app.ws_url(&sale)).await.unwrap();
    let pass = person.admitted(std::time::Duration::from_secs(10)).await;
    person.leave().await;
    let edge = ceiling_of_five(&app).await;
    let http = reqwest::Client::new();
    let reservation = edge.url(&format!("/v1/sales/{sale}/reservations/p1-x"));
    let mut at_the_edge = 0;
    for i in 1..=30 {
        let blanks = format!("{}\t", " ".repeat(i));
        let value =
            reqwest::header::HeaderValue::from_str(&format!("Bearer {pass}{blanks}")).unwrap();
        let answer = http
            .get(&reservation)
            .header("authorization", value)
            .send()
            .await
            .unwrap();
        if answer.text().await.unwrap().contains("too_many_requests") {
            at_the_edge += 1;
        }
    }
    assert!(
        at_the_edge >= 20,
        "{at_the_edge} of 30 variants refused by the edge"
    );
}

/// A place taken back is outside its address's caps on new places' sockets (a stranger filling
/// those shuts no one out of their place), so its own cap is what bounds it: at the edge, two
/// sockets a resume token (a reload before the old socket's end is seen, a second tab). A
/// stranger's places could otherwise hold eight sockets each, and some thousands of solved
/// puzzles fill an edge pod for everyone. Before, a third socket of one place was let through.
#[sqlx::test(migrations = "../migrations")]
async fn a_place_taken_back_holds_two_sockets_at_the_edge(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let sale = app.pending_sale("edge-sockets-").await;
    let place = RoomClient::join(&app.ws_url(&sale)).await.unwrap();
    let token = place.resume_token.clone();
    place.leave().await;
    let edge = shipped_edge(&app).await;
    let ws = edge.ws_url(&sale);
    let mut held = Vec::new();
    for _ in 0..2 {
        held.push(
            RoomClient::resume(&ws, &token, &[])
                .await
                .expect("two sockets"),
        );
    }
    let third = RoomClient::resume(&ws, &token, &[])
        .await
        .err()
        .expect("a third socket of one place");
    assert_eq!(third.status, 429, "{third:?}");
    assert_eq!(third.body["error"], "too_many_requests");
}

/// The ceiling holds for an address's network too (an IPv4 /24, an IPv6 /48): with the network's
/// made 5 a minute, junk credentials sent from three addresses of one /24 (each well under its
/// own ceiling) are refused at the edge after the network's five, and another /24's are not.
/// Before, each address had its own ceiling and nothing counted a network's: a /48 could send
/// 65,536 times an address's junk, each a signature checked by a service.
#[sqlx::test(migrations = "../migrations")]
async fn the_ceiling_holds_for_an_addresss_network_too(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let sale = app
        .open_sale("edge-network-ceiling-", SaleSpec::default())
        .await;
    let edge = shipped_edge_with(&app, &shrunk("floodgate_network_ceiling", "5r/m", 5)).await;
    let url = edge.url(&format!("/v1/sales/{sale}/reservations/p1.x"));
    let at = |address: [u8; 4]| {
        let address = std::net::IpAddr::V4(std::net::Ipv4Addr::from(address));
        reqwest::Client::builder()
            .local_address(address)
            .build()
            .unwrap()
    };
    let mut refused = 0;
    for n in 0..12u8 {
        let junk = at([127, 0, 14, 1 + n % 3])
            .get(&url)
            .bearer_auth(format!("junk{n}"));
        refused += usize::from(refused_at_the_edge(junk.send().await.unwrap()).await);
    }
    assert!(
        refused >= 6,
        "the network's ceiling: {refused} of 12 refused"
    );
    let theirs = at([127, 0, 15, 1]).get(&url).bearer_auth("junk-elsewhere");
    assert!(
        !refused_at_the_edge(theirs.send().await.unwrap()).await,
        "another network's"
    );
}
