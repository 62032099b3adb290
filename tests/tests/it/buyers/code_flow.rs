//! The sign-in stand-in speaks OpenID Connect's authorization code flow with PKCE, as the
//! operator's real provider does (docs/protocol.md 1.12, "Signing in"): a discovery document, an
//! authorize endpoint that sends the browser back to a registered page with a code, and a token
//! endpoint that redeems the code, once, for the verifier it was made for. Nothing hands out an
//! ID token in a URL.

use base64::Engine as _;
use reqwest::redirect::Policy;
use sha2::Digest as _;

use super::*;

const VERIFIER: &str = "the-code-verifier-of-this-test-0123456789-abcdef";

fn challenge(verifier: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(verifier))
}

/// The authorize request's parameters for `page`, with the buyer's `name` (the stand-in's
/// sign-in form posts them all back).
fn authorize(page: &str, state: &str, name: &str) -> Vec<(&'static str, String)> {
    vec![
        ("response_type", "code".into()),
        ("client_id", IDENTITY_AUDIENCE.into()),
        ("redirect_uri", page.into()),
        ("scope", "openid".into()),
        ("state", state.into()),
        ("nonce", format!("nonce-of-{state}")),
        ("code_challenge", challenge(VERIFIER)),
        ("code_challenge_method", "S256".into()),
        ("name", name.into()),
    ]
}

/// Signs `name` in at the stand-in; the code it sends the browser back with.
async fn code_for(http: &reqwest::Client, issuer: &str, page: &str, state: &str) -> String {
    let answer = http
        .post(format!("{issuer}/authorize"))
        .form(&authorize(page, state, "mallory"))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 303, "{:?}", answer.text().await);
    let location = answer.headers()["location"].to_str().unwrap().to_owned();
    let back = reqwest::Url::parse(&location).unwrap();
    assert!(location.starts_with(page), "{location}");
    let param = |k: &str| {
        back.query_pairs()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.into_owned())
    };
    assert_eq!(param("state").as_deref(), Some(state), "{location}");
    assert_eq!(param("iss").as_deref(), Some(issuer), "{location}");
    param("code").expect("a code")
}

async fn redeem(
    http: &reqwest::Client,
    issuer: &str,
    page: &str,
    code: &str,
    verifier: &str,
) -> reqwest::Response {
    http.post(format!("{issuer}/token"))
        .header("origin", page.trim_end_matches('/'))
        .form(&[
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", page),
            ("client_id", IDENTITY_AUDIENCE),
            ("code_verifier", verifier),
        ])
        .send()
        .await
        .unwrap()
}

#[sqlx::test(migrations = "../migrations")]
async fn the_stand_in_signs_in_by_the_code_flow_with_pkce_and_no_other_way(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let issuer = format!("http://{}", app.sandbox);
    let page = format!("http://{}/", app.gateway);
    let http = reqwest::Client::builder()
        .redirect(Policy::none())
        .build()
        .unwrap();

    let discovery = app
        .get_json(&format!("{issuer}/.well-known/openid-configuration"))
        .await;
    assert_eq!(discovery["issuer"], issuer.as_str());
    assert_eq!(
        discovery["authorization_endpoint"],
        format!("{issuer}/authorize")
    );
    assert_eq!(discovery["token_endpoint"], format!("{issuer}/token"));
    assert_eq!(
        discovery["jwks_uri"],
        format!("{issuer}/.well-known/jwks.json")
    );
    assert_eq!(
        discovery["response_types_supported"],
        serde_json::json!(["code"])
    );
    assert_eq!(
        discovery["code_challenge_methods_supported"],
        serde_json::json!(["S256"])
    );

    // The sign-in form, for a registered page only, and only with PKCE.
    let form = http
        .get(format!("{issuer}/authorize"))
        .query(&authorize(&page, "s1", "")[..8])
        .send()
        .await
        .unwrap();
    assert_eq!(form.status(), 200);
    assert!(form.text().await.unwrap().contains(r#"id="name""#));
    let mut elsewhere = authorize("https://evil.example/", "s1", "mallory");
    let stranger = http
        .post(format!("{issuer}/authorize"))
        .form(&elsewhere)
        .send()
        .await
        .unwrap();
    assert_eq!(stranger.status(), 400);
    assert!(stranger.headers().get("location").is_none());
    elsewhere = authorize(&page, "s1", "mallory");
    elsewhere.retain(|(k, _)| !k.starts_with("code_challenge"));
    let no_pkce = http
        .post(format!("{issuer}/authorize"))
        .form(&elsewhere)
        .send()
        .await
        .unwrap();
    assert_eq!(no_pkce.status(), 400);

    // A code is redeemed once, with the verifier it was made for, from the page's origin.
    let code = code_for(&http, &issuer, &page, "s2").await;
    let wrong = redeem(
        &http,
        &issuer,
        &page,
        &code,
        "another-verifier-entirely-0123456789-abcdef",
    )
    .await;
    assert_eq!(wrong.status(), 400);
    let wrong: serde_json::Value = wrong.json().await.unwrap();
    assert_eq!(wrong["error"], "invalid_grant");
    let again = redeem(&http, &issuer, &page, &code, VERIFIER).await;
    assert_eq!(
        again.status(),
        400,
        "a code is spent by its first redemption"
    );

    let code = code_for(&http, &issuer, &page, "s3").await;
    let answer = redeem(&http, &issuer, &page, &code, VERIFIER).await;
    assert_eq!(answer.status(), 200);
    assert_eq!(
        answer.headers()["access-control-allow-origin"],
        page.trim_end_matches('/')
    );
    assert_eq!(answer.headers()["cache-control"], "no-store");
    let tokens: serde_json::Value = answer.json().await.unwrap();
    assert_eq!(tokens["token_type"], "Bearer");
    let id_token = tokens["id_token"].as_str().unwrap();
    let claims: serde_json::Value = serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(id_token.split('.').nth(1).unwrap())
            .unwrap(),
    )
    .unwrap();
    assert_eq!(claims["nonce"], "nonce-of-s3");
    assert_eq!(claims["aud"], IDENTITY_AUDIENCE);
    assert_eq!(claims["sub"], "mallory");
    let replay = redeem(&http, &issuer, &page, &code, VERIFIER).await;
    assert_eq!(replay.status(), 400, "a code is good once");

    // The ID token is what the door takes.
    let sale = pending_sale(&app, door(IdentityRule::Required)).await;
    let client = join_as(&app, &sale, id_token).await;
    assert_eq!(client.ticket, 1);
}
