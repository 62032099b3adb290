//! Secrets as a deployment handles them (issue 16), on the real booking binary: from files, as
//! container platforms mount them (`<VAR>_FILE`; refused when given both ways), and rotated with
//! two live at once (the admission-token signing keys by key id, and the ops token).

use floodgate_tests::services::{booking_serve as booking, start_service as start};
use floodgate_tests::{fresh_database, secret, unique, SaleSpec, TestApp};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_come_from_the_files_their_file_variables_name() {
    let (url, db) = fresh_database().await;
    let app = TestApp::spawn(db).await;
    let sale = unique("files-");
    app.create_sale(&sale, &SaleSpec::default()).await;
    let dir = std::env::temp_dir().join(unique("floodgate-secrets-"));
    std::fs::create_dir_all(&dir).unwrap();
    let (ops_token, webhook_secret) = (secret("ops_"), secret("whsec_"));
    // As `echo "$TOKEN" > file` writes it: the trailing newline is not part of the secret.
    std::fs::write(dir.join("ops"), format!("{ops_token}\n")).unwrap();
    std::fs::write(dir.join("webhook"), &webhook_secret).unwrap();
    let file = |name: &str| dir.join(name).to_string_lossy().into_owned();

    let (mut command, admin, _) = booking(
        &app,
        &url,
        &[
            ("FLOODGATE_OPS_TOKEN_FILE", file("ops")),
            ("FLOODGATE_WEBHOOK_SECRET_FILE", file("webhook")),
        ],
    );
    let mut service = start(&mut command, &admin).await;
    let figures = format!("{admin}/admin/v1/sales/{sale}");
    let (status, _) = app
        .answer(app.http.get(&figures).bearer_auth(&ops_token))
        .await;
    assert_eq!(status, 200, "the token from the file opens the ops API");
    let (status, _) = app
        .answer(app.http.get(&figures).bearer_auth(secret("ops_")))
        .await;
    assert_eq!(status, 401, "and no other does");
    let _ = service.kill();
    let _ = service.wait();

    // Both ways at once is refused before anything starts, naming the setting.
    let (mut command, _, _) = booking(
        &app,
        &url,
        &[
            ("FLOODGATE_OPS_TOKEN_FILE", file("ops")),
            ("FLOODGATE_OPS_TOKEN", ops_token.clone()),
            ("FLOODGATE_WEBHOOK_SECRET", webhook_secret.clone()),
        ],
    );
    let refused = command.output().unwrap();
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    assert!(
        said.contains("FLOODGATE_OPS_TOKEN and FLOODGATE_OPS_TOKEN_FILE are both set"),
        "{said}"
    );
    assert!(
        !said.contains(&ops_token),
        "the secret is never printed: {said}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// One reservation of one seat in `p1` through the booking API at `api`: its status and error.
async fn reserve(app: &TestApp, api: &str, sale: &str, token: &str) -> (u16, serde_json::Value) {
    let body = serde_json::json!({ "pool": "p1", "seats": 1 });
    app.post_reservation_at(api, sale, token, &unique("k"), &body)
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_and_the_ops_token_rotate_with_the_old_and_the_new_both_good_during_the_overlap() {
    let (url, db) = fresh_database().await;
    let app = TestApp::spawn(db).await;
    let sale = app.open_sale("rotate-", SaleSpec::default()).await;
    // The gateways' key so far (`old`) and the one they move to (`new`), each with its kid.
    let old = &app.signer;
    let new = floodgate_protocol::token::TokenSigner::generate("rotated");
    let key = |signer: &floodgate_protocol::token::TokenSigner| {
        format!("{}={}", signer.kid(), signer.public_base64())
    };
    let pass = |signer: &floodgate_protocol::token::TokenSigner, ticket: u64| {
        floodgate_tests::pass(signer, &sale, ticket, 1, 60_000, None)
    };
    let (old_ops, new_ops) = (secret("ops_"), secret("ops_"));
    let figures = |admin: &str| format!("{admin}/admin/v1/sales/{sale}");

    // The overlap: both keys and both ops tokens are good.
    let (mut command, admin, api) = booking(
        &app,
        &url,
        &[
            (
                "FLOODGATE_TOKEN_PUBLIC_KEYS",
                format!("{},{}", key(old), key(&new)),
            ),
            ("FLOODGATE_OPS_TOKEN", format!("{old_ops},{new_ops}")),
            ("FLOODGATE_WEBHOOK_SECRET", secret("whsec_")),
        ],
    );
    let mut service = start(&mut command, &admin).await;
    let (status, body) = reserve(&app, &api, &sale, &pass(old, 1)).await;
    assert_eq!(
        status, 201,
        "a pass signed with the old key, during the overlap: {body}"
    );
    let (status, body) = reserve(&app, &api, &sale, &pass(&new, 2)).await;
    assert_eq!(status, 201, "a pass signed with the new key: {body}");
    for token in [&old_ops, &new_ops] {
        let (status, _) = app
            .answer(app.http.get(figures(&admin)).bearer_auth(token))
            .await;
        assert_eq!(status, 200);
    }
    let _ = service.kill();
    let _ = service.wait();

    // After it: only the new key and the new token.
    let (mut command, admin, api) = booking(
        &app,
        &url,
        &[
            ("FLOODGATE_TOKEN_PUBLIC_KEYS", key(&new)),
            ("FLOODGATE_OPS_TOKEN", new_ops.clone()),
            ("FLOODGATE_WEBHOOK_SECRET", secret("whsec_")),
        ],
    );
    let mut service = start(&mut command, &admin).await;
    let (status, body) = reserve(&app, &api, &sale, &pass(old, 3)).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (401, Some("token_invalid")),
        "the old key is gone: {body}"
    );
    let (status, body) = reserve(&app, &api, &sale, &pass(&new, 4)).await;
    assert_eq!(status, 201, "{body}");
    let (status, _) = app
        .answer(app.http.get(figures(&admin)).bearer_auth(&old_ops))
        .await;
    assert_eq!(status, 401, "the old ops token is gone");
    let (status, _) = app
        .answer(app.http.get(figures(&admin)).bearer_auth(&new_ops))
        .await;
    assert_eq!(status, 200);
    let _ = service.kill();
    let _ = service.wait();
}

/// Runs `command` and expects it to refuse to start: its exit status and what it said. A
/// process still running after the guard is killed and the test fails.
async fn refused_to_start(command: &mut std::process::Command) -> (Option<i32>, String) {
    let log = std::env::temp_dir().join(unique("floodgate-refusal-"));
    let out = std::fs::File::create(&log).unwrap();
    // Killed when the test ends, whatever happens.
    let mut child = floodgate_tests::services::Stopped(
        command
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap(),
    );
    let status = floodgate_tests::eventually(
        "the process refuses to start",
        std::time::Duration::from_secs(30),
        async || child.0.try_wait().unwrap(),
    )
    .await;
    let said = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_file(&log);
    (status.code(), said)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sandbox_provider_never_stands_beside_a_real_one() {
    let (url, db) = fresh_database().await;
    let app = TestApp::spawn(db).await;
    // The booking service told to use the sandbox, with a real provider's https URL beside it:
    // one of the two is a mistake, and money must not go to the wrong one.
    let (mut command, ..) = booking(
        &app,
        &url,
        &[
            (
                "FLOODGATE_PAYMENT_PROVIDER_URL",
                "https://api.payments.example".into(),
            ),
            ("FLOODGATE_OPS_TOKEN", secret("ops_")),
            ("FLOODGATE_WEBHOOK_SECRET", secret("whsec_")),
        ],
    );
    let (code, said) = refused_to_start(&mut command).await;
    assert_ne!(code, Some(0), "{said}");
    assert!(said.contains("FLOODGATE_PAYMENT_SANDBOX"), "{said}");

    // The sandbox itself reads secrets of its own names only: a host that holds the production
    // provider's key and webhook secret does not hand them to the stand-in by accident.
    let mut sandbox = std::process::Command::new(floodgate_tests::binary("floodgate-sandbox"));
    sandbox
        .env("FLOODGATE_SANDBOX_LISTEN", "127.0.0.1:0")
        .env("FLOODGATE_WEBHOOK_SECRET", secret("whsec_"))
        .env("FLOODGATE_PAYMENT_API_KEY", secret("pk_"))
        .env_remove("FLOODGATE_SANDBOX_WEBHOOK_SECRET")
        .env_remove("FLOODGATE_SANDBOX_API_KEY");
    let (code, said) = refused_to_start(&mut sandbox).await;
    assert_ne!(code, Some(0), "{said}");
    assert!(said.contains("FLOODGATE_SANDBOX_WEBHOOK_SECRET"), "{said}");
}
