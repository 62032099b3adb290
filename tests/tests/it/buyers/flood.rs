//! The proof of work under a join flood (docs/protocol.md 1.12): it rises by itself while joins
//! come faster than the gateways' threshold, one bit per doubling, never past its ceiling, and
//! falls back once the flood is over.

use std::time::Duration;

use floodgate_protocol::challenge::{ProofOfWork, Puzzle};
use floodgate_protocol::settings::{ChallengeRule, Door};
use floodgate_tests::client::RoomClient;
use floodgate_tests::{eventually, TestApp, TestOptions};

use super::pending_sale;

#[sqlx::test(migrations = "../migrations")]
async fn the_proof_of_work_rises_under_a_join_flood_and_falls_after_it(db: sqlx::PgPool) {
    let options = TestOptions {
        pow_rise_above: 4.0,
        pow_ceiling: 9,
        ..TestOptions::default()
    };
    let app = TestApp::spawn_with(db, options).await;
    let pow = Door {
        challenge: ChallengeRule::Pow,
        pow_difficulty: 6,
        ..Door::default()
    };
    let sale = pending_sale(&app, pow).await;
    let puzzle = || async {
        let url = format!("http://{}/v1/sales/{}/challenge", app.gateway, sale);
        serde_json::from_value::<Puzzle>(app.get_json(&url).await).unwrap()
    };
    assert_eq!(puzzle().await.difficulty, 6, "no flood: the sale's own");

    // A flood: every join answers the puzzle it was just given, at whatever it has risen to.
    let mut seen = Vec::new();
    let mut joined = Vec::new();
    for _ in 0..1_000 {
        let given = puzzle().await;
        seen.push(given.difficulty);
        let url = format!(
            "{}&challenge={}",
            app.ws_url(&sale),
            ProofOfWork::solve(&given)
        );
        let client = RoomClient::join(&url).await.expect("a solved puzzle joins");
        joined.push(client);
        if given.difficulty == 9 {
            break;
        }
    }
    assert!(
        seen.iter().any(|d| *d > 6),
        "the difficulty never rose: {seen:?}"
    );
    assert!(seen.iter().all(|d| *d <= 9), "past the ceiling: {seen:?}");

    // The flood is over: the difficulty falls back to the sale's own.
    drop(joined);
    eventually(
        "the difficulty falls back",
        Duration::from_secs(20),
        || async { puzzle().await.difficulty == 6 },
    )
    .await;
}
