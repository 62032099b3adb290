//! The audit of operator actions (issue 17): every change through the ops API is recorded in
//! PostgreSQL with the token's name (never the token), the time, and the settings before and
//! after; the ops API lists them, newest first. Each change is an intent before and an outcome
//! after, the admin commands too, and the rows are chained with a key PostgreSQL never holds
//! (`floodgate-booking audit verify`).

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

/// An app on a database of its own (its URL, for the commands), with a sale that opens in an
/// hour.
pub(crate) async fn app_with_a_pending_sale() -> (String, TestApp, String) {
    let (url, db) = fresh_database().await;
    let app = TestApp::spawn(db).await;
    let sale = floodgate_tests::unique("audit-");
    let spec = SaleSpec {
        opens_in: std::time::Duration::from_secs(3600),
        ..SaleSpec::default()
    };
    app.create_sale(&sale, &spec).await;
    (url, app, sale)
}

/// The sale's audit rows in order: action, phase, and (for an outcome) its intent's id.
async fn trail(app: &TestApp, sale: &str) -> Vec<(i64, String, String, Option<i64>)> {
    sqlx::query_as("select id, action, phase, intent from ops_audit where sale = $1 order by id")
        .bind(sale)
        .fetch_all(&app.db)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_whose_intent_cannot_be_recorded_is_not_made() {
    let (_, app, sale) = app_with_a_pending_sale().await;
    let base = format!("/admin/v1/sales/{sale}");

    // The trail cannot be written: the change is refused before it is made.
    sqlx::query("alter table ops_audit rename to ops_audit_away")
        .execute(&app.db)
        .await
        .unwrap();
    let rate = serde_json::json!({ "admission_rate": 7.5 });
    let token = &app.ops_token;
    let (status, body) = app
        .ops(reqwest::Method::PATCH, &base, token, Some(rate))
        .await;
    assert_eq!(status, 503, "{body}");
    let pause = format!("{base}/pause");
    let (status, body) = app.ops(reqwest::Method::POST, &pause, token, None).await;
    assert_eq!(status, 503, "{body}");
    let (_, figures) = app.ops(reqwest::Method::GET, &base, token, None).await;
    assert_eq!(figures["admission_rate"], 50.0, "{figures}");
    assert_eq!(figures["paused"], false, "{figures}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_admin_command_is_audited_and_verify_catches_an_edited_or_deleted_row() {
    let (url, app, sale) = app_with_a_pending_sale().await;
    // The admin commands, each as an operator would run it (whatever each answers), and a
    // change through the ops API between them.
    let (code, said) = app.booking_command(&url, &["sale", "arm", &sale]);
    assert_eq!(code, 0, "{said}");
    app.admission(&sale, "pause").await;
    for args in [
        vec!["sale", "reconcile", "--repair", &sale],
        vec!["sale", "end", &sale],
        vec!["sale", "purge", &sale],
    ] {
        let (code, said) = app.booking_command(&url, &args);
        assert!(code == 0 || code == 2, "{args:?}: {said}");
    }

    let rows = trail(&app, &sale).await;
    let mut actions = Vec::new();
    for pair in rows.chunks(2) {
        let [(intent, action, phase, none), (_, same, outcome, of)] = pair else {
            panic!("an intent without its outcome: {rows:?}");
        };
        assert_eq!(
            (phase.as_str(), *none, same, *of),
            ("intent", None, action, Some(*intent)),
            "{rows:?}"
        );
        assert!(
            ["done", "refused", "failed"].contains(&outcome.as_str()),
            "{rows:?}"
        );
        actions.push(action.as_str());
    }
    assert_eq!(
        actions,
        ["arm", "pause", "repair", "end", "purge"],
        "{rows:?}"
    );
    let actor: String = sqlx::query_scalar(
        "select actor from ops_audit where sale = $1 and action = 'end' limit 1",
    )
    .bind(&sale)
    .fetch_one(&app.db)
    .await
    .unwrap();
    assert_eq!(actor, "test-operator");

    let (code, said) = app.booking_command(&url, &["audit", "verify"]);
    assert_eq!(code, 0, "{said}");
    assert!(said.contains("intact"), "{said}");
    // The key is kept outside PostgreSQL: another key does not vouch for the rows.
    let other = secret("audit_");
    let (code, said) = app.booking_command_with(
        &url,
        &["audit", "verify"],
        &[("FLOODGATE_AUDIT_KEY", &other)],
    );
    assert_eq!(code, 2, "{said}");

    // An edited row is caught, and named.
    let at = rows
        .iter()
        .position(|(_, action, phase, _)| action == "end" && phase == "intent")
        .unwrap();
    let end_intent = rows[at].0;
    sqlx::query("update ops_audit set actor = 'someone-else' where id = $1")
        .bind(end_intent)
        .execute(&app.db)
        .await
        .unwrap();
    let (code, said) = app.booking_command(&url, &["audit", "verify"]);
    assert_eq!(code, 2, "{said}");
    assert!(said.contains(&format!("row {end_intent}")), "{said}");
    sqlx::query("update ops_audit set actor = 'test-operator' where id = $1")
        .bind(end_intent)
        .execute(&app.db)
        .await
        .unwrap();
    let (code, said) = app.booking_command(&url, &["audit", "verify"]);
    assert_eq!(code, 0, "put back as it was, the row checks again: {said}");

    // A chained row re-marked as older than the chain breaks the chain's start.
    let (first, mac): (i64, String) =
        sqlx::query_as("select id, mac from ops_audit order by id limit 1")
            .fetch_one(&app.db)
            .await
            .unwrap();
    let mark = |mac: String| {
        sqlx::query("update ops_audit set mac = $2 where id = $1")
            .bind(first)
            .bind(mac)
            .execute(&app.db)
    };
    mark("before-chain".into()).await.unwrap();
    let (code, said) = app.booking_command(&url, &["audit", "verify"]);
    assert_eq!(code, 2, "{said}");
    mark(mac).await.unwrap();
    // A row inserted by hand, with no MAC, is named.
    let forged: i64 = sqlx::query_scalar(
        "insert into ops_audit (sale, action, actor, before, after)
         values ($1, 'resume', 'nobody', '{}', '{}') returning id",
    )
    .bind(&sale)
    .fetch_one(&app.db)
    .await
    .unwrap();
    let (code, said) = app.booking_command(&url, &["audit", "verify"]);
    assert_eq!(code, 2, "{said}");
    assert!(said.contains(&format!("row {forged}")), "{said}");
    sqlx::query("delete from ops_audit where id = $1")
        .bind(forged)
        .execute(&app.db)
        .await
        .unwrap();

    // So is a deleted one: the next row no longer follows the one before it.
    sqlx::query("delete from ops_audit where id = $1")
        .bind(end_intent)
        .execute(&app.db)
        .await
        .unwrap();
    let (code, said) = app.booking_command(&url, &["audit", "verify"]);
    assert_eq!(code, 2, "{said}");
    assert!(said.contains(&format!("row {}", rows[at + 1].0)), "{said}");
}

/// `sale create` (with `--arm`) and `sale rebuild` leave their intent and outcome rows too, as
/// an operator runs them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creating_arming_and_rebuilding_by_command_are_audited() {
    let (url, db) = fresh_database().await;
    let app = TestApp::spawn(db).await;
    let sale = floodgate_tests::unique("audit-cli-");
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/sales/demo.toml");
    let file = file.to_str().unwrap();
    let create = [
        "sale",
        "create",
        file,
        "--id",
        &sale,
        "--opens-in-secs",
        "3600",
        "--arm",
    ];
    let (code, said) = app.booking_command(&url, &create);
    assert_eq!(code, 0, "{said}");
    // A pool that has its state is not rebuilt: the command fails, and its outcome says so.
    let pool = "12951-20261201-2A-TQ";
    let (code, said) = app.booking_command(&url, &["sale", "rebuild", &sale, pool]);
    assert_ne!(code, 0, "{said}");

    let rows: Vec<(String, String)> = trail(&app, &sale)
        .await
        .into_iter()
        .map(|(_, action, phase, _)| (action, phase))
        .collect();
    let rows: Vec<(&str, &str)> = rows.iter().map(|(a, p)| (a.as_str(), p.as_str())).collect();
    assert_eq!(
        rows,
        [
            ("create", "intent"),
            ("create", "done"),
            ("arm", "intent"),
            ("arm", "done"),
            ("rebuild", "intent"),
            ("rebuild", "failed"),
        ]
    );
    let (code, said) = app.booking_command(&url, &["audit", "verify"]);
    assert_eq!(code, 0, "{said}");
}
