//! The stand-in's sign-in by OpenID Connect's authorization code flow with PKCE (RFC 6749 4.1,
//! RFC 7636, OpenID Connect Core 3.1), the flow the page runs against any provider:
//!
//! 1. The page sends the browser to `GET /authorize` with its client id (the services'
//!    audience), its redirect URI (the page's `/` on a configured origin), a `state`, a `nonce`
//!    and the S256 challenge of a verifier only it knows. The stand-in asks for a name.
//! 2. `POST /authorize` sends the browser back to the redirect URI with a one-time `code`, the
//!    `state` and the issuer (`iss`, RFC 9207).
//! 3. The page redeems the code at `POST /token` with the verifier and gets the ID token, which
//!    carries the `nonce` ([`super::token`]). A code is good once, for a minute, with its own
//!    verifier only: a code that leaks through a link or a log is worth nothing to whoever
//!    finds it.
//!
//! Nothing is checked before the redirect URI is known to be registered, so an error never sends
//! a browser anywhere.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::{Form, Json, Router};
use base64::Engine as _;
use serde::Deserialize;
use serde_json::json;

use super::{subject, SignIn, MAX_NAME};

/// How long a code waits to be redeemed: the page redeems it as soon as the browser is back.
const CODE_LIFETIME: Duration = Duration::from_secs(60);
/// The most codes waiting at once, so asking for codes all day fills no memory.
const MAX_CODES: usize = 10_000;
/// The longest `state` or `nonce` taken (each comes back in a URL or a token).
const MAX_PARAM: usize = 512;

pub(super) fn routes() -> Router<SignIn> {
    Router::new()
        .route("/.well-known/openid-configuration", get(discovery))
        .route("/authorize", get(authorize_page).post(authorize))
}

/// A code given out and not yet redeemed: who signed in, for which page and which sign-in.
pub(super) struct Pending {
    pub(super) sub: String,
    pub(super) redirect_uri: String,
    pub(super) challenge: String,
    pub(super) nonce: Option<String>,
    expires: Instant,
}

/// The codes waiting to be redeemed, at most [`MAX_CODES`].
#[derive(Default)]
pub(super) struct Codes(HashMap<String, Pending>);

impl Codes {
    /// Keeps `pending` under `code`; false when full of codes still live.
    fn insert(&mut self, code: String, pending: Pending) -> bool {
        if self.0.len() >= MAX_CODES {
            let now = Instant::now();
            self.0.retain(|_, p| p.expires > now);
        }
        if self.0.len() >= MAX_CODES {
            return false;
        }
        self.0.insert(code, pending);
        true
    }

    /// The code's sign-in, if it is live. A code is spent by its first redemption, whatever
    /// the outcome, so a guessed verifier gets one try.
    pub(super) fn take(&mut self, code: &str) -> Option<Pending> {
        self.0.remove(code).filter(|p| p.expires > Instant::now())
    }
}

pub(super) fn oauth_error(status: StatusCode, error: &str, description: &str) -> Response {
    let body = json!({ "error": error, "error_description": description });
    (status, [(header::CACHE_CONTROL, "no-store")], Json(body)).into_response()
}

pub(super) fn invalid(description: &str) -> Response {
    oauth_error(StatusCode::BAD_REQUEST, "invalid_request", description)
}

async fn discovery(State(signin): State<SignIn>) -> Response {
    let issuer = &*signin.issuer;
    let document = json!({
        "issuer": issuer,
        "authorization_endpoint": format!("{issuer}/authorize"),
        "token_endpoint": format!("{issuer}/token"),
        "jwks_uri": format!("{issuer}/.well-known/jwks.json"),
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": ["authorization_code"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["EdDSA"],
        "scopes_supported": ["openid"],
        "token_endpoint_auth_methods_supported": ["none"],
        "code_challenge_methods_supported": ["S256"],
        "authorization_response_iss_parameter_supported": true,
    });
    // A public document the page reads from its own origin.
    (
        [
            (header::ACCESS_CONTROL_ALLOW_ORIGIN, "*"),
            (header::CACHE_CONTROL, "max-age=300"),
        ],
        Json(document),
    )
        .into_response()
}

/// The parameters of an authorize request; the sign-in form posts them back with a `name`.
#[derive(Deserialize)]
struct AuthorizeRequest {
    response_type: Option<String>,
    client_id: Option<String>,
    redirect_uri: Option<String>,
    scope: Option<String>,
    state: Option<String>,
    nonce: Option<String>,
    code_challenge: Option<String>,
    code_challenge_method: Option<String>,
    name: Option<String>,
}

/// An authorize request the stand-in will answer by sending the browser back.
struct Checked {
    redirect_uri: String,
    challenge: String,
}

impl SignIn {
    /// The redirect URIs registered for the page: each configured origin's `/`.
    fn registered(&self, redirect_uri: &str) -> bool {
        self.return_origins
            .iter()
            .any(|origin| redirect_uri.strip_prefix(origin.as_str()) == Some("/"))
    }

    /// The request, checked; what is wrong with it otherwise.
    fn check(&self, request: &AuthorizeRequest) -> Result<Checked, &'static str> {
        if request.client_id.as_deref() != Some(&self.audience) {
            return Err("client_id is not a client registered here");
        }
        let redirect_uri = request.redirect_uri.clone().unwrap_or_default();
        if !self.registered(&redirect_uri) {
            return Err("redirect_uri is not registered for this client");
        }
        if request.response_type.as_deref() != Some("code") {
            return Err("response_type is code: this sign-in runs the code flow only");
        }
        let scope = request.scope.as_deref().unwrap_or_default();
        if !scope.split(' ').any(|s| s == "openid") {
            return Err("scope must include openid");
        }
        let challenge = request.code_challenge.clone().unwrap_or_default();
        let pkce = request.code_challenge_method.as_deref() == Some("S256")
            && (43..=128).contains(&challenge.len())
            && challenge
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'));
        if !pkce {
            return Err("PKCE is required: code_challenge with code_challenge_method S256");
        }
        let long = |p: &Option<String>| p.as_ref().is_some_and(|p| p.len() > MAX_PARAM);
        if long(&request.state) || long(&request.nonce) {
            return Err("state and nonce are at most 512 characters");
        }
        Ok(Checked {
            redirect_uri,
            challenge,
        })
    }
}

async fn authorize_page(
    State(signin): State<SignIn>,
    query: Result<Query<AuthorizeRequest>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let Ok(Query(request)) = query else {
        return invalid("the authorize request's parameters cannot be read");
    };
    if let Err(wrong) = signin.check(&request) {
        return invalid(wrong);
    }
    let hidden = [
        ("response_type", &request.response_type),
        ("client_id", &request.client_id),
        ("redirect_uri", &request.redirect_uri),
        ("scope", &request.scope),
        ("state", &request.state),
        ("nonce", &request.nonce),
        ("code_challenge", &request.code_challenge),
        ("code_challenge_method", &request.code_challenge_method),
    ]
    .iter()
    .filter_map(|(name, value)| {
        let value = crate::web::html_escape(value.as_deref()?);
        Some(format!(
            r#"<input type="hidden" name="{name}" value="{value}">"#
        ))
    })
    .collect::<String>();
    Html(format!(
        r#"<!doctype html><html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Sign in (test mode)</title>
<style>body{{font-family:system-ui,sans-serif;max-width:24rem;margin:3rem auto;padding:0 1rem}}
.test{{background:#fde68a;padding:.5rem;border-radius:.25rem}}input,button{{font-size:1rem;padding:.5rem;width:100%;margin:.25rem 0}}</style>
</head><body><p class="test">Sandbox sign-in: test mode, no password is checked.</p>
<h1>Sign in</h1>
<form method="post" action="/authorize">
<label for="name">Your name</label>
<input id="name" name="name" required maxlength="{MAX_NAME}" autocomplete="username">
{hidden}
<button type="submit">Sign in</button>
</form></body></html>"#
    ))
    .into_response()
}

pub(super) fn random_token() -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(rand::random::<[u8; 32]>())
}

async fn authorize(
    State(signin): State<SignIn>,
    form: Result<Form<AuthorizeRequest>, axum::extract::rejection::FormRejection>,
) -> Response {
    let Ok(Form(request)) = form else {
        return invalid("the sign-in form cannot be read");
    };
    let checked = match signin.check(&request) {
        Ok(checked) => checked,
        Err(wrong) => return invalid(wrong),
    };
    let Some(sub) = subject(request.name.as_deref().unwrap_or_default()) else {
        return invalid("a name is 1 to 64 characters");
    };
    let code = random_token();
    let pending = Pending {
        sub: sub.to_owned(),
        redirect_uri: checked.redirect_uri.clone(),
        challenge: checked.challenge,
        nonce: request.nonce,
        expires: Instant::now() + CODE_LIFETIME,
    };
    if !signin
        .codes
        .lock()
        .expect("codes")
        .insert(code.clone(), pending)
    {
        return oauth_error(
            StatusCode::SERVICE_UNAVAILABLE,
            "temporarily_unavailable",
            "too many sign-ins waiting; try again shortly",
        );
    }
    let Ok(mut back) = reqwest::Url::parse(&checked.redirect_uri) else {
        return invalid("redirect_uri is not a URL");
    };
    {
        let mut query = back.query_pairs_mut();
        query.append_pair("code", &code);
        if let Some(state) = &request.state {
            query.append_pair("state", state);
        }
        query.append_pair("iss", &signin.issuer);
    }
    (
        StatusCode::SEE_OTHER,
        [(header::LOCATION, back.to_string())],
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signin() -> SignIn {
        SignIn::new(
            "http://127.0.0.1:8082",
            &super::super::SignInConfig {
                enabled: true,
                audience: "page".into(),
                return_origins: vec!["http://127.0.0.1:8080/".into()],
            },
            secrecy::SecretString::from("k".repeat(32)),
        )
    }

    #[test]
    fn only_the_registered_pages_root_is_a_redirect_uri() {
        let signin = signin();
        assert!(signin.registered("http://127.0.0.1:8080/"));
        for stranger in [
            "http://127.0.0.1:8080",
            "http://127.0.0.1:8080/?sale=x",
            "http://127.0.0.1:8080.evil.example/",
            "https://evil.example/",
            "http://127.0.0.1:8080/evil",
        ] {
            assert!(!signin.registered(stranger), "{stranger}");
        }
    }

    #[test]
    fn codes_are_bounded_and_spent_once() {
        let mut codes = Codes::default();
        let pending = |expires| Pending {
            sub: "a".into(),
            redirect_uri: "r".into(),
            challenge: "c".into(),
            nonce: None,
            expires,
        };
        let dead = Instant::now() - Duration::from_secs(1);
        for n in 0..MAX_CODES {
            assert!(codes.insert(format!("dead-{n}"), pending(dead)));
        }
        // Full of dead codes: they make room.
        let live = Instant::now() + CODE_LIFETIME;
        assert!(codes.insert("live".into(), pending(live)));
        assert_eq!(codes.0.len(), 1);
        assert!(codes.take("live").is_some());
        assert!(codes.take("live").is_none());
        for n in 0..MAX_CODES {
            codes.insert(format!("live-{n}"), pending(live));
        }
        assert!(!codes.insert("one-more".into(), pending(live)));
    }
}
