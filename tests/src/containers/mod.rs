//! The shipped deployment, run: the Floodgate services of `deploy/compose.yaml`, each a container
//! of the image `deploy/image.sh` built, started from what the compose file says (command,
//! settings, secrets, replicas, read-only root) with the few changes that running them on the
//! host's network takes. Those changes are all here, in [`Stack::settings`], and each is named.
//!
//! Why not `docker compose up`: the machines this runs on reach no container registry and allow
//! no bridge network, so every container shares the host's loopback. Service names do not
//! resolve there and each instance needs ports of its own, which is what this module gives them;
//! the compose file itself stays the one a Compose v2 user runs (docs/deploy.md).
//!
//! - [`compose`]: compose.yaml, read; [`docker`]: the engine; `run`: how each service becomes
//!   `docker run`; `operate`: what a test does to a running stack; here, the stack itself.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::{kafka_brokers, redis_url, unique};

mod compose;
mod docker;
mod operate;
mod run;

pub use compose::{bytes, Compose, Service};
pub use docker::Docker;

/// The repository's root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A free port on 127.0.0.1 (free when asked: nothing holds it for the container), and never one
/// this process handed out before: a stack's containers are all planned before any of them
/// binds, and the system may offer a port again while nothing holds it (an edge once got a
/// gateway's port, failed to bind, and the test talked to the gateway in its place).
fn free_addr() -> SocketAddr {
    static GIVEN: std::sync::Mutex<std::collections::BTreeSet<u16>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    let mut given = GIVEN.lock().unwrap();
    loop {
        let addr = crate::gateways::free_port();
        if given.insert(addr.port()) {
            return addr;
        }
    }
}

/// One running container of the stack.
#[derive(Clone, Debug)]
pub struct Container {
    pub name: String,
    /// Its listeners by setting (`FLOODGATE_GATEWAY_LISTEN` and so on).
    pub listens: BTreeMap<String, SocketAddr>,
}

impl Container {
    pub fn listen(&self, setting: &str) -> SocketAddr {
        self.listens[setting]
    }
}

/// What the test changes on top of compose.yaml for one run.
pub struct StackOptions {
    /// The addresses the gateways trust to name the client (the edge connects from 127.0.0.1
    /// on the host's network; compose trusts its bridge network's ranges).
    pub trusted_proxies: String,
    /// The broker in compose's `kafka` place (default: the machine's): a test that cuts the
    /// broker puts a private one behind a fault-injecting proxy here.
    pub kafka_brokers: Option<String>,
    /// The seed nodes of a Redis Cluster the services use instead of compose's one Redis
    /// (`FLOODGATE_REDIS_CLUSTER_NODES`, as the production overlay sets it); empty: the
    /// machine's Redis in compose's `redis` place.
    pub redis_cluster: Vec<String>,
}

impl Default for StackOptions {
    fn default() -> Self {
        StackOptions {
            trusted_proxies: "127.0.0.1/32".into(),
            kafka_brokers: None,
            redis_cluster: Vec::new(),
        }
    }
}

/// The stack of `deploy/compose.yaml` running in containers on the host's network, against the
/// machine's Redis, PostgreSQL (a fresh database) and broker, with a Redis prefix, topic and
/// consumer group of its own. Every container is removed when it drops.
pub struct Stack {
    pub docker: Docker,
    pub compose: Compose,
    /// Names every container of this run (`docker ps --filter label=floodgate-test=<run>`).
    pub run: String,
    pub edge: SocketAddr,
    /// The edge's own metrics listener.
    pub edge_metrics: SocketAddr,
    /// Where the edge sends plain http:// to https://.
    pub edge_redirect: SocketAddr,
    pub gateways: Vec<Container>,
    pub bookings: Vec<Container>,
    pub consumer: Container,
    pub sandbox: Container,
    pub secrets: PathBuf,
    pub prefix: String,
    pub topic: String,
    pub database_url: String,
    /// Host names of compose.yaml and what each stands for here.
    hosts: Vec<(String, String)>,
    pub options: StackOptions,
}

/// The listeners each service opens, by the setting that places it (the edge's by its own).
/// The Kubernetes manifests' container ports are these, and nothing else.
pub const LISTENERS: [(&str, &[&str]); 5] = [
    (
        "gateway",
        &["FLOODGATE_GATEWAY_LISTEN", "FLOODGATE_GATEWAY_ADMIN_LISTEN"],
    ),
    (
        "booking",
        &["FLOODGATE_BOOKING_LISTEN", "FLOODGATE_ADMIN_LISTEN"],
    ),
    ("consumer", &["FLOODGATE_CONSUMER_METRICS_LISTEN"]),
    ("sandbox", &["FLOODGATE_SANDBOX_LISTEN"]),
    (
        "cdn",
        &[
            "FLOODGATE_EDGE_LISTEN",
            "FLOODGATE_EDGE_METRICS_LISTEN",
            "FLOODGATE_EDGE_REDIRECT_LISTEN",
        ],
    ),
];

/// How each long-running service shows it is ready: on which listener, and at which path (none:
/// its port open). The test run waits for these, and the manifests' readiness probes are these.
pub const READINESS: [(&str, &str, Option<&str>); 5] = [
    ("gateway", "FLOODGATE_GATEWAY_ADMIN_LISTEN", Some("/readyz")),
    ("booking", "FLOODGATE_ADMIN_LISTEN", Some("/readyz")),
    (
        "consumer",
        "FLOODGATE_CONSUMER_METRICS_LISTEN",
        Some("/readyz"),
    ),
    ("sandbox", "FLOODGATE_SANDBOX_LISTEN", None),
    ("cdn", "FLOODGATE_EDGE_METRICS_LISTEN", None),
];

impl Stack {
    /// Makes the secrets with `deploy/compose-secrets.sh`, runs the migrations and the topic
    /// command to completion, then starts every other Floodgate service as many times as
    /// compose.yaml's replicas say, and the edge in front; returns once every one is ready.
    pub async fn up(database_url: &str, options: StackOptions) -> Stack {
        let docker = Docker::from_env();
        let compose = Compose::load();
        let run = unique("fgc");
        let secrets = std::env::temp_dir().join(format!("{run}-secrets"));
        let script = repo().join("deploy/compose-secrets.sh");
        let keygen = format!(
            "{} run --rm --network host {} floodgate-gateway keygen",
            docker.client.display(),
            docker.image
        );
        let made = Command::new(&script)
            .env("SECRETS_DIR", &secrets)
            .env("FLOODGATE_KEYGEN", keygen)
            .env("DOCKER_HOST", &docker.host)
            .output()
            .expect("compose-secrets.sh runs");
        assert!(
            made.status.success(),
            "compose-secrets.sh: {}",
            String::from_utf8_lossy(&made.stderr)
        );
        // The machine's PostgreSQL instead of compose's own (the URL keeps the file's mode).
        std::fs::write(secrets.join("database_url"), database_url).unwrap();

        let edge = free_addr();
        let mut stack = Stack {
            docker,
            compose,
            prefix: format!("{run}:"),
            topic: format!("floodgate.{run}"),
            run,
            edge,
            edge_metrics: free_addr(),
            edge_redirect: free_addr(),
            gateways: Vec::new(),
            bookings: Vec::new(),
            consumer: Container {
                name: String::new(),
                listens: BTreeMap::new(),
            },
            sandbox: Container {
                name: String::new(),
                listens: BTreeMap::new(),
            },
            secrets,
            database_url: database_url.to_owned(),
            hosts: Vec::new(),
            options,
        };
        // Every instance's ports are chosen before any starts: they name each other.
        let bookings = stack.plan("booking");
        let gateways = stack.plan("gateway");
        let consumer = stack.plan("consumer").remove(0);
        let sandbox = stack.plan("sandbox").remove(0);
        let redis = redis_url();
        let redis_host = redis.trim_start_matches("redis://").trim_end_matches('/');
        stack.hosts = vec![
            ("redis:6379".into(), redis_host.to_owned()),
            (
                "kafka:9092".into(),
                stack
                    .options
                    .kafka_brokers
                    .clone()
                    .unwrap_or_else(kafka_brokers),
            ),
            (
                "booking:8081".into(),
                bookings[0].listen("FLOODGATE_BOOKING_LISTEN").to_string(),
            ),
            (
                "sandbox:8082".into(),
                sandbox.listen("FLOODGATE_SANDBOX_LISTEN").to_string(),
            ),
            ("cdn:8000".into(), edge.to_string()),
            // What a browser on the host types: the sandbox's and the edge's public URLs.
            (
                "localhost:8082".into(),
                format!(
                    "localhost:{}",
                    sandbox.listen("FLOODGATE_SANDBOX_LISTEN").port()
                ),
            ),
            (
                "localhost:8000".into(),
                format!("localhost:{}", edge.port()),
            ),
        ];

        for job in ["migrate", "topics"] {
            stack.once(job);
        }
        // The sandbox first: the services fetch the sign-in's keys from it as they start.
        stack.start("sandbox", &sandbox);
        for c in &bookings {
            stack.start("booking", c);
        }
        stack.start("consumer", &consumer);
        for c in &gateways {
            stack.start("gateway", c);
        }
        stack.bookings = bookings;
        stack.gateways = gateways;
        stack.consumer = consumer;
        stack.sandbox = sandbox;
        stack.start_edge();
        stack.ready().await;
        stack
    }

    /// Every container ready as [`READINESS`] says: its `/readyz` answering 200, or its port
    /// open.
    async fn ready(&self) {
        let http = reqwest::Client::new();
        let edge = Container {
            name: self.edge_name(),
            listens: [
                ("FLOODGATE_EDGE_LISTEN".to_owned(), self.edge),
                (
                    "FLOODGATE_EDGE_METRICS_LISTEN".to_owned(),
                    self.edge_metrics,
                ),
                (
                    "FLOODGATE_EDGE_REDIRECT_LISTEN".to_owned(),
                    self.edge_redirect,
                ),
            ]
            .into(),
        };
        for (service, listener, path) in READINESS {
            let containers: Vec<&Container> = match service {
                "gateway" => self.gateways.iter().collect(),
                "booking" => self.bookings.iter().collect(),
                "consumer" => vec![&self.consumer],
                "sandbox" => vec![&self.sandbox],
                _ => vec![&edge],
            };
            for c in containers {
                let addr = c.listen(listener);
                let ready = tokio::time::timeout(Duration::from_secs(60), async {
                    while self.running(&c.name) {
                        let answered = match path {
                            Some(path) => http
                                .get(format!("http://{addr}{path}"))
                                .send()
                                .await
                                .is_ok_and(|r| r.status() == 200),
                            None => tokio::net::TcpStream::connect(addr).await.is_ok(),
                        };
                        if answered {
                            return;
                        }
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                })
                .await;
                assert!(
                    ready.is_ok() && self.running(&c.name),
                    "{} did not become ready:\n{}",
                    c.name,
                    self.docker.logs(&c.name, 40)
                );
            }
        }
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        let names = self.docker.run(&[
            "ps",
            "--all",
            "--quiet",
            "--filter",
            &format!("label=floodgate-test={}", self.run),
        ]);
        let ids: Vec<String> = String::from_utf8_lossy(&names.stdout)
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        if std::thread::panicking() {
            for id in &ids {
                eprintln!("--- {id}:\n{}", self.docker.logs(id, 30));
            }
        }
        if !ids.is_empty() {
            let mut args = vec!["rm", "--force"];
            args.extend(ids.iter().map(String::as_str));
            let _ = self.docker.run(&args);
        }
        let volumes = self.docker.run(&[
            "volume",
            "ls",
            "--quiet",
            "--filter",
            &format!("label=floodgate-test={}", self.run),
        ]);
        for volume in String::from_utf8_lossy(&volumes.stdout).split_whitespace() {
            let _ = self.docker.run(&["volume", "rm", "--force", volume]);
        }
        let _ = std::fs::remove_dir_all(&self.secrets);
    }
}
