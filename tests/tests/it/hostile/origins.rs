//! The `Origin` check (platform::origins): a WebSocket is not held back by CORS, so without it
//! any web site could run a sale's line through its visitors' browsers. A present, foreign
//! `Origin` is refused with 403 `origin_forbidden` before a ticket is taken or a token read; no
//! `Origin` (an app) is let through.

use floodgate_tests::{unique, TestApp, TestOptions};
use serde_json::Value;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Error as WsError;

/// Joins `sale` with `origin` (none: as an app does): `Ok` with the socket, or the refusal's
/// status and code.
async fn join_from(app: &TestApp, sale: &str, origin: Option<&str>) -> Result<(), (u16, String)> {
    let mut request = app.ws_url(sale).into_client_request().unwrap();
    if let Some(origin) = origin {
        request
            .headers_mut()
            .insert("origin", origin.parse().unwrap());
    }
    match tokio_tungstenite::connect_async(request).await {
        Ok(_) => Ok(()),
        Err(WsError::Http(response)) => {
            let body: Value =
                serde_json::from_slice(response.body().as_deref().unwrap_or_default())
                    .unwrap_or_default();
            Err((
                response.status().as_u16(),
                body["error"].as_str().unwrap_or_default().to_owned(),
            ))
        }
        Err(e) => panic!("the join failed outright: {e}"),
    }
}

/// POSTs a reservation to `base` (the booking service, or the gateway that passes it on) from
/// a page at `origin`; the status and code.
async fn reserve_from(
    app: &TestApp,
    base: std::net::SocketAddr,
    sale: &str,
    token: &str,
    origin: Option<&str>,
) -> (u16, Value) {
    let mut request = app
        .http
        .post(format!("http://{base}/v1/sales/{sale}/reservations"))
        .bearer_auth(token)
        .header("idempotency-key", unique("k-"))
        .json(&serde_json::json!({ "pool": "p1", "seats": 1 }));
    if let Some(origin) = origin {
        request = request.header("origin", origin);
    }
    let res = request.send().await.unwrap();
    (res.status().as_u16(), res.json().await.unwrap_or_default())
}

const FOREIGN: &str = "https://elsewhere.example";

#[sqlx::test(migrations = "../migrations")]
async fn another_sites_page_can_neither_join_nor_book(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let sale = app.pending_sale("origin-").await;
    let forbidden = (403, "origin_forbidden".to_owned());

    // The page the gateway serves itself, and an app with no Origin, join.
    let own = format!("http://{}", app.gateway);
    assert_eq!(join_from(&app, &sale, Some(&own)).await, Ok(()));
    assert_eq!(join_from(&app, &sale, None).await, Ok(()));
    // Another site's page is refused before a ticket is taken: two were issued, not three.
    assert_eq!(
        join_from(&app, &sale, Some(FOREIGN)).await,
        Err(forbidden.clone())
    );
    assert_eq!(
        join_from(&app, &sale, Some("null")).await,
        Err(forbidden.clone())
    );
    assert_eq!(app.redis_int(&app.keys.sale(&sale).seq()).await, 2);

    // Booking from it is refused too, on the booking service and through the gateway, before
    // the token is spent: the same token then books from the sale's own page.
    let token = app.token(&sale, 1, 1, 60_000);
    for base in [app.booking, app.gateway] {
        let (status, body) = reserve_from(&app, base, &sale, &token, Some(FOREIGN)).await;
        assert_eq!(
            (status, body["error"].as_str()),
            (403, Some("origin_forbidden")),
            "{base}"
        );
    }
    let (status, body) = reserve_from(&app, app.gateway, &sale, &token, Some(&own)).await;
    assert_eq!(status, 201, "{body}");
}

/// With the setting, exactly the listed origins: the service's own host no longer counts (a
/// name that merely resolves to it is not the site).
#[sqlx::test(migrations = "../migrations")]
async fn a_deployment_names_the_origins_it_serves(db: sqlx::PgPool) {
    let site = "https://tickets.example.com";
    let app = TestApp::spawn_with(
        db,
        TestOptions {
            allowed_origins: vec![site.into(), "https://m.tickets.example.com".into()],
            ..TestOptions::default()
        },
    )
    .await;
    let sale = app.pending_sale("origin-").await;
    assert_eq!(join_from(&app, &sale, Some(site)).await, Ok(()));
    assert_eq!(
        join_from(&app, &sale, Some("https://m.tickets.example.com")).await,
        Ok(())
    );
    let own = format!("http://{}", app.gateway);
    assert_eq!(
        join_from(&app, &sale, Some(&own)).await,
        Err((403, "origin_forbidden".to_owned()))
    );
    let token = app.token(&sale, 1, 1, 60_000);
    let (status, _) = reserve_from(&app, app.booking, &sale, &token, Some(&own)).await;
    assert_eq!(status, 403);
    let (status, body) = reserve_from(&app, app.booking, &sale, &token, Some(site)).await;
    assert_eq!(status, 201, "{body}");
}

/// Another site's page that sends its visitors' joins malformed (a nonce that is no nonce, a
/// made-up resume token) is refused for its origin, and spends nothing of their address: the
/// people behind it (a carrier's address, thousands of them) still join from the sale's own
/// page. Before, a bad join's query was read first, and each charged the address's allowance
/// (one join a second here) before the origin was looked at.
#[sqlx::test(migrations = "../migrations")]
async fn another_sites_bad_joins_spend_nothing_of_their_visitors_address(db: sqlx::PgPool) {
    let app = TestApp::spawn_with(
        db,
        TestOptions {
            joins_per_sec_per_ip: 1,
            ..TestOptions::default()
        },
    )
    .await;
    let sale = app.pending_sale("origin-").await;
    let bad_nonce = format!("{}&nonce=zz", app.ws_url(&sale));
    let foreign = [("origin", FOREIGN)];
    let made_up = [("origin", FOREIGN), ("floodgate-resume", "made-up")];
    for _ in 0..5 {
        for (url, headers) in [
            (&bad_nonce, &foreign[..]),
            (&app.ws_url(&sale), &made_up[..]),
        ] {
            let refused = floodgate_tests::client::RoomClient::refusal(url, headers).await;
            assert_eq!(refused, (403, "origin_forbidden".to_owned()));
        }
    }
    let own = format!("http://{}", app.gateway);
    assert_eq!(join_from(&app, &sale, Some(&own)).await, Ok(()));
}
