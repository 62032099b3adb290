//! Test harness: spawns Floodgate's real services in-process on port 0, against the real Redis,
//! Kafka broker and PostgreSQL, each test isolated by a fresh database (from `#[sqlx::test]`),
//! a random Redis key prefix, a fresh topic and a fresh consumer group.
//!
//! Where the services are comes from the environment, with the local stack's defaults:
//! `FLOODGATE_TEST_REDIS_URL` (redis://127.0.0.1:6379) and `FLOODGATE_TEST_KAFKA_BROKERS`
//! (127.0.0.1:9092). The database server is `DATABASE_URL`, as `#[sqlx::test]` reads it.
//!
//! `spawn` starts a test's Floodgate, `calls` is what a test asks of it, `wait` how it waits,
//! `databases` and `kafka` what it prepares beforehand.

// Scenarios read top to bottom as one story; the 80-line limit is for service code.
#![allow(clippy::too_many_lines)]

pub mod broker;
mod calls;
pub mod chaos;
pub mod client;
pub mod containers;
mod databases;
pub mod edge;
pub mod gateways;
mod kafka;
pub mod manifests;
pub mod netns;
pub mod oidc;
mod options;
pub mod prometheus;
pub mod redis_cluster;
pub mod services;
mod spawn;
pub use spawn::settings;
pub mod tls;
mod wait;

pub use databases::{fresh_database, fresh_db, migrated_pool};
pub use kafka::{create_topic, ensure_topics, event, produce};
pub use options::TestOptions;
pub use wait::{eventually, Probe};

use std::net::SocketAddr;
use std::time::Duration;

pub use floodgate_client::booking::{Answer, Failure};

use floodgate_booking::catalog::{self, ClassDef, PoolDef, SaleFile, TrainDef};
use floodgate_client::BookingClient;
use floodgate_platform::keys::Keys;
use floodgate_platform::runtime::RedisArgs;
use floodgate_platform::runtime::RedisConn;
use floodgate_protocol::api::booking::{PaymentStarted, ReservationCreated};
use floodgate_protocol::events::{Envelope, Event, ReservationData};
use floodgate_protocol::settings::Door;
use floodgate_protocol::token::TokenSigner;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

pub fn redis_url() -> String {
    std::env::var("FLOODGATE_TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

/// The single test Redis' address, for a fault-injecting proxy in front of it.
pub fn redis_addr() -> std::net::SocketAddr {
    redis_url()
        .trim_start_matches("redis://")
        .trim_end_matches('/')
        .parse()
        .expect("the test Redis URL is redis://<ip>:<port>")
}

/// The seed nodes of the Redis Cluster the tests run against (`FLOODGATE_TEST_REDIS_CLUSTER`,
/// comma-separated; `deploy/test.sh` sets it for its cluster pass), or none: the single Redis.
pub fn redis_cluster_nodes() -> Vec<String> {
    std::env::var("FLOODGATE_TEST_REDIS_CLUSTER")
        .map(|nodes| {
            nodes
                .split(',')
                .filter(|n| !n.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// The seed nodes of the test cluster for the tests that need a Redis Cluster whatever the pass
/// (`FLOODGATE_TEST_CLUSTER`, which `deploy/test.sh` sets after `deploy/stack.sh cluster-up`).
pub fn test_cluster() -> Vec<String> {
    let nodes: Vec<String> = std::env::var("FLOODGATE_TEST_CLUSTER")
        .unwrap_or_default()
        .split(',')
        .filter(|n| !n.is_empty())
        .map(str::to_owned)
        .collect();
    assert!(
        !nodes.is_empty(),
        "no test cluster: run `deploy/stack.sh cluster-up` and set FLOODGATE_TEST_CLUSTER to the \
         seeds it prints (deploy/test.sh does both)"
    );
    nodes
}

/// The environment of a service binary a test starts, naming the Redis under test (the
/// cluster's seeds on the cluster pass).
pub fn redis_env() -> Vec<(&'static str, String)> {
    let mut env = vec![("FLOODGATE_REDIS_URL", redis_url())];
    let cluster = redis_cluster_nodes();
    if !cluster.is_empty() {
        env.push(("FLOODGATE_REDIS_CLUSTER_NODES", cluster.join(",")));
    }
    env
}

/// Where the services under test find Redis: `url` if a test put something in front of Redis
/// (a fault-injecting proxy), else the cluster under test or the single Redis.
pub fn redis_args(prefix: &str, url: Option<String>) -> RedisArgs {
    redis_args_on(prefix, url, None)
}

/// As [`redis_args`], on the cluster `cluster` if given.
pub fn redis_args_on(prefix: &str, url: Option<String>, cluster: Option<&[String]>) -> RedisArgs {
    let cluster = match (&url, cluster) {
        (Some(_), _) => Vec::new(),
        (None, Some(seeds)) => seeds.to_vec(),
        (None, None) => redis_cluster_nodes(),
    };
    RedisArgs {
        redis_url: url.unwrap_or_else(redis_url),
        redis_prefix: prefix.to_owned(),
        redis_cluster_nodes: cluster,
        redis_tls_ca_file: None,
        redis_tls_cert_file: None,
        redis_tls_key_file: None,
    }
}

pub fn kafka_brokers() -> String {
    std::env::var("FLOODGATE_TEST_KAFKA_BROKERS").unwrap_or_else(|_| "127.0.0.1:9092".into())
}

/// A payment started at a provider, as the gatekeeper records it: `payment_id`, with a checkout
/// of its own name.
pub fn started_payment(payment_id: &str) -> floodgate_booking::gatekeeper::StartedPayment {
    floodgate_booking::gatekeeper::StartedPayment {
        payment_id: payment_id.to_owned(),
        checkout_url: format!("https://pay.example/{payment_id}"),
        status: "requires_payment".to_owned(),
    }
}

/// A short random name, for prefixes, topics, groups and sales.
pub fn unique(prefix: &str) -> String {
    format!(
        "{prefix}{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    )
}

/// A fresh secret of 32 random hex characters after `prefix`: as long as the services require.
pub fn secret(prefix: &str) -> String {
    format!("{prefix}{}", uuid::Uuid::new_v4().simple())
}

/// The edge's key (`FLOODGATE_EDGE_KEY`), one per test process: every service a test spawns
/// seals what it issues with it, and every edge a test starts checks seals with it.
pub fn edge_key() -> &'static str {
    static KEY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    KEY.get_or_init(|| secret("ek_"))
}

/// `token` (a JWT, a pass) with its signature's last character changed: well formed, so
/// checking it costs a signature verification, and it fails.
pub fn with_a_wrong_signature(token: &str) -> String {
    let last = if token.ends_with('A') { "B" } else { "A" };
    format!("{}{last}", &token[..token.len() - 1])
}

/// An admission token for `sale` signed by `signer` (a gateway's key, or one being rotated in or
/// out), valid for `ttl_ms` from now, sealed for the edge as a gateway issues it
/// ([`edge_key`]).
pub fn pass(
    signer: &TokenSigner,
    sale: &str,
    ticket: u64,
    max_seats: u32,
    ttl_ms: i64,
    buyer: Option<&str>,
) -> String {
    let now = floodgate_protocol::now_millis();
    let seal = floodgate_platform::clients::EdgeSeal::parse(Some(&edge_key().to_owned().into()))
        .expect("a key the edge can hold");
    seal.seal(&signer.sign(&floodgate_protocol::token::AdmissionClaims {
        sale: sale.to_owned(),
        ticket,
        jti: uuid::Uuid::new_v4().simple().to_string(),
        max_seats,
        iat_ms: now,
        exp_ms: now + ttl_ms,
        buyer: buyer.map(str::to_owned),
    }))
}

/// Settings of the sale a test runs.
#[derive(Clone, Debug)]
pub struct SaleSpec {
    pub pools: Vec<(String, u32)>,
    pub opens_in: Duration,
    pub admission_rate: f64,
    pub max_seats: u32,
    pub token_ttl_secs: u32,
    pub hold_ttl_secs: u32,
    pub active_cap: u32,
    pub stock_factor: f64,
    /// How long an unspent pass counts against the stock (`None`: its whole life).
    pub stock_hold_secs: Option<u32>,
    /// Who may join and what they must show.
    pub door: Door,
}

impl Default for SaleSpec {
    fn default() -> Self {
        Self {
            pools: vec![("p1".into(), 10)],
            opens_in: Duration::from_secs(2),
            admission_rate: 50.0,
            max_seats: 1,
            token_ttl_secs: 120,
            hold_ttl_secs: 300,
            active_cap: 10_000,
            stock_factor: 2.0,
            stock_hold_secs: None,
            door: Door::default(),
        }
    }
}

impl SaleSpec {
    /// The sale as a sale file would declare it.
    pub fn to_file(&self, id: &str) -> SaleFile {
        SaleFile {
            id: id.to_owned(),
            name: format!("Test sale {id}"),
            opens_at: time::OffsetDateTime::now_utc() + self.opens_in,
            hold_ttl_secs: self.hold_ttl_secs,
            token_ttl_secs: self.token_ttl_secs,
            max_seats_per_booking: self.max_seats,
            admission_rate: self.admission_rate,
            active_cap: self.active_cap,
            stock_factor: self.stock_factor,
            stock_hold_secs: self.stock_hold_secs,
            identity: self.door.identity.as_str().into(),
            max_seats_per_buyer: self.door.max_seats_per_buyer,
            challenge: self.door.challenge.as_str().into(),
            pow_difficulty: self.door.pow_difficulty,
            grace_secs: self.door.grace_secs,
            classes: vec![ClassDef {
                code: "3A".into(),
                name: "AC 3 Tier".into(),
            }],
            trains: vec![TrainDef {
                id: "12951".into(),
                name: "Test Rajdhani".into(),
                origin: "MMCT".into(),
                destination: "NDLS".into(),
                departs: "17:00".into(),
                arrives: "08:32".into(),
            }],
            pools: self
                .pools
                .iter()
                .map(|(id, capacity)| PoolDef {
                    id: id.clone(),
                    train: "12951".into(),
                    date: "2026-12-01".into(),
                    class: "3A".into(),
                    quota: "TQ".into(),
                    capacity: *capacity,
                    fare_minor: 150_000,
                    currency: "INR".into(),
                })
                .collect(),
        }
    }
}

/// The audience of the test sign-in's identity tokens.
pub const IDENTITY_AUDIENCE: &str = "floodgate-test";

/// Floodgate's three services running against the real dependencies, isolated for one test.
pub struct TestApp {
    pub db: PgPool,
    pub redis: RedisConn,
    pub keys: Keys,
    pub topic: String,
    /// The consumer's group on `topic`.
    pub consumer_group: String,
    /// The gateways' signing key: tests use it to make tokens the booking API must accept,
    /// and a different key to make tokens it must refuse.
    pub signer: TokenSigner,
    /// The secret the sandbox provider signs webhooks with.
    pub webhook_secret: String,
    /// The key the booking service presents to the payment provider's API.
    payment_api_key: String,
    /// The ops API's bearer token, and where it listens.
    pub ops_token: String,
    /// The key the audit trail's rows are chained with (`FLOODGATE_AUDIT_KEY`), kept out of
    /// PostgreSQL.
    pub audit_key: String,
    /// The key reservations' secrets are made with (`FLOODGATE_RESERVATION_KEY`), the same on
    /// every booking instance of the app.
    pub reservation_key: String,
    pub admin: SocketAddr,
    pub gateway: SocketAddr,
    /// The gateway's admin listener (its metrics).
    pub gateway_admin: SocketAddr,
    pub booking: SocketAddr,
    /// The sandbox payment provider.
    pub sandbox: SocketAddr,
    pub http: reqwest::Client,
    /// The broker booking and the consumer use.
    kafka_brokers: String,
    /// The Redis Cluster the app's services run on when a test asked for one (its seeds); the
    /// binaries a test runs for the app are pointed at it too.
    redis_cluster: Option<Vec<String>>,
    shutdown: CancellationToken,
}

impl TestApp {
    /// The key the payment provider's API wants (the sandbox's, here).
    pub fn payment_api_key(&self) -> &str {
        &self.payment_api_key
    }

    /// Writes `spec` to the catalog as sale `id` and arms it, as the admin command does.
    pub async fn create_sale(&self, id: &str, spec: &SaleSpec) {
        catalog::create_sale(&self.db, &spec.to_file(id))
            .await
            .expect("create sale");
        catalog::arm_sale(&self.db, &self.redis, &self.keys, id)
            .await
            .expect("arm sale");
    }

    /// A fresh sale (its id starting with `prefix`) that opens in an hour: its clients stay in
    /// the pre-queue for the whole test.
    pub async fn pending_sale(&self, prefix: &str) -> String {
        self.pending_sale_with(prefix, Door::default()).await
    }

    /// [`TestApp::pending_sale`], with `door`.
    pub async fn pending_sale_with(&self, prefix: &str, door: Door) -> String {
        let sale = unique(prefix);
        let spec = SaleSpec {
            opens_in: Duration::from_secs(3600),
            door,
            ..SaleSpec::default()
        };
        self.create_sale(&sale, &spec).await;
        sale
    }

    pub fn ws_url(&self, sale: &str) -> String {
        format!("ws://{}/ws?sale={sale}", self.gateway)
    }

    pub fn reservations_url(&self, sale: &str) -> String {
        format!("http://{}/v1/sales/{sale}/reservations", self.booking)
    }

    /// The booking API as a client sees it.
    pub fn booking_client(&self) -> BookingClient {
        BookingClient::new(self.http.clone(), self.booking)
    }
}

/// Asserts that `answer` is a refusal with `status` and error `code`.
#[track_caller]
pub fn assert_refused<T: std::fmt::Debug>(answer: Answer<T>, status: u16, code: &str) {
    match answer {
        Err(refused) => assert_eq!(
            (refused.status(), refused.code()),
            (status, code),
            "{refused}"
        ),
        Ok(body) => panic!("expected {status} {code}, got {body:?}"),
    }
}

/// One series of a process' Prometheus text at `http://<metrics>/metrics` (`name{labels}` as
/// rendered), or `None` while it is not there (or the process does not answer yet).
pub async fn scrape(metrics: std::net::SocketAddr, series: &str) -> Option<f64> {
    let text = reqwest::get(format!("http://{metrics}/metrics"))
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    text.lines().find_map(|l| {
        l.strip_prefix(series)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

/// Runs a command to its end (with `RUST_LOG=error`): its exit code and everything it printed
/// (standard output, then standard error).
pub fn run_to_end(command: &mut std::process::Command) -> (i32, String) {
    let output = command
        .env("RUST_LOG", "error")
        .output()
        .expect("the binary runs");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.code().unwrap_or(-1), said)
}

impl Drop for TestApp {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// The workspace binary `name` next to this test's own executable (deploy/test.sh builds the
/// binaries before the tests).
/// Where `deploy/stack.sh` keeps what it installs: `FLOODGATE_HOME`, else ~/.cache/floodgate.
pub fn floodgate_home() -> std::path::PathBuf {
    std::env::var("FLOODGATE_HOME")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| {
            std::path::PathBuf::from(std::env::var("HOME").unwrap_or_else(|_| "/root".into()))
                .join(".cache/floodgate")
        })
}

/// A tool `deploy/stack.sh tools` installs, by its path under `$FLOODGATE_HOME/tools`.
pub fn tool(path: &str) -> std::path::PathBuf {
    floodgate_home().join("tools").join(path)
}

/// Copies the browser client (the page, its styles and every module it imports, the one from
/// npm included, which deploy/stack.sh installs beside the page's own) into `dir`.
pub fn copy_page(dir: &std::path::Path) {
    let client = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../static");
    for entry in std::fs::read_dir(&client).unwrap() {
        let path = entry.unwrap().path();
        let page_file = path
            .extension()
            .is_some_and(|e| e == "js" || e == "css" || e == "html");
        if page_file {
            std::fs::copy(&path, dir.join(path.file_name().unwrap())).unwrap();
        }
    }
}

pub fn binary(name: &str) -> std::path::PathBuf {
    let mut dir = std::env::current_exe().unwrap();
    dir.pop();
    if dir.ends_with("deps") {
        dir.pop();
    }
    let binary = dir.join(name);
    assert!(
        binary.exists(),
        "{} is missing: build the binaries first (deploy/test.sh does)",
        binary.display()
    );
    binary
}

/// Runs `floodgate-loadgen <args>` with a JSON report: its exit status, what it printed, and
/// the report.
pub fn loadgen(args: &[&str]) -> (i32, String, serde_json::Value) {
    let json = std::env::temp_dir().join(format!("{}.json", unique("loadgen-")));
    let output = std::process::Command::new(binary("floodgate-loadgen"))
        .args(args)
        .arg("--json")
        .arg(&json)
        .output()
        .expect("the loadgen binary runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let report = std::fs::read(&json)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_else(|| {
            panic!(
                "no JSON report:\n{stdout}\n{}",
                String::from_utf8_lossy(&output.stderr)
            )
        });
    let _ = std::fs::remove_file(&json);
    (output.status.code().unwrap_or(-1), stdout, report)
}
