//! What a test does to a running [`Stack`]: operator commands inside a booking container, a sale
//! armed on the run's Redis, the addresses it talks to, and whether a container is still up.

use std::net::SocketAddr;
use std::time::Duration;

use super::Stack;
use crate::{eventually, redis_url};

impl Stack {
    /// `floodgate-booking <args>` in the first booking container, as an operator runs it with
    /// `docker compose exec` (its settings and secrets are the container's), with `input` on its
    /// standard input; its exit code and what it printed.
    pub fn booking_command(&self, args: &[&str], input: &[u8]) -> (i32, String) {
        use std::io::Write;
        let mut child = std::process::Command::new(&self.docker.client)
            .env("DOCKER_HOST", &self.docker.host)
            .args([
                "exec",
                "--interactive",
                &self.bookings[0].name,
                "floodgate-booking",
            ])
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("docker exec runs");
        child.stdin.take().unwrap().write_all(input).unwrap();
        let out = child.wait_with_output().unwrap();
        (
            out.status.code().unwrap_or(-1),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    }

    /// Whether container `name` is running.
    pub fn running(&self, name: &str) -> bool {
        self.docker
            .run(&["inspect", "--format", "{{.State.Running}}", name])
            .stdout
            .starts_with(b"true")
    }

    /// The edge's URL for `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.edge)
    }

    /// Waits until container `name` has exited, and returns its exit code.
    pub async fn exited(&self, name: &str, timeout: Duration) -> i64 {
        eventually(&format!("{name} exits"), timeout, async || {
            let out = self.docker.run(&[
                "inspect",
                "--format",
                "{{.State.Running}} {{.State.ExitCode}}",
                name,
            ]);
            let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            text.strip_prefix("false ")
                .and_then(|code| code.parse::<i64>().ok())
        })
        .await
    }

    /// Writes `spec` to the catalog as sale `id` and arms it, as `floodgate-booking sale create
    /// --arm` does, in this run's database and Redis prefix.
    pub async fn create_sale(&self, db: &sqlx::PgPool, id: &str, spec: &crate::SaleSpec) {
        // The Redis the services use: the cluster this run put them on, or the one Redis.
        let args = if self.options.redis_cluster.is_empty() {
            crate::redis_args_on(&self.prefix, Some(redis_url()), None)
        } else {
            crate::redis_args_on(&self.prefix, None, Some(&self.options.redis_cluster))
        };
        let redis = floodgate_platform::runtime::connect_redis(&args)
            .await
            .expect("redis");
        let keys = floodgate_platform::keys::Keys::new(self.prefix.clone());
        floodgate_booking::catalog::create_sale(db, &spec.to_file(id))
            .await
            .expect("create sale");
        floodgate_booking::catalog::arm_sale(db, &redis, &keys, id)
            .await
            .expect("arm sale");
    }

    /// Every service's metrics listener: the gateways', the booking instances' and the
    /// consumer's (the edge's is `edge_metrics`).
    pub fn metrics_targets(&self) -> Vec<SocketAddr> {
        let gateways = self
            .gateways
            .iter()
            .map(|c| c.listen("FLOODGATE_GATEWAY_ADMIN_LISTEN"));
        let bookings = self
            .bookings
            .iter()
            .map(|c| c.listen("FLOODGATE_ADMIN_LISTEN"));
        gateways
            .chain(bookings)
            .chain([self.consumer.listen("FLOODGATE_CONSUMER_METRICS_LISTEN")])
            .collect()
    }

    /// The edge's container.
    pub fn edge_name(&self) -> String {
        format!("{}-cdn", self.run)
    }

    /// The edge's waiting-room URL for `sale`.
    pub fn ws_url(&self, sale: &str) -> String {
        format!("ws://{}/ws?sale={sale}", self.edge)
    }

    /// The ops token compose-secrets.sh made.
    pub fn ops_token(&self) -> String {
        std::fs::read_to_string(self.secrets.join("ops_token")).unwrap()
    }
}
