//! The autopilot when a signal goes quiet, against the real services: with no consumer running,
//! nobody measures the consumer group's lag, and the autopilot never raises the rate however calm
//! the rest is (no raise on missing evidence); once a consumer runs and measures it, the rate
//! climbs.

use std::sync::Arc;
use std::time::Duration;

use floodgate_tests::client::RoomClient;
use floodgate_tests::{eventually, SaleSpec, TestApp, TestOptions};
use reqwest::Method;
use serde_json::{json, Value};

const MINUTE: i64 = 60_000;

#[sqlx::test(migrations = "../migrations")]
async fn without_a_measured_lag_the_rate_is_never_raised(db: sqlx::PgPool) {
    let app = Arc::new(
        TestApp::spawn_with(
            db,
            TestOptions {
                consumer: false,
                ..TestOptions::default()
            },
        )
        .await,
    );
    let spec = SaleSpec {
        pools: vec![("p1".into(), 10_000)],
        admission_rate: 5.0,
        ..SaleSpec::default()
    };
    let sale = app.open_sale("pilot-quiet-", spec).await;
    // A session keeps the sale's room, and so its leader, on this gateway.
    let _waiting = RoomClient::join(&app.ws_url(&sale)).await.unwrap();
    let path = format!("/admin/v1/sales/{sale}");
    let settings = json!({"enabled": true, "floor": 5.0, "ceiling": 20.0, "settle_secs": 1});
    super::turn_on(&app, &sale, settings).await;
    // Calm traffic: a reservation every 100 ms, answered in milliseconds, so the booking
    // service writes fresh, calm summaries every second.
    let traffic = {
        let (app, sale) = (app.clone(), sale.clone());
        tokio::spawn(async move {
            for ticket in 1u64.. {
                let token = app.token(&sale, ticket, 1, MINUTE);
                let _ = app
                    .reserve(&sale, &token, &format!("k{ticket}"), "p1", 1)
                    .await;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    let figures = || async { app.ops(Method::GET, &path, &app.ops_token, None).await.1 };
    let decision = |f: &Value| f["autopilot"]["last_step"]["decision"].clone();

    // Fresh summaries with a calm backend, but no consumer lag: held, never raised.
    eventually(
        "the leader judges fresh summaries",
        Duration::from_secs(15),
        || async {
            figures().await["autopilot"]["last_step"]["health"]["requests"]
                .as_u64()
                .is_some_and(|n| n > 0)
        },
    )
    .await;
    for _ in 0..8 {
        let f = figures().await;
        assert_eq!(f["admission_rate"], 5.0, "raised without a lag: {f}");
        assert_eq!(
            decision(&f),
            json!({"action": "held", "rate": 5.0, "why": "stale"}),
            "{f}"
        );
        assert!(f["autopilot"]["last_step"]["health"]["consumer_lag"].is_null());
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    // A consumer starts and measures the lag: the calm backend lets the rate climb.
    app.start_consumer();
    eventually(
        "the rate climbs once the lag is measured",
        Duration::from_secs(30),
        || async {
            figures().await["admission_rate"]
                .as_f64()
                .is_some_and(|r| r > 5.0)
        },
    )
    .await;
    traffic.abort();
}
