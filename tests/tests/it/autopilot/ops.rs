//! Ops and the autopilot: turned on with its bounds and seen in the figures, refused when its
//! settings cannot be used, overridden at once by a rate set by hand, and its notable change
//! written into the audit trail by the booking service.

use std::time::Duration;

use floodgate_tests::client::RoomClient;
use floodgate_tests::{eventually, SaleSpec, TestApp};
use reqwest::Method;
use serde_json::{json, Value};

#[sqlx::test(migrations = "../migrations")]
async fn ops_turn_the_autopilot_on_and_a_rate_set_by_hand_overrides_it(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let spec = SaleSpec {
        pools: vec![("p1".into(), 100)],
        admission_rate: 50.0,
        ..SaleSpec::default()
    };
    let sale = app.open_sale("pilot-ops-", spec).await;
    // A session makes the gateway run the sale's room, and so its leader.
    let _waiting = RoomClient::join(&app.ws_url(&sale)).await.unwrap();
    let path = format!("/admin/v1/sales/{sale}");
    let patch = |body: Value| app.ops(Method::PATCH, &path, &app.ops_token, Some(body));

    for refused in [
        json!({"autopilot": {"enabled": true, "floor": 5.0}}),
        json!({"autopilot": {"enabled": true, "floor": 20.0, "ceiling": 10.0}}),
        json!({"autopilot": {"enabled": true, "floor": 5.0, "ceiling": 10.0, "settle_secs": 0}}),
        json!({"autopilot": {"enabled": false, "floor": 5.0}}),
        json!({"autopilot": {"enabled": true, "floor": 5.0, "ceiling": 10.0, "targets": {"error_share": 3}}}),
        json!({"autopilot": "on"}),
    ] {
        let (status, answer) = patch(refused.clone()).await;
        assert_eq!(
            (status, answer["error"].as_str()),
            (422, Some("invalid_autopilot")),
            "{refused}: {answer}"
        );
    }

    let (status, figures) = patch(json!({"autopilot": {
        "enabled": true, "floor": 5.0, "ceiling": 10.0, "settle_secs": 2,
    }}))
    .await;
    assert_eq!(status, 200, "{figures}");
    assert_eq!(figures["autopilot"]["enabled"], true);
    assert_eq!(figures["autopilot"]["settings"]["ceiling"], 10.0);
    assert_eq!(figures["autopilot"]["settings"]["settle_ms"], 2_000);
    // The leader takes over from 50 a second and brings the rate within the bounds at its first
    // step; nobody reserves, so the step holds there and says why.
    let figures_now = || async { app.ops(Method::GET, &path, &app.ops_token, None).await.1 };
    eventually(
        "the leader brings the rate to the ceiling",
        Duration::from_secs(10),
        || async {
            let f = figures_now().await;
            f["admission_rate"] == 10.0
                && f["autopilot"]["last_step"]["decision"]["action"] == "held"
        },
    )
    .await;
    let step = figures_now().await["autopilot"]["last_step"].clone();
    // The leading gateway's run: FLOODGATE_INSTANCE_ID and a run id.
    assert!(
        step["leader"].as_str().unwrap().starts_with("gw-test."),
        "{step}"
    );
    assert_eq!(step["decision"]["rate"], 10.0, "{step}");

    // A rate set by hand with the autopilot kept on, with the same settings: the autopilot
    // takes over from that rate (it is within the bounds) rather than writing its own back.
    let settings = json!({"enabled": true, "floor": 5.0, "ceiling": 10.0, "settle_secs": 2});
    let (status, figures) = patch(json!({"admission_rate": 7.0, "autopilot": settings})).await;
    assert_eq!(status, 200, "{figures}");
    assert_eq!(figures["autopilot"]["enabled"], true);
    eventually(
        "the leader steps from the new rate",
        Duration::from_secs(10),
        || async {
            let f = figures_now().await;
            f["autopilot"]["last_step"]["decision"]["rate"] == 7.0
        },
    )
    .await;
    assert_eq!(figures_now().await["admission_rate"], 7.0);

    // A rate set by hand wins at once, and turns the autopilot off in the same change.
    let (status, figures) = patch(json!({"admission_rate": 3.0})).await;
    assert_eq!(status, 200, "{figures}");
    assert_eq!(figures["admission_rate"], 3.0);
    assert_eq!(figures["autopilot"]["enabled"], false);
    assert!(figures["autopilot"]["settings"].is_null());
    // Three of its steps later the hand-set rate still stands: no step wrote over it.
    let until = tokio::time::Instant::now() + Duration::from_secs(3);
    while tokio::time::Instant::now() < until {
        assert_eq!(figures_now().await["admission_rate"], 3.0);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // The move from 50 to 10 was notable: the booking service wrote it into the trail (the
    // gateway has no database), once, beside the operator's own changes.
    let audit_path = format!("{path}/audit");
    let autopilot_rows = || async {
        let (_, rows) = app
            .ops(Method::GET, &audit_path, &app.ops_token, None)
            .await;
        rows.as_array()
            .unwrap()
            .iter()
            .filter(|r| r["action"] == "autopilot")
            .cloned()
            .collect::<Vec<_>>()
    };
    eventually(
        "the autopilot's change is audited",
        Duration::from_secs(10),
        || async { !autopilot_rows().await.is_empty() },
    )
    .await;
    let rows = autopilot_rows().await;
    assert_eq!(rows.len(), 1, "one notable change, one row: {rows:?}");
    assert_eq!(
        rows[0]["actor"],
        format!("autopilot (gateway {})", step["leader"].as_str().unwrap())
    );
    assert_eq!(rows[0]["before"]["admission_rate"], 50.0);
    assert_eq!(rows[0]["after"]["admission_rate"], 10.0);
    assert_eq!(rows[0]["detail"]["decision"]["action"], "held");
    let (_, rows) = app
        .ops(Method::GET, &audit_path, &app.ops_token, None)
        .await;
    assert!(
        rows.as_array()
            .unwrap()
            .iter()
            .any(|r| r["action"] == "update" && r["after"]["autopilot"]["floor"] == 5.0),
        "the operator's change records the settings: {rows}"
    );
}
