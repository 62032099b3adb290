//! The door of a sale (docs/protocol.md 1.12): what it asks of a joining client, and the answers
//! a client gives: the proof of work's solution, and, for the demo's and the tests' sign-in
//! stand-in, an identity token.

use std::fmt::Display;

use floodgate_protocol::api::room::SaleSummary;
use floodgate_protocol::challenge::{ProofOfWork, Puzzle};
use floodgate_protocol::settings::{ChallengeRule, Door};

/// The sale's door, from its public figures on `gateway` (`host:port`).
pub async fn door(
    http: &reqwest::Client,
    gateway: impl Display,
    sale: &str,
) -> Result<Door, String> {
    let summary: SaleSummary = get_json(http, &format!("http://{gateway}/v1/sales/{sale}")).await?;
    Ok(summary.door)
}

/// An answer to the sale's bot check, if `door` asks for one: a fresh puzzle from `gateway`,
/// solved (each bit of difficulty doubles the work; 16 bits is about 65,000 hashes).
pub async fn answer(
    http: &reqwest::Client,
    gateway: impl Display,
    sale: &str,
    door: &Door,
) -> Result<Option<String>, String> {
    if door.challenge == ChallengeRule::None {
        return Ok(None);
    }
    let body: serde_json::Value =
        get_json(http, &format!("http://{gateway}/v1/sales/{sale}/challenge")).await?;
    if body["kind"] != "pow" {
        return Ok(None);
    }
    let puzzle: Puzzle = serde_json::from_value(body).map_err(|e| e.to_string())?;
    // Hashing is CPU work: off the runtime's threads.
    tokio::task::spawn_blocking(move || ProofOfWork::solve(&puzzle))
        .await
        .map(Some)
        .map_err(|e| e.to_string())
}

/// An identity token for `sub` from the sandbox's sign-in stand-in at `signin` (`host:port`):
/// what the operator's sign-in gives a signed-in person, for the demo and load tests.
pub async fn standin_identity(
    http: &reqwest::Client,
    signin: impl Display,
    sub: &str,
) -> Result<String, String> {
    let request = http
        .post(format!("http://{signin}/v1/identity/tokens"))
        .json(&serde_json::json!({ "sub": sub }));
    let answer: serde_json::Value = json(request).await?;
    answer["id_token"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("no id_token in {answer}"))
}

async fn get_json<T: serde::de::DeserializeOwned>(
    http: &reqwest::Client,
    url: &str,
) -> Result<T, String> {
    json(http.get(url)).await
}

/// The JSON body of a 2xx answer to `request`.
async fn json<T: serde::de::DeserializeOwned>(
    request: reqwest::RequestBuilder,
) -> Result<T, String> {
    request
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
        .map_err(|e| e.to_string())?
        .json()
        .await
        .map_err(|e| e.to_string())
}
