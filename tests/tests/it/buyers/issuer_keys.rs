//! Fetching the identity issuer's keys (docs/runbook.md, "Buyers"): over https (plain http only
//! to a loopback issuer), never following a redirect to plain http, never reading more than a
//! key set can be, and never writing the URL, which may carry credentials, to the log.

use std::time::Duration;

use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use floodgate_platform::identity::{IdentityArgs, IssuedIdentity, IssuerKey};
use floodgate_protocol::identity::IdentityError;
use floodgate_tests::{binary, eventually, unique};

const AUDIENCE: &str = "floodgate-test";

/// An issuer on loopback that serves its key set at `/jwks`, the same behind a redirect to
/// plain http at `/moved`, and padded past any real key set's size at `/padded`.
async fn issuer(key: &IssuerKey) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let jwks = IssuerKey::jwks(&[key]).to_string();
    let padded = format!("{jwks}{}", " ".repeat(2 * 1024 * 1024));
    let moved_to = format!("{base}/jwks");
    let app = axum::Router::new()
        .route("/jwks", get(move || async move { jwks }))
        .route("/padded", get(move || async move { padded }))
        .route(
            "/moved",
            get(move || async move {
                (
                    axum::http::StatusCode::FOUND,
                    [(header::LOCATION, moved_to)],
                )
                    .into_response()
            }),
        );
    tokio::spawn(async move { axum::serve(listener, app).await });
    base
}

fn args(issuer: &str, jwks_url: &str) -> IdentityArgs {
    IdentityArgs {
        identity_issuer: Some(issuer.into()),
        identity_audience: Some(AUDIENCE.into()),
        identity_jwks_url: Some(jwks_url.into()),
        identity_jwks_file: None,
        identity_jwks_allow_http: false,
        identity_algorithms: "EdDSA".into(),
        identity_leeway: Duration::from_secs(30),
        buyer_id: "subject".into(),
        buyer_id_key: None,
    }
}

#[tokio::test]
async fn a_redirect_to_plain_http_or_an_oversized_key_set_is_refused() {
    let key = IssuerKey::generate("k1");
    let base = issuer(&key).await;
    let claims = IssuedIdentity::new(&base, AUDIENCE, "ada", Duration::from_secs(300));
    let token = key.sign(&claims);
    // The issuer's own key set, fetched directly: Ada is who she says.
    let direct = args(&base, &format!("{base}/jwks"))
        .verifier()
        .await
        .unwrap();
    let buyer = direct.unwrap().verify(&token).await.expect("the keys load");
    assert_eq!(buyer.as_str(), "ada");
    // The same keys behind a redirect to plain http, or padded to 2 MiB: not loaded, so no
    // identity can be checked (503 identity_unavailable at the door).
    for path in ["/moved", "/padded"] {
        let verifier = args(&base, &format!("{base}{path}"))
            .verifier()
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            verifier.verify(&token).await.err(),
            Some(IdentityError::Unavailable),
            "{path}"
        );
    }
}

#[tokio::test]
async fn the_key_sets_url_is_https_and_never_logged() {
    // Plain http to a host that is not this one: refused before anything is fetched.
    let refused = args("https://login.example", "http://login.example/jwks")
        .verifier()
        .await
        .err()
        .expect("refused");
    assert!(refused.contains("https"), "{refused}");
    assert!(!refused.contains("login.example/jwks"), "{refused}");

    // A URL with credentials in it, to an issuer that does not answer: the gateway says it
    // cannot fetch the keys, and names the setting, not the URL.
    let closed = floodgate_tests::gateways::free_port();
    let url = format!("http://fetcher:pa55word@{closed}/jwks?key=s3cr3t");
    let log = std::env::temp_dir().join(unique("floodgate-jwks-log-"));
    let out = std::fs::File::create(&log).unwrap();
    let signer = floodgate_protocol::token::TokenSigner::generate("k");
    let child = std::process::Command::new(binary("floodgate-gateway"))
        .arg("serve")
        // The level a deployment runs at.
        .env("RUST_LOG", "info")
        .env("FLOODGATE_GATEWAY_LISTEN", "127.0.0.1:0")
        .env("FLOODGATE_GATEWAY_ADMIN_LISTEN", "127.0.0.1:0")
        .envs(floodgate_tests::redis_env())
        .env("FLOODGATE_REDIS_PREFIX", unique("jwks-"))
        .env("FLOODGATE_TOKEN_KEY_ID", signer.kid())
        .env("FLOODGATE_TOKEN_SIGNING_KEY", signer.seed_base64())
        .env("FLOODGATE_IDENTITY_ISSUER", "https://login.example")
        .env("FLOODGATE_IDENTITY_AUDIENCE", AUDIENCE)
        .env("FLOODGATE_IDENTITY_JWKS_URL", &url)
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .unwrap();
    let mut child = floodgate_tests::services::Stopped(child);
    let said = eventually(
        "the fetch fails and is logged",
        Duration::from_secs(20),
        || {
            let log = &log;
            async move {
                let said = std::fs::read_to_string(log).unwrap_or_default();
                said.contains("could not be fetched").then_some(said)
            }
        },
    )
    .await;
    let _ = child.0.kill();
    let _ = std::fs::remove_file(&log);
    for private in ["pa55word", "s3cr3t", &closed.to_string()] {
        assert!(!said.contains(private), "the log holds {private}: {said}");
    }
    assert!(said.contains("FLOODGATE_IDENTITY_JWKS_URL"), "{said}");
}
