//! The issuer's key set: where it comes from, how it is fetched (https, never through a
//! redirect to plain http, never past a key set's size, errors that never carry the URL, which
//! may hold credentials), and the usable keys it holds.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use jsonwebtoken::jwk::{AlgorithmParameters, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey};

/// Where the issuer's public keys come from.
#[derive(Clone, Debug)]
pub enum KeySource {
    /// A JWKS document at this URL (the issuer's `jwks_uri`).
    Url(String),
    /// A JWKS document in this file (re-read when a token names a key it does not hold).
    File(PathBuf),
}

/// The keys an issuer publishes, by key id.
#[derive(Default)]
pub(super) struct KeyRing {
    pub(super) keys: HashMap<String, (DecodingKey, Option<Algorithm>)>,
}

impl KeyRing {
    /// The usable keys of a JWKS document: each with a key id, asymmetric, and (when it says
    /// which algorithm it is for) for one of `accepted`.
    pub(super) fn from_jwks(doc: &[u8], accepted: &[Algorithm]) -> Result<Self, String> {
        let set: JwkSet =
            serde_json::from_slice(doc).map_err(|e| format!("not a JWKS document: {e}"))?;
        let mut keys = HashMap::new();
        for jwk in &set.keys {
            let Some(kid) = jwk.common.key_id.clone() else {
                continue;
            };
            if matches!(jwk.algorithm, AlgorithmParameters::OctetKey(_)) {
                continue;
            }
            let alg = jwk
                .common
                .key_algorithm
                .and_then(|a| a.to_string().parse::<Algorithm>().ok());
            if alg.is_some_and(|a| !accepted.contains(&a)) {
                continue;
            }
            if let Ok(key) = DecodingKey::from_jwk(jwk) {
                keys.insert(kid, (key, alg));
            }
        }
        Ok(Self { keys })
    }
}

/// How long one fetch of the keys may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// The most of a key set read: real ones are a few KB; anything far past it is not a key set,
/// and reading it whole would let whoever answers for the issuer fill the memory.
const MAX_KEY_SET_BYTES: usize = 256 * 1024;
/// Redirects followed (each to https only: the keys decide who is who, and a plain-http hop
/// would let anyone on the path replace them).
const MAX_REDIRECTS: usize = 3;

/// The HTTP client key sets are fetched with: a timeout, and redirects to https only.
pub(super) fn client() -> Result<reqwest::Client, String> {
    crate::outbound::client()
        .timeout(FETCH_TIMEOUT)
        .redirect(reqwest::redirect::Policy::custom(|attempt| {
            if attempt.url().scheme() != "https" {
                attempt.error("the issuer's keys redirect to a plain-http URL")
            } else if attempt.previous().len() > MAX_REDIRECTS {
                attempt.error("the issuer's keys redirect too many times")
            } else {
                attempt.follow()
            }
        }))
        .build()
        .map_err(|e| e.to_string())
}

/// The key set at `url`, read up to [`MAX_KEY_SET_BYTES`]. Errors never carry the URL.
pub(super) async fn fetch(http: &reqwest::Client, url: &str) -> Result<Vec<u8>, String> {
    let quiet = |e: reqwest::Error| e.without_url().to_string();
    let mut response = http
        .get(url)
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
        .map_err(quiet)?;
    let too_big = || format!("the issuer's key set is larger than {MAX_KEY_SET_BYTES} bytes");
    if response
        .content_length()
        .is_some_and(|n| n > MAX_KEY_SET_BYTES as u64)
    {
        return Err(too_big());
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(quiet)? {
        if body.len() + chunk.len() > MAX_KEY_SET_BYTES {
            return Err(too_big());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}
