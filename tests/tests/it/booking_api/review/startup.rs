//! Review defects 15-16, 18 and 19: the booking service refuses to start without real secrets, never prints a URL's credentials, and keeps its metrics off the public listeners.

use super::*;

/// Runs `floodgate-booking serve` with `env` (and nothing else from this process' environment)
/// and returns its exit status and output once it exits; `None` if it was still running after
/// `within`, i.e. it started.
fn booking_serve(env: &[(String, String)], within: Duration) -> Option<(i32, String)> {
    let mut child = std::process::Command::new(floodgate_tests::binary("floodgate-booking"))
        .arg("serve")
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + within;
    while std::time::Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            let output = child.wait_with_output().unwrap();
            let text = String::from_utf8_lossy(&output.stdout).into_owned()
                + &String::from_utf8_lossy(&output.stderr);
            return Some((status.code().unwrap_or(-1), text));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// The environment of a booking service that would start, but for what a test takes away.
fn serve_env(db_url: &str, public_keys: &str) -> Vec<(&'static str, String)> {
    vec![
        ("FLOODGATE_DATABASE_URL", db_url.to_owned()),
        ("FLOODGATE_REDIS_URL", redis_url()),
        ("FLOODGATE_REDIS_PREFIX", unique("t") + ":"),
        ("FLOODGATE_KAFKA_BROKERS", floodgate_tests::kafka_brokers()),
        ("FLOODGATE_TOKEN_PUBLIC_KEYS", public_keys.to_owned()),
        ("FLOODGATE_BOOKING_LISTEN", "127.0.0.1:0".into()),
        ("FLOODGATE_ADMIN_LISTEN", "127.0.0.1:0".into()),
        (
            "FLOODGATE_WEBHOOK_SECRET",
            "whsec_0123456789abcdef0123456789abcdef".into(),
        ),
        (
            "FLOODGATE_OPS_TOKEN",
            "ops_0123456789abcdef0123456789abcdef".into(),
        ),
        (
            "FLOODGATE_AUDIT_KEY",
            "audit_0123456789abcdef0123456789abcdef".into(),
        ),
        (
            "FLOODGATE_RESERVATION_KEY",
            "rk_0123456789abcdef0123456789abcdef".into(),
        ),
        (
            "FLOODGATE_PAYMENT_PROVIDER_URL",
            "https://payments.example.invalid".into(),
        ),
        (
            "FLOODGATE_PAYMENT_API_KEY",
            "key_0123456789abcdef0123456789abcdef".into(),
        ),
    ]
}

/// `env` without the settings named in `drop`, and with those in `set` replaced.
fn without(
    env: &[(&'static str, String)],
    drop: &[&str],
    set: &[(&str, &str)],
) -> Vec<(String, String)> {
    env.iter()
        .filter(|(k, _)| !drop.contains(k) && !set.iter().any(|(s, _)| s == k))
        .map(|(k, v)| (k.to_string(), v.clone()))
        .chain(set.iter().map(|(k, v)| (k.to_string(), v.to_string())))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn defect_15_16_the_booking_service_refuses_to_start_without_real_secrets() {
    let (db_url, _db) = floodgate_tests::fresh_database().await;
    let signer = floodgate_protocol::token::TokenSigner::generate("k");
    let keys = format!("k={}", signer.public_base64());
    let env = serve_env(&db_url, &keys);
    let cases: Vec<(&str, Vec<(String, String)>)> = vec![
        (
            "FLOODGATE_PAYMENT_PROVIDER_URL",
            without(&env, &["FLOODGATE_PAYMENT_PROVIDER_URL"], &[]),
        ),
        (
            "FLOODGATE_PAYMENT_API_KEY",
            without(&env, &["FLOODGATE_PAYMENT_API_KEY"], &[]),
        ),
        (
            "FLOODGATE_OPS_TOKEN",
            without(&env, &[], &[("FLOODGATE_OPS_TOKEN", "")]),
        ),
        (
            "FLOODGATE_OPS_TOKEN",
            without(&env, &[], &[("FLOODGATE_OPS_TOKEN", "short")]),
        ),
        (
            "FLOODGATE_WEBHOOK_SECRET",
            without(&env, &[], &[("FLOODGATE_WEBHOOK_SECRET", "")]),
        ),
        (
            "FLOODGATE_WEBHOOK_SECRET",
            without(&env, &[], &[("FLOODGATE_WEBHOOK_SECRET", "tiny")]),
        ),
        (
            "FLOODGATE_RESERVATION_KEY",
            without(&env, &["FLOODGATE_RESERVATION_KEY"], &[]),
        ),
        (
            "FLOODGATE_RESERVATION_KEY",
            without(&env, &[], &[("FLOODGATE_RESERVATION_KEY", "short")]),
        ),
    ];
    for (setting, env) in cases {
        let ended = tokio::task::spawn_blocking(move || booking_serve(&env, WAIT))
            .await
            .unwrap();
        let Some((code, output)) = ended else {
            panic!("the booking service started without a proper {setting}");
        };
        assert_ne!(code, 0, "{output}");
        assert!(output.contains(setting), "{setting} not named in: {output}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn defect_18_urls_with_credentials_are_never_printed() {
    const PASSWORD: &str = "hunter2-do-not-print";
    let database = format!("postgres://floodgate:{PASSWORD}@127.0.0.1:1/floodgate");
    let redis = format!("redis://:{PASSWORD}@127.0.0.1:1");
    let run = |binary: &str, args: &[&str]| {
        let output = std::process::Command::new(floodgate_tests::binary(binary))
            .args(args)
            .env_clear()
            .env("FLOODGATE_DATABASE_URL", &database)
            .env("FLOODGATE_REDIS_URL", &redis)
            .env("FLOODGATE_TOKEN_PUBLIC_KEYS", "k=AAAA")
            .env("FLOODGATE_TOKEN_KEY_ID", "k")
            .env(
                "FLOODGATE_TOKEN_SIGNING_KEY",
                "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
            )
            .output()
            .unwrap();
        String::from_utf8_lossy(&output.stdout).into_owned()
            + &String::from_utf8_lossy(&output.stderr)
    };
    for (binary, args) in [
        ("floodgate-booking", vec!["serve", "--help"]),
        ("floodgate-booking", vec!["migrate", "--help"]),
        ("floodgate-booking", vec!["migrate"]),
        ("floodgate-consumer", vec!["--help"]),
        ("floodgate-gateway", vec!["serve", "--help"]),
        ("floodgate-gateway", vec!["serve"]),
    ] {
        let output = run(binary, &args);
        assert!(
            !output.contains(PASSWORD),
            "{binary} {args:?} printed the password:\n{output}"
        );
    }
}

#[sqlx::test(migrations = "../migrations")]
async fn defect_19_metrics_are_not_on_the_public_listeners(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    for public in [app.gateway, app.booking] {
        let (status, body) = app
            .answer(app.http.get(format!("http://{public}/metrics")))
            .await;
        assert_eq!(status, 404, "{public}: {body}");
    }
}
