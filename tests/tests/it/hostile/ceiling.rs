//! The edge's ceiling on an address (`deploy/nginx/cdn.conf`, `floodgate_ceiling`) counts only
//! what the edge cannot prove is a person's own: a stranger's junk from a carrier's address
//! fills it, and the people behind that address still get in with what is theirs.

use floodgate_protocol::challenge::Puzzle;
use floodgate_protocol::settings::{ChallengeRule, Door};
use floodgate_tests::client::RoomClient;
use floodgate_tests::TestApp;

use super::edge::shipped_edge_with;

/// The shipped edge in front of `app` with its ceiling made 5 a minute.
async fn ceiling_of_five(app: &TestApp) -> floodgate_tests::edge::Edge {
    shipped_edge_with(
        app,
        &[
            (
                "zone=floodgate_ceiling:16m rate=5000r/s",
                "zone=floodgate_ceiling:16m rate=5r/m",
            ),
            (
                "zone=floodgate_ceiling burst=10000",
                "zone=floodgate_ceiling burst=5",
            ),
        ],
    )
    .await
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
    let ws = edge
        .url(&format!("/ws?sale={sale}"))
        .replacen("http", "ws", 1);
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
    let edge = shipped_edge_with(
        &app,
        &[
            (
                "        listen __LISTEN__;\n",
                "        listen __LISTEN__;\n        set_real_ip_from 127.0.0.1;\n        real_ip_header X-Real-IP;\n",
            ),
            (
                "zone=floodgate_ceiling:16m rate=5000r/s",
                "zone=floodgate_ceiling:16m rate=5r/m",
            ),
            (
                "zone=floodgate_ceiling burst=10000",
                "zone=floodgate_ceiling burst=5",
            ),
            (
                "zone=floodgate_pages:16m rate=1000r/s",
                "zone=floodgate_pages:16m rate=2r/m",
            ),
            (
                "zone=floodgate_pages burst=2000",
                "zone=floodgate_pages burst=4",
            ),
        ],
    )
    .await;
    let http = reqwest::Client::new();
    let place = edge.url(&format!("/v1/sales/{sale}/place"));
    let refused_at_the_edge = |answer: reqwest::Response| async move {
        answer.status() == 429 && answer.text().await.unwrap().contains("too_many_requests")
    };
    let (mut junk_refused, mut misses_refused) = (0, 0);
    for host in 1..=20 {
        let from = format!("2001:db8:0:7::{host:x}");
        let junk = http
            .get(&place)
            .header("x-real-ip", &from)
            .header("floodgate-resume", format!("r2.{host}..AAAA.{sale}"))
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
        .header("floodgate-resume", format!("r2.0..AAAA.{sale}"))
        .send()
        .await
        .unwrap();
    assert!(
        !refused_at_the_edge(next_64).await,
        "another /64 has its own"
    );
}
