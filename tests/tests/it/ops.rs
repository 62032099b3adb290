//! The ops API: live figures, and the controls an operator turns during the rush, observed in
//! what the waiting room actually does.

use std::time::Duration;

use floodgate_protocol::ws::ServerMessage;
use floodgate_tests::{unique, SaleSpec, TestApp};
use futures::StreamExt;
use serde_json::json;
use tokio_tungstenite::tungstenite::Message;

#[sqlx::test(migrations = "../migrations")]
async fn the_ops_api_needs_its_token(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let sale = unique("ops-");
    app.create_sale(&sale, &SaleSpec::default()).await;
    let path = format!("/admin/v1/sales/{sale}");
    let (status, body) = app.ops(reqwest::Method::GET, &path, "wrong", None).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (401, Some("ops_token_invalid"))
    );
    let (status, body) = app
        .ops(reqwest::Method::POST, &format!("{path}/open-now"), "", None)
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (401, Some("ops_token_invalid"))
    );
    let (status, _) = app
        .ops(reqwest::Method::GET, &path, &app.ops_token, None)
        .await;
    assert_eq!(status, 200);
    let (status, body) = app
        .ops(
            reqwest::Method::GET,
            "/admin/v1/sales/nope",
            &app.ops_token,
            None,
        )
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (404, Some("unknown_sale"))
    );
    // A path whose sale is not an id (not UTF-8, a space) is the same JSON 404 on every ops
    // route, never a framework's plain-text rejection.
    for bad in ["%FF", "a%20b"] {
        for (method, suffix) in [
            (reqwest::Method::GET, ""),
            (reqwest::Method::POST, "/pause"),
            (reqwest::Method::GET, "/audit"),
        ] {
            let (status, body) = app
                .ops(
                    method.clone(),
                    &format!("/admin/v1/sales/{bad}{suffix}"),
                    &app.ops_token,
                    None,
                )
                .await;
            assert_eq!(
                (status, body["error"].as_str()),
                (404, Some("unknown_sale")),
                "{method} {bad}{suffix}"
            );
        }
    }
}

#[sqlx::test(migrations = "../migrations")]
async fn pause_open_now_rate_and_resume_take_effect_in_the_waiting_room(db: sqlx::PgPool) {
    let app = TestApp::spawn(db.clone()).await;
    let sale = unique("ops-");
    // Opens in an hour: only an operator can open it now.
    app.create_sale(
        &sale,
        &SaleSpec {
            opens_in: Duration::from_secs(3600),
            admission_rate: 50.0,
            ..SaleSpec::default()
        },
    )
    .await;
    let path = format!("/admin/v1/sales/{sale}");
    let mut clients = Vec::new();
    for _ in 0..3 {
        clients.push(
            tokio_tungstenite::connect_async(app.ws_url(&sale))
                .await
                .unwrap()
                .0,
        );
    }
    let (status, figures) = app
        .ops(reqwest::Method::GET, &path, &app.ops_token, None)
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        (
            figures["tickets_issued"].as_u64(),
            figures["waiting"].as_u64()
        ),
        (Some(3), Some(3))
    );
    assert_eq!(
        (figures["open"].as_bool(), figures["paused"].as_bool()),
        (Some(false), Some(false))
    );
    assert_eq!(figures["pools"][0]["available"], 10);

    // Pause, then open: the sale is open but nobody is let in.
    let (status, figures) = app
        .ops(
            reqwest::Method::POST,
            &format!("{path}/pause"),
            &app.ops_token,
            None,
        )
        .await;
    assert_eq!((status, figures["paused"].as_bool()), (200, Some(true)));
    let (status, figures) = app
        .ops(
            reqwest::Method::POST,
            &format!("{path}/open-now"),
            &app.ops_token,
            None,
        )
        .await;
    assert_eq!((status, figures["open"].as_bool()), (200, Some(true)));
    // Ten gateway ticks at 50 admissions a second would admit all three if the pause were ignored.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (_, figures) = app
        .ops(reqwest::Method::GET, &path, &app.ops_token, None)
        .await;
    assert_eq!(figures["frontier"], 0, "paused: nobody admitted");

    // A new rate, written to Redis and back to the catalog.
    let (status, figures) = app
        .ops(
            reqwest::Method::PATCH,
            &path,
            &app.ops_token,
            Some(json!({"admission_rate": 20.0, "active_cap": 7})),
        )
        .await;
    assert_eq!(
        (
            status,
            figures["admission_rate"].as_f64(),
            figures["active_cap"].as_u64()
        ),
        (200, Some(20.0), Some(7))
    );
    let (rate, cap, paused): (f64, i32, bool) =
        sqlx::query_as("select admission_rate, active_cap, paused from sales where id = $1")
            .bind(&sale)
            .fetch_one(&db)
            .await
            .unwrap();
    assert_eq!((rate, cap, paused), (20.0, 7, true));
    let (status, body) = app
        .ops(
            reqwest::Method::PATCH,
            &path,
            &app.ops_token,
            Some(json!({"admission_rate": -1})),
        )
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (422, Some("invalid_rate"))
    );

    // Resume: everyone is admitted, and each client is pushed its token.
    let (status, _) = app
        .ops(
            reqwest::Method::POST,
            &format!("{path}/resume"),
            &app.ops_token,
            None,
        )
        .await;
    assert_eq!(status, 200);
    for ws in &mut clients {
        loop {
            let frame = tokio::time::timeout(Duration::from_secs(10), ws.next())
                .await
                .expect("admitted in time");
            let text = match frame {
                Some(Ok(Message::Text(text))) => text,
                // A heartbeat's ping may come at any moment of the wait (a session's first one
                // within the heartbeat, whenever its group's turn is).
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
                other => panic!("socket ended before admission: {other:?}"),
            };
            if let ServerMessage::Admitted { .. } = serde_json::from_str(&text).unwrap() {
                break;
            }
        }
    }
    let (_, figures) = app
        .ops(reqwest::Method::GET, &path, &app.ops_token, None)
        .await;
    assert_eq!(
        (figures["frontier"].as_u64(), figures["waiting"].as_u64()),
        (Some(3), Some(0))
    );
}

#[sqlx::test(migrations = "../migrations")]
async fn the_ops_console_is_served_by_the_admin_listener_only(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let page = app
        .http
        .get(format!("http://{}/admin/console", app.admin))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let headers = page.headers().clone();
    assert!(headers["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/html"));
    assert_eq!(headers["cache-control"], "no-store");
    assert!(headers["content-security-policy"]
        .to_str()
        .unwrap()
        .contains("frame-ancestors 'none'"));
    let html = page.text().await.unwrap();
    assert!(html.contains("Floodgate ops") && html.contains("/admin/console/console.js"));
    let script = app
        .http
        .get(format!("http://{}/admin/console/console.js", app.admin))
        .send()
        .await
        .unwrap();
    assert_eq!(script.status(), 200);
    assert!(script.text().await.unwrap().contains("/admin/v1/sales/"));
    // Not on the public side.
    let public = app
        .http
        .get(format!("http://{}/admin/console", app.gateway))
        .send()
        .await
        .unwrap();
    assert_eq!(public.status(), 404);
}
