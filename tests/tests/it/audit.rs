//! The audit of operator actions (issue 17): every change through the ops API is recorded in
//! PostgreSQL with the token's name (never the token), the time, and the settings before and
//! after; the ops API lists them, newest first.

use floodgate_tests::services::{booking_serve, start_service, Stopped};
use floodgate_tests::{fresh_database, secret, SaleSpec, TestApp};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_ops_change_is_recorded_with_who_when_and_the_values_before_and_after() {
    let (url, db) = fresh_database().await;
    let app = TestApp::spawn(db).await;
    let spec = SaleSpec {
        opens_in: std::time::Duration::from_secs(3600),
        ..SaleSpec::default()
    };
    let sale = floodgate_tests::unique("audit-");
    app.create_sale(&sale, &spec).await;
    // Two ops tokens: one named by the operator, one bare (known by a short hash).
    let (alice, bare) = (secret("ops_"), secret("ops_"));
    let env = [
        ("FLOODGATE_OPS_TOKEN", format!("alice:{alice},{bare}")),
        ("FLOODGATE_WEBHOOK_SECRET", secret("whsec_")),
    ];
    let (mut command, admin, _) = booking_serve(&app, &url, &env);
    // Stopped however the test ends, a failed assertion included.
    let _booking = Stopped(start_service(&mut command, &admin).await);
    let base = format!("{admin}/admin/v1/sales/{sale}");

    let (status, body) = app
        .answer(
            app.http
                .patch(&base)
                .bearer_auth(&alice)
                .json(&serde_json::json!({ "admission_rate": 7.5 })),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, _) = app
        .answer(app.http.post(format!("{base}/pause")).bearer_auth(&bare))
        .await;
    assert_eq!(status, 200);
    // A refused change is not a change: nothing recorded.
    let (status, _) = app
        .answer(
            app.http
                .patch(&base)
                .bearer_auth(&alice)
                .json(&serde_json::json!({ "admission_rate": -1 })),
        )
        .await;
    assert_eq!(status, 422);

    let (status, audit) = app
        .answer(app.http.get(format!("{base}/audit")).bearer_auth(&alice))
        .await;
    assert_eq!(status, 200, "{audit}");
    // A limit out of its range, or not a number, is refused as such (never quietly clamped).
    for limit in ["0", "101", "ten"] {
        let (status, body) = app
            .answer(
                app.http
                    .get(format!("{base}/audit?limit={limit}"))
                    .bearer_auth(&alice),
            )
            .await;
        assert_eq!(
            (status, &body["error"]),
            (400, &serde_json::json!("bad_page")),
            "{limit}: {body}"
        );
    }
    let entries = audit.as_array().expect("a list");
    assert_eq!(entries.len(), 2, "{audit}");
    let (pause, update) = (&entries[0], &entries[1]);
    assert_eq!(update["action"], "update");
    assert_eq!(update["actor"], "alice");
    assert_eq!(update["before"]["admission_rate"], 50.0);
    assert_eq!(update["after"]["admission_rate"], 7.5);
    assert_eq!(pause["action"], "pause");
    let actor = pause["actor"].as_str().unwrap();
    assert!(actor.starts_with("sha256:") && actor.len() == 15, "{actor}");
    assert_eq!(
        (
            pause["before"]["paused"].as_bool(),
            pause["after"]["paused"].as_bool()
        ),
        (Some(false), Some(true))
    );
    assert!(
        pause["at"].as_str().is_some_and(|at| at.ends_with('Z')),
        "{pause}"
    );
    // The tokens themselves are nowhere in the trail.
    let text = audit.to_string();
    assert!(!text.contains(&alice) && !text.contains(&bare));
    // The audit needs the token like the rest of the ops API.
    let (status, _) = app.answer(app.http.get(format!("{base}/audit"))).await;
    assert_eq!(status, 401);
}
