//! Secrets from files, as container platforms mount them (issue 16): the real booking binary
//! takes its ops token and webhook secret from `<VAR>_FILE`, and refuses to start when a secret
//! is given both ways.

use std::process::{Command, Stdio};
use std::time::Duration;

use floodgate_tests::gateways::free_port;
use floodgate_tests::{binary, eventually, fresh_database, secret, unique, SaleSpec, TestApp};

/// The booking binary on `app`'s stores, with `extra` environment; its admin address.
fn booking(app: &TestApp, database_url: &str, extra: &[(&str, String)]) -> (Command, String) {
    let admin = free_port();
    let mut command = Command::new(binary("floodgate-booking"));
    command
        .arg("serve")
        .env("FLOODGATE_BOOKING_LISTEN", free_port().to_string())
        .env("FLOODGATE_ADMIN_LISTEN", admin.to_string())
        .env("FLOODGATE_DATABASE_URL", database_url)
        .envs(floodgate_tests::redis_env())
        .env("FLOODGATE_REDIS_PREFIX", app.keys.prefix())
        .env("FLOODGATE_KAFKA_BROKERS", floodgate_tests::kafka_brokers())
        .env("FLOODGATE_RESERVATIONS_TOPIC", &app.topic)
        .env(
            "FLOODGATE_TOKEN_PUBLIC_KEYS",
            format!("{}={}", app.signer.kid(), app.signer.public_base64()),
        )
        .env("FLOODGATE_PAYMENT_SANDBOX", "true")
        .env("FLOODGATE_PAYMENT_API_KEY", secret("pk_"))
        .env("RUST_LOG", "error")
        .envs(extra.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(Stdio::null());
    (command, format!("http://{admin}"))
}

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

    let (mut command, admin) = booking(
        &app,
        &url,
        &[
            ("FLOODGATE_OPS_TOKEN_FILE", file("ops")),
            ("FLOODGATE_WEBHOOK_SECRET_FILE", file("webhook")),
        ],
    );
    let mut service = command.stdout(Stdio::null()).spawn().unwrap();
    eventually(
        "the booking service is up",
        Duration::from_secs(30),
        async || reqwest::get(format!("{admin}/healthz")).await.is_ok(),
    )
    .await;
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
    let (mut command, _) = booking(
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
