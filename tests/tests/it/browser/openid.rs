//! Signing in by the standard (docs/protocol.md 1.12, "Signing in"): the page signs a buyer in
//! with OpenID Connect's authorization code flow with PKCE, `state` and `nonce`, against a real,
//! certified provider as much as against the sandbox's stand-in, and never takes a sign-in from
//! a link (login CSRF).

use floodgate_protocol::settings::{Door, IdentityRule};
use floodgate_tests::oidc::OidcProvider;
use floodgate_tests::IDENTITY_AUDIENCE;

use super::*;

fn signed_in_only() -> SaleSpec {
    SaleSpec {
        opens_in: Duration::from_millis(1_000),
        door: Door {
            identity: IdentityRule::Required,
            max_seats_per_buyer: Some(4),
            ..Door::default()
        },
        ..SaleSpec::default()
    }
}

#[sqlx::test(migrations = "../migrations")]
async fn a_buyer_signs_in_at_a_certified_openid_provider_by_the_code_flow_and_books(
    db: sqlx::PgPool,
) {
    let provider = OidcProvider::start("floodgate-page").await;
    let site = Site::new();
    let app = TestApp::spawn_with(
        db,
        TestOptions {
            identity_issuer: Some(provider.settings()),
            ..site.options()
        },
    )
    .await;
    provider.register_page(&home_url(&app)).await;
    let sale = unique("oidc-");
    app.create_sale(&sale, &signed_in_only()).await;
    site.publish(&app, &sale).await;
    app.admission(&sale, "pause").await;
    app.until_open(&sale).await;

    let mut node = Dialogue::start_with("signin.mjs", &[&page_url(&app, &sale), "oidc"]);
    let placed = node
        .report(
            Duration::from_secs(60),
            "the buyer signs in at the provider and joins in time",
        )
        .await;
    assert_eq!(placed["first"]["ticket"], 1, "{placed}");
    assert_eq!(
        placed["second"], placed["first"],
        "one place per buyer: {placed}"
    );

    // The booking service took the provider's ID token beside the pass.
    asha_books_and_pays(&app, &sale, node).await;
    drop(site);
}

/// What a stranger gets for themselves at the stand-in's sign-in: the address it sends their
/// browser back to, code and state included.
async fn strangers_callback(app: &TestApp) -> String {
    use base64::Engine as _;
    use sha2::Digest as _;
    let challenge = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(
        "the-strangers-own-verifier-0123456789-abcdefgh",
    ));
    let answer = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .post(format!("http://{}/authorize", app.sandbox))
        .form(&[
            ("response_type", "code"),
            ("client_id", IDENTITY_AUDIENCE),
            ("redirect_uri", &home_url(app)),
            ("scope", "openid"),
            ("state", "the-strangers-state"),
            ("nonce", "the-strangers-nonce"),
            ("code_challenge", &challenge),
            ("code_challenge_method", "S256"),
            ("name", "mallory"),
        ])
        .send()
        .await
        .unwrap();
    answer
        .headers()
        .get("location")
        .expect("the stand-in gives the stranger a code")
        .to_str()
        .unwrap()
        .to_owned()
}

fn assert_not_signed_in(found: &serde_json::Value) {
    assert!(
        found["stored"].is_null(),
        "a stranger's sign-in was kept: {found}"
    );
    assert!(
        found["shown"].is_null(),
        "the page shows a stranger signed in: {found}"
    );
    let address = found["address"].as_str().unwrap();
    assert!(
        !address.contains("id_token") && !address.contains("code="),
        "the page leaves the stranger's sign-in in its address: {found}"
    );
}

#[sqlx::test(migrations = "../migrations")]
async fn a_page_opened_with_a_strangers_sign_in_is_not_signed_in(db: sqlx::PgPool) {
    let (site, app, sale) = published_sale(db, "forged-", signed_in_only()).await;
    // A genuine token, for the stranger, in the link's fragment.
    let token = app.identity("mallory").await;
    let link = format!("{}#id_token={token}", page_url(&app, &sale));
    let found = script("forged-signin.mjs", vec![link]).await;
    assert_not_signed_in(&found[0]);

    // A genuine code and state the stranger got for themselves, in the link's query: this
    // browser never started that sign-in, so it redeems nothing.
    let found = script("forged-signin.mjs", vec![strangers_callback(&app).await]).await;
    assert_not_signed_in(&found[0]);
    drop(site);
}
