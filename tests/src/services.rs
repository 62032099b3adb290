//! The real service binaries, started as their own processes beside a [`TestApp`] (the tests of
//! settings that only a process reads: secrets from files, TLS to every dependency).

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::gateways::free_port;
use crate::{binary, eventually, secret, TestApp};

/// `floodgate-booking serve` on `app`'s Redis, broker, topic and signing key, with the
/// PostgreSQL at `database_url` and `extra` environment (which wins over all of that); the
/// command, and its admin and API base URLs.
pub fn booking_serve(
    app: &TestApp,
    database_url: &str,
    extra: &[(&str, String)],
) -> (Command, String, String) {
    let (admin, api) = (free_port(), free_port());
    let mut command = Command::new(binary("floodgate-booking"));
    command
        .arg("serve")
        .env("FLOODGATE_BOOKING_LISTEN", api.to_string())
        .env("FLOODGATE_ADMIN_LISTEN", admin.to_string())
        .env("FLOODGATE_DATABASE_URL", database_url)
        .envs(crate::redis_env())
        .env("FLOODGATE_REDIS_PREFIX", app.keys.prefix())
        .env("FLOODGATE_KAFKA_BROKERS", crate::kafka_brokers())
        .env("FLOODGATE_RESERVATIONS_TOPIC", &app.topic)
        .env(
            "FLOODGATE_TOKEN_PUBLIC_KEYS",
            format!("{}={}", app.signer.kid(), app.signer.public_base64()),
        )
        .env("FLOODGATE_PAYMENT_SANDBOX", "true")
        .env("FLOODGATE_PAYMENT_API_KEY", secret("pk_"))
        .env("FLOODGATE_AUDIT_KEY", &app.audit_key)
        .env("FLOODGATE_RESERVATION_KEY", &app.reservation_key)
        .env("FLOODGATE_EDGE_KEY", crate::edge_key())
        .env("RUST_LOG", "error")
        // Tests reserve, replay and race from 127.0.0.1 far faster than people (a test that
        // wants the limits sets them in `extra`).
        .env("FLOODGATE_BOOKING_REQUESTS_PER_SEC_PER_IP", "100000")
        .env("FLOODGATE_BOOKING_READS_PER_SEC_PER_IP", "100000")
        .env("FLOODGATE_RESERVATIONS_PER_SEC_PER_PASS", "100000")
        .env("FLOODGATE_HOLDER_REQUESTS_PER_SEC", "100000")
        .env("FLOODGATE_WEBHOOK_FAILURES_PER_SEC_PER_IP", "100000")
        .envs(extra.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(Stdio::null());
    (command, format!("http://{admin}"), format!("http://{api}"))
}

/// Starts `command` and waits until it answers `GET /healthz` at `admin`.
pub async fn start_service(command: &mut Command, admin: &str) -> Child {
    let mut child = command.stdout(Stdio::null()).spawn().unwrap();
    eventually("the service is up", Duration::from_secs(30), async || {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("the service exited before it was up: {status}");
        }
        reqwest::get(format!("{admin}/healthz")).await.is_ok()
    })
    .await;
    child
}

/// A child process stopped when the test ends, however it ends (a failed assertion included).
pub struct Stopped(pub Child);

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A child process told to stop (SIGTERM) when the test ends, and waited for: for one that
/// stops children of its own (nginx's master stops its workers; a SIGKILL would orphan them).
pub struct Terminated(pub Child);

impl Drop for Terminated {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .arg("-TERM")
            .arg(self.0.id().to_string())
            .status();
        let _ = self.0.wait();
    }
}
