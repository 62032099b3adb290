//! The sign-in stand-in: a mode of the sandbox (`floodgate-sandbox --signin`) that
//! plays the operator's own sign-in for the demo and the tests, so both exercise the real
//! verification path (a JWKS fetched over HTTP, EdDSA signatures with key ids, `iss`, `aud`,
//! `exp`) and the page's real sign-in (OpenID Connect's authorization code flow with PKCE). It
//! checks no password: anyone may sign in as anyone. Never run a real sale with it.
//!
//! - `GET /.well-known/openid-configuration`, `GET|POST /authorize`, `POST /token`: the code flow
//!   ([`flow`], [`token`]), for the page registered at each of the configured origins' `/`.
//! - `GET /.well-known/jwks.json`: the published keys (every key ever used by this run).
//! - `POST /v1/identity/tokens` `{"sub": "alice"}`: a token as JSON (scripts, the load generator).
//!   Like a provider's test cards, `aud`, `iss` and `expires_in_secs` (negative: already expired)
//!   may be set, so the tests can present tokens that are genuine yet wrong.
//! - `POST /v1/identity/rotate` (with the sandbox's API key): a new signing key, published beside
//!   the old ones, signs every token from now on.

mod flow;
mod token;

use std::sync::{Arc, RwLock};
use std::time::Duration;

use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use floodgate_platform::identity::{IssuedIdentity, IssuerKey};
use serde::Deserialize;
use serde_json::json;

/// How long a stand-in identity token lives: an hour, like a typical ID token.
const TOKEN_LIFETIME: Duration = Duration::from_secs(3600);
/// The longest name the stand-in signs in.
const MAX_NAME: usize = 64;

/// The stand-in's settings (part of the sandbox's).
#[derive(Clone, Debug, clap::Args)]
pub struct SignInConfig {
    /// Also play the operator's sign-in (identity tokens for the demo and the tests).
    #[arg(long = "signin", env = "FLOODGATE_SANDBOX_SIGNIN")]
    pub enabled: bool,
    /// The audience its tokens are issued for (the services' FLOODGATE_IDENTITY_AUDIENCE).
    #[arg(
        long = "signin-audience",
        env = "FLOODGATE_IDENTITY_AUDIENCE",
        default_value = "floodgate-demo"
    )]
    pub audience: String,
    /// The origins of the page registered with the stand-in, comma-separated: each one's `/` is
    /// a redirect URI the sign-in may send a browser back to, and its token endpoint answers
    /// that origin's requests (CORS).
    #[arg(
        long = "signin-return-origins",
        env = "FLOODGATE_SANDBOX_SIGNIN_RETURN_ORIGINS",
        value_delimiter = ',',
        default_value = "http://127.0.0.1:8080"
    )]
    pub return_origins: Vec<String>,
}

/// The stand-in issuer.
#[derive(Clone)]
pub struct SignIn {
    issuer: Arc<str>,
    audience: Arc<str>,
    return_origins: Arc<[String]>,
    /// The codes given out and not yet redeemed.
    codes: Arc<std::sync::Mutex<flow::Codes>>,
    /// Every key of this run, the newest (the one that signs) last.
    keys: Arc<RwLock<Vec<Arc<IssuerKey>>>>,
    api_key: Arc<secrecy::SecretString>,
}

impl SignIn {
    /// A stand-in issuing as `issuer` (the sandbox's public URL), with one fresh key.
    pub fn new(issuer: &str, config: &SignInConfig, api_key: secrecy::SecretString) -> Self {
        Self {
            issuer: Arc::from(issuer.trim_end_matches('/')),
            audience: Arc::from(config.audience.as_str()),
            return_origins: config
                .return_origins
                .iter()
                .map(|o| o.trim_end_matches('/').to_owned())
                .collect(),
            codes: Arc::default(),
            keys: Arc::new(RwLock::new(vec![Arc::new(IssuerKey::generate(key_id(1)))])),
            api_key: Arc::new(api_key),
        }
    }

    pub fn router(self) -> Router {
        Router::new()
            .route("/.well-known/jwks.json", get(jwks))
            .merge(flow::routes())
            .merge(token::routes())
            .route("/v1/identity/tokens", post(issue))
            .route("/v1/identity/rotate", post(rotate))
            .with_state(self)
    }

    fn sign_claims(&self, claims: &IssuedIdentity) -> String {
        let key = self.keys.read().expect("keys").last().cloned();
        key.expect("the stand-in always has a key").sign(claims)
    }
}

fn key_id(n: usize) -> String {
    format!("standin-{n}")
}

fn refusal(status: StatusCode, code: &str, message: &str) -> Response {
    (status, Json(json!({ "error": code, "message": message }))).into_response()
}

/// A name as the stand-in signs it in: trimmed, 1 to [`MAX_NAME`] characters, no control
/// characters.
fn subject(name: &str) -> Option<&str> {
    let name = name.trim();
    let fine =
        !name.is_empty() && name.chars().count() <= MAX_NAME && !name.chars().any(char::is_control);
    fine.then_some(name)
}

async fn jwks(State(signin): State<SignIn>) -> Response {
    let keys = signin.keys.read().expect("keys").clone();
    let refs: Vec<&IssuerKey> = keys.iter().map(AsRef::as_ref).collect();
    (
        [(header::CACHE_CONTROL, "max-age=60")],
        Json(IssuerKey::jwks(&refs)),
    )
        .into_response()
}

#[derive(Deserialize)]
struct TokenRequest {
    sub: String,
    aud: Option<String>,
    iss: Option<String>,
    expires_in_secs: Option<i64>,
}

async fn issue(
    State(signin): State<SignIn>,
    body: Result<Json<TokenRequest>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let Ok(Json(request)) = body else {
        return refusal(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_request",
            "send {\"sub\": \"<a name of 1 to 64 characters>\"}",
        );
    };
    let Some(sub) = subject(&request.sub) else {
        return refusal(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_request",
            "sub is a name of 1 to 64 characters",
        );
    };
    let mut claims = IssuedIdentity::new(&signin.issuer, &signin.audience, sub, TOKEN_LIFETIME);
    if let Some(aud) = request.aud {
        claims.aud = aud;
    }
    if let Some(iss) = request.iss {
        claims.iss = iss;
    }
    if let Some(secs) = request.expires_in_secs {
        claims.exp = claims.iat.saturating_add_signed(secs);
    }
    Json(json!({ "id_token": signin.sign_claims(&claims), "token_type": "Bearer" })).into_response()
}

async fn rotate(State(signin): State<SignIn>, headers: HeaderMap) -> Response {
    if !crate::web::holds_key(&headers, &signin.api_key) {
        return refusal(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "present the sandbox's API key",
        );
    }
    let mut keys = signin.keys.write().expect("keys");
    let key = Arc::new(IssuerKey::generate(key_id(keys.len() + 1)));
    let kid = key.kid().to_owned();
    keys.push(key);
    Json(json!({ "kid": kid })).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        assert_eq!(subject("  alice "), Some("alice"));
        assert_eq!(subject(""), None);
        assert_eq!(subject(&"a".repeat(65)), None);
        assert_eq!(subject("a\nb"), None);
    }
}
