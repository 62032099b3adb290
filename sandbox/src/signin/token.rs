//! The stand-in's token endpoint, `POST /token`: a code from [`super::flow`] redeemed, once, with
//! the PKCE verifier it was made for, for the ID token (carrying the sign-in's `nonce`), with CORS
//! for the registered page's origin.

use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Form, Json};
use base64::Engine as _;
use floodgate_platform::identity::IssuedIdentity;
use serde::Deserialize;
use serde_json::json;
use sha2::Digest as _;

use super::flow::{invalid, oauth_error, random_token};
use super::{SignIn, TOKEN_LIFETIME};

pub(super) fn routes() -> axum::Router<SignIn> {
    axum::Router::new().route("/token", axum::routing::post(token).options(preflight))
}

#[derive(Deserialize)]
struct TokenRequest {
    grant_type: Option<String>,
    code: Option<String>,
    redirect_uri: Option<String>,
    client_id: Option<String>,
    code_verifier: Option<String>,
}

/// The CORS headers for a request from `headers`' origin, if it is the page's.
fn cors(signin: &SignIn, headers: &HeaderMap) -> Vec<(header::HeaderName, HeaderValue)> {
    let origin = headers.get(header::ORIGIN).and_then(|o| o.to_str().ok());
    let allowed = origin.filter(|o| signin.return_origins.iter().any(|r| r == o));
    let mut out = vec![(header::VARY, HeaderValue::from_static("origin"))];
    if let Some(value) = allowed.and_then(|o| HeaderValue::from_str(o).ok()) {
        out.push((header::ACCESS_CONTROL_ALLOW_ORIGIN, value));
    }
    out
}

async fn preflight(State(signin): State<SignIn>, headers: HeaderMap) -> Response {
    let mut response = StatusCode::NO_CONTENT.into_response();
    let out = response.headers_mut();
    for (name, value) in cors(&signin, &headers) {
        out.insert(name, value);
    }
    out.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("POST"),
    );
    out.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static("content-type, accept"),
    );
    out.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static("600"),
    );
    response
}

async fn token(
    State(signin): State<SignIn>,
    headers: HeaderMap,
    form: Result<Form<TokenRequest>, axum::extract::rejection::FormRejection>,
) -> Response {
    let mut response = redeem(&signin, form.ok().map(|Form(f)| f));
    for (name, value) in cors(&signin, &headers) {
        response.headers_mut().insert(name, value);
    }
    response
}

fn redeem(signin: &SignIn, request: Option<TokenRequest>) -> Response {
    let Some(request) = request else {
        return invalid("send grant_type, code, redirect_uri, client_id and code_verifier");
    };
    if request.grant_type.as_deref() != Some("authorization_code") {
        return oauth_error(
            StatusCode::BAD_REQUEST,
            "unsupported_grant_type",
            "grant_type is authorization_code",
        );
    }
    let code = request.code.unwrap_or_default();
    let Some(pending) = signin.codes.lock().expect("codes").take(&code) else {
        return invalid_grant("the code is unknown, spent or expired");
    };
    if request.client_id.as_deref() != Some(&signin.audience) {
        return invalid_grant("the code was issued to another client");
    }
    if request.redirect_uri.as_deref() != Some(&pending.redirect_uri) {
        return invalid_grant("redirect_uri is not the one the code was issued for");
    }
    let verifier = request.code_verifier.unwrap_or_default();
    let computed = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(sha2::Sha256::digest(verifier.as_bytes()));
    if !floodgate_protocol::same_secret(computed.as_bytes(), pending.challenge.as_bytes()) {
        return invalid_grant("code_verifier does not match the code's challenge");
    }
    let mut claims = IssuedIdentity::new(
        &signin.issuer,
        &signin.audience,
        &pending.sub,
        TOKEN_LIFETIME,
    );
    claims.nonce = pending.nonce;
    let body = json!({
        // Floodgate takes the ID token; this access token opens nothing and is given only
        // because a token response carries one.
        "access_token": random_token(),
        "token_type": "Bearer",
        "expires_in": TOKEN_LIFETIME.as_secs(),
        "scope": "openid",
        "id_token": signin.sign_claims(&claims),
    });
    (
        [
            (header::CACHE_CONTROL, "no-store"),
            (header::PRAGMA, "no-cache"),
        ],
        Json(body),
    )
        .into_response()
}

fn invalid_grant(description: &str) -> Response {
    oauth_error(StatusCode::BAD_REQUEST, "invalid_grant", description)
}
