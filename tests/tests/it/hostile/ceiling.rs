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
