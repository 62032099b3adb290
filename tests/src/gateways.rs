//! Extra gateway processes (the real `floodgate-gateway` binary) sharing a [`TestApp`]'s Redis
//! prefix and signing key: for tests of the waiting room across instances, leader failover and
//! draining.

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::{binary, eventually, TestApp};

/// Timings of a test gateway, short so failover and graces fit in a test.
#[derive(Clone, Debug)]
pub struct GatewayTimings {
    pub tick_ms: u64,
    pub lease_ms: u64,
    pub grace_ms: u64,
}

impl Default for GatewayTimings {
    fn default() -> Self {
        Self {
            tick_ms: 50,
            lease_ms: 1_500,
            grace_ms: 30_000,
        }
    }
}

/// One running gateway process; killed when dropped.
pub struct GatewayProcess {
    pub name: String,
    pub addr: SocketAddr,
    /// Its admin listener (metrics).
    pub admin: SocketAddr,
    child: Child,
}

impl GatewayProcess {
    /// Starts a gateway named `name` (its lease holder id starts with `name.`) and waits until
    /// it answers.
    pub async fn spawn(app: &TestApp, name: &str, timings: &GatewayTimings) -> Self {
        Self::spawn_with_env(app, name, timings, &[]).await
    }

    /// A gateway that also serves the browser client from `static_dir`.
    pub async fn spawn_serving(
        app: &TestApp,
        name: &str,
        timings: &GatewayTimings,
        static_dir: &std::path::Path,
    ) -> Self {
        let dir = static_dir.to_str().expect("a UTF-8 path");
        Self::spawn_with_env(app, name, timings, &[("FLOODGATE_STATIC_DIR", dir)]).await
    }

    /// A gateway that logs everything it says (`RUST_LOG=debug`) into the file `log`.
    pub async fn spawn_logging(
        app: &TestApp,
        name: &str,
        timings: &GatewayTimings,
        log: &std::path::Path,
    ) -> Self {
        let file = std::fs::File::create(log).expect("a log file");
        let err = file.try_clone().expect("the log file again");
        let mut command = Command::new(binary("floodgate-gateway"));
        command
            .env("RUST_LOG", "debug")
            .stdout(Stdio::from(file))
            .stderr(Stdio::from(err));
        Self::spawn_command(command, app, name, timings, &[]).await
    }

    /// A gateway with extra environment (settings a test changes).
    pub async fn spawn_with_env(
        app: &TestApp,
        name: &str,
        timings: &GatewayTimings,
        env: &[(&str, &str)],
    ) -> Self {
        let mut command = Command::new(binary("floodgate-gateway"));
        command.env("RUST_LOG", "warn,floodgate_gateway=info");
        Self::spawn_command(command, app, name, timings, env).await
    }

    async fn spawn_command(
        mut command: Command,
        app: &TestApp,
        name: &str,
        timings: &GatewayTimings,
        env: &[(&str, &str)],
    ) -> Self {
        let addr = free_port();
        let admin = free_port();
        let sandbox = format!("http://{}", app.sandbox);
        let child = command
            .arg("serve")
            // No drain delay unless a test asks for one: a stopping gateway closes at once.
            .env("FLOODGATE_DRAIN_DELAY_MS", "0")
            .envs(env.iter().copied())
            .env("FLOODGATE_IDENTITY_ISSUER", &sandbox)
            .env("FLOODGATE_IDENTITY_AUDIENCE", crate::IDENTITY_AUDIENCE)
            .env(
                "FLOODGATE_IDENTITY_JWKS_URL",
                format!("{sandbox}/.well-known/jwks.json"),
            )
            .env("FLOODGATE_GATEWAY_LISTEN", addr.to_string())
            .env("FLOODGATE_GATEWAY_ADMIN_LISTEN", admin.to_string())
            .envs(app.redis_env())
            .env("FLOODGATE_REDIS_PREFIX", app.keys.prefix())
            .env("FLOODGATE_TOKEN_KEY_ID", app.signer.kid())
            .env("FLOODGATE_TOKEN_SIGNING_KEY", app.signer.seed_base64())
            .env("FLOODGATE_INSTANCE_ID", name)
            .env("FLOODGATE_TICK_MS", timings.tick_ms.to_string())
            .env("FLOODGATE_LEASE_MS", timings.lease_ms.to_string())
            .env("FLOODGATE_GRACE_MS", timings.grace_ms.to_string())
            .env("FLOODGATE_MAX_CONNECTIONS_PER_IP", "100000")
            .env("FLOODGATE_JOINS_PER_SEC_PER_IP", "100000")
            .env("FLOODGATE_PLACE_REQUESTS_PER_SEC_PER_IP", "100000")
            .env("FLOODGATE_PLACE_EVERY_MS", "0")
            .env("FLOODGATE_CHALLENGES_PER_SEC_PER_IP", "100000")
            .env("FLOODGATE_RESUMES_PER_SEC", "100000")
            .stdin(Stdio::null())
            .spawn()
            .expect("the gateway binary starts");
        let gateway = Self {
            name: name.to_owned(),
            addr,
            admin,
            child,
        };
        let http = reqwest::Client::new();
        eventually(
            &format!("gateway {name} answers"),
            Duration::from_secs(20),
            || async {
                http.get(format!("http://{addr}/healthz"))
                    .send()
                    .await
                    .is_ok_and(|r| r.status().is_success())
            },
        )
        .await;
        gateway
    }

    pub fn ws_url(&self, sale: &str) -> String {
        format!("ws://{}/ws?sale={sale}", self.addr)
    }

    /// SIGKILL: the process dies without a goodbye to anyone.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM: the process drains (closes every session with its resume token) and exits.
    pub fn terminate(&mut self) {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
    }

    /// Waits for the process to exit; its exit status.
    pub async fn wait(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            if tokio::time::Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for GatewayProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A loopback port free right now (the gateway binds it a moment later), and never one this
/// process was handed before.
pub fn free_port() -> SocketAddr {
    // Below the kernel's ephemeral range (32768 and up by default), picked at random: a port
    // handed out here is free now, and no listener bound to port 0 and no outgoing connection
    // (of this test or of another running beside it) can take it before the process it is
    // for binds it. Ports from the ephemeral range could be, and a gateway then failed to
    // start with "Address already in use". A port handed out and not bound (a test's origin
    // that must not answer) is free again: handed out twice, the "nowhere" of one test was
    // once its own edge's redirect listener.
    static GIVEN: std::sync::Mutex<std::collections::BTreeSet<u16>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    for _ in 0..1_000 {
        let port = 20_000 + (uuid::Uuid::new_v4().as_u128() % 10_000) as u16;
        let mut given = GIVEN.lock().expect("the ports given");
        if given.contains(&port) {
            continue;
        }
        if let Ok(listener) = std::net::TcpListener::bind(("127.0.0.1", port)) {
            given.insert(port);
            return listener.local_addr().expect("a bound address");
        }
    }
    panic!("no free port from 20000 to 29999");
}
