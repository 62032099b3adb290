//! Test harness: spawns Floodgate's real services in-process on port 0, against the real Redis,
//! Kafka broker and PostgreSQL, each test isolated by a fresh database (from `#[sqlx::test]`),
//! a random Redis key prefix, a fresh topic and a fresh consumer group.
//!
//! Where the services are comes from the environment, with the local stack's defaults:
//! `FLOODGATE_TEST_REDIS_URL` (redis://127.0.0.1:6379) and `FLOODGATE_TEST_KAFKA_BROKERS`
//! (127.0.0.1:9092). The database server is `DATABASE_URL`, as `#[sqlx::test]` reads it.

// Scenarios read top to bottom as one story; the 80-line limit is for service code.
#![allow(clippy::too_many_lines)]

pub mod broker;
pub mod chaos;
pub mod client;
pub mod containers;
pub mod edge;
pub mod gateways;
pub mod manifests;
pub mod oidc;
mod options;
pub mod prometheus;
pub mod redis_cluster;
pub mod services;
pub mod tls;

pub use options::TestOptions;

use std::net::SocketAddr;
use std::time::Duration;

pub use floodgate_client::booking::{Answer, Failure};

use floodgate_booking::catalog::{self, ClassDef, PoolDef, SaleFile, TrainDef};
use floodgate_client::BookingClient;
use floodgate_platform::identity::IdentityArgs;
use floodgate_platform::keys::Keys;
use floodgate_platform::runtime::RedisConn;
use floodgate_platform::runtime::{KafkaArgs, RedisArgs};
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

/// An admission token for `sale` signed by `signer` (a gateway's key, or one being rotated in or
/// out), valid for `ttl_ms` from now.
pub fn pass(
    signer: &TokenSigner,
    sale: &str,
    ticket: u64,
    max_seats: u32,
    ttl_ms: i64,
    buyer: Option<&str>,
) -> String {
    let now = floodgate_protocol::now_millis();
    signer.sign(&floodgate_protocol::token::AdmissionClaims {
        sale: sale.to_owned(),
        ticket,
        jti: uuid::Uuid::new_v4().simple().to_string(),
        max_seats,
        iat_ms: now,
        exp_ms: now + ttl_ms,
        buyer: buyer.map(str::to_owned),
    })
}

/// The reservations topic `topic` (with `partitions`) and its dead-letter topic, made as
/// `floodgate-booking topics ensure` makes them (and asserted new).
pub async fn ensure_topics(brokers: &str, topic: &str, partitions: i32) {
    use floodgate_booking::topics::{ensure, TopicSettings, TopicState};
    let settings = TopicSettings {
        partitions,
        dlq_partitions: 1,
        replication_factor: 1,
        min_insync_replicas: None,
    };
    let kafka = floodgate_platform::kafka::KafkaArgs::plaintext(brokers, topic);
    let (dlq, probe) = (kafka.dead_letter_topic(None), format!("{topic}.probe"));
    let states = ensure(&kafka, (&dlq, &probe), &settings)
        .await
        .expect("topics ensure");
    assert!(
        states
            .iter()
            .all(|(_, state)| *state == TopicState::Created),
        "{states:?}"
    );
}

/// Creates one topic on the real broker (Tansu does not auto-create topics), bypassing
/// `topics ensure` (to make one that differs from the settings, say).
pub async fn create_topic(brokers: &str, topic: &str, partitions: i32) {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .create()
        .expect("admin client");
    let results = admin
        .create_topics(
            &[NewTopic::new(topic, partitions, TopicReplication::Fixed(1))],
            &AdminOptions::new().operation_timeout(Some(Duration::from_secs(10))),
        )
        .await
        .expect("create_topics request");
    for result in results {
        result.unwrap_or_else(|(t, e)| panic!("creating topic {t}: {e}"));
    }
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

/// The identity settings of services that trust the sign-in stand-in of the sandbox at
/// `sandbox` (its keys fetched over HTTP, as from a real issuer).
fn identity_args(sandbox: &SocketAddr, buyer_id_key: Option<&str>) -> IdentityArgs {
    IdentityArgs {
        identity_issuer: Some(format!("http://{sandbox}")),
        identity_audience: Some(IDENTITY_AUDIENCE.into()),
        identity_jwks_url: Some(format!("http://{sandbox}/.well-known/jwks.json")),
        identity_jwks_file: None,
        identity_jwks_allow_http: false,
        identity_algorithms: floodgate_platform::identity::DEFAULT_ALGORITHMS.into(),
        identity_leeway_secs: 0,
        buyer_id: if buyer_id_key.is_some() {
            "hash"
        } else {
            "subject"
        }
        .into(),
        buyer_id_key: buyer_id_key.map(|k| k.to_owned().into()),
    }
}

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
    /// Starts gateway, booking, consumer and the sandbox payment provider on port 0 with a
    /// fresh prefix, topic and group.
    pub async fn spawn(db: PgPool) -> TestApp {
        Self::spawn_with(db, TestOptions::default()).await
    }

    pub async fn spawn_with(db: PgPool, options: TestOptions) -> TestApp {
        // Logs go to the test's captured output (RUST_LOG=debug for more).
        // The tests export no spans (no OTEL_EXPORTER_OTLP_ENDPOINT): nothing to keep.
        let _ = floodgate_platform::runtime::init_tracing(false, "floodgate-tests");
        floodgate_platform::runtime::install_tls_provider();
        let prefix = unique("t") + ":";
        let topic = unique("floodgate.test.");
        let brokers = options.kafka_brokers.clone().unwrap_or_else(kafka_brokers);
        ensure_topics(&brokers, &topic, 3).await;
        let signer = TokenSigner::generate("test-key");
        let webhook_secret = secret("whsec_");
        let payment_api_key = secret("pk_test_");
        let ops_token = secret("ops_");
        let audit_key = secret("audit_");
        let shutdown = CancellationToken::new();

        // The gateway, booking and the sandbox provider name each other: bind all three listeners
        // before configuring any.
        let booking_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let booking = booking_listener.local_addr().unwrap();
        let sandbox_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let sandbox = sandbox_listener.local_addr().unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let gateway = listener.local_addr().unwrap();
        // The sign-in stand-in serves the identity keys the services fetch when they start.
        let sandbox_app = floodgate_sandbox::Sandbox::new(floodgate_sandbox::SandboxConfig {
            listen: sandbox.to_string(),
            public_url: format!("http://{sandbox}"),
            webhook_url: format!("http://{booking}/v1/payments/webhook"),
            webhook_secret: webhook_secret.clone().into(),
            api_key: payment_api_key.clone().into(),
            signin: floodgate_sandbox::signin::SignInConfig {
                enabled: true,
                audience: IDENTITY_AUDIENCE.into(),
                return_origins: vec![format!("http://{gateway}")],
            },
        });
        let sandbox_stop = shutdown.child_token();
        tokio::spawn(floodgate_platform::listener::serve(
            sandbox_listener,
            sandbox_app.router(),
            floodgate_platform::listener::Limits::internal(),
            async move { sandbox_stop.cancelled().await },
        ));

        let mut identity = identity_args(&sandbox, options.buyer_id_key.as_deref());
        if let Some(issuer) = &options.identity_issuer {
            identity.identity_issuer = Some(issuer.issuer.clone());
            identity.identity_audience = Some(issuer.audience.clone());
            identity.identity_jwks_url = Some(issuer.jwks_url.clone());
        }
        // The app's Redis: `url` (a proxy, a private server), else the cluster or the shared one,
        // with the CA its `rediss://` connections verify against.
        let redis_for = |url: Option<String>| RedisArgs {
            redis_tls_ca_file: options.redis_tls_ca_file.clone(),
            ..redis_args_on(&prefix, url, options.redis_cluster.as_deref())
        };
        let gateway_config = floodgate_gateway::Config {
            listen: "127.0.0.1:0".into(),
            admin_listen: "127.0.0.1:0".into(),
            redis: redis_for(
                options
                    .gateway_redis_url
                    .clone()
                    .or_else(|| options.redis_url.clone()),
            ),
            identity: identity.clone(),
            token_key_id: signer.kid().to_owned(),
            token_signing_key: signer.seed_base64().into(),
            tick_ms: 50,
            lease_ms: 2_000,
            position_interval_ms: 200,
            max_connections_per_ip: options.max_connections_per_ip,
            joins_per_sec_per_ip: options.joins_per_sec_per_ip,
            heartbeat_ms: options.heartbeat_ms,
            idle_timeout_ms: options.idle_timeout_ms,
            send_timeout_ms: 5_000,
            grace_ms: options.grace_ms,
            max_sessions: options.max_sessions,
            trusted_proxies: options
                .trusted_proxies
                .iter()
                .map(|ip| ipnet::IpNet::from(*ip))
                .collect(),
            ipv6_prefix: 64,
            room_idle_ms: options.room_idle_ms,
            drain_delay_ms: 0,
            static_dir: options.static_dir.clone(),
            signin_origins: Vec::new(),
            booking_url: Some(format!("http://{booking}")),
            checkout_origins: options
                .checkout_origins
                .clone()
                .unwrap_or_else(|| vec![format!("http://{sandbox}")]),
            instance_id: Some("gw-test".into()),
            draw_reads_per_sec: options.draw_reads_per_sec,
            draw_requests_per_sec_per_ip: options.draw_requests_per_sec_per_ip,
            pow_rise_above: options.pow_rise_above,
            pow_ceiling: options.pow_ceiling,
            listener: options.listener(),
        };
        let gateway_state =
            floodgate_gateway::AppState::connect(gateway_config, shutdown.child_token())
                .await
                .expect("gateway state");
        let gateway_admin_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let gateway_admin = gateway_admin_listener.local_addr().unwrap();
        tokio::spawn(floodgate_gateway::run_admin(
            gateway_admin_listener,
            gateway_state.clone(),
        ));
        tokio::spawn(floodgate_gateway::run(listener, gateway_state));

        let booking_config = floodgate_booking::Config {
            listen: booking.to_string(),
            redis: redis_for(
                options
                    .booking_redis_url
                    .clone()
                    .or_else(|| options.redis_url.clone()),
            ),
            kafka: KafkaArgs::plaintext(&brokers, &topic),
            identity: identity.clone(),
            listener: options.listener(),
            delivery_timeout_ms: options.delivery_timeout_ms,
            probe_topic: None,
            token_public_keys: format!("{}={}", signer.kid(), signer.public_base64()),
            payment_provider_url: Some(format!("http://{sandbox}")),
            payment_ca_file: None,
            payment_sandbox: true,
            payment_api_key: Some(payment_api_key.clone().into()),
            webhook_secret: webhook_secret.clone().into(),
            webhook_tolerance_secs: 300,
            admin_listen: "127.0.0.1:0".into(),
            ops_token: ops_token.clone().into(),
            audit_key: audit_key.clone().into(),
            relay_interval_ms: options.relay_interval_ms,
            reaper_interval_ms: options.reaper_interval_ms,
            reconcile_interval_ms: 200,
            // TestApp stops its services with its own token: no signal, nothing to drain.
            drain_delay_ms: 0,
            redis_min_replicas: None,
            redis_replica_timeout_ms: 500,
            instance_id: None,
        };
        let booking_state = floodgate_booking::AppState::connect(&booking_config, db.clone())
            .await
            .expect("booking state");
        let admin_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let admin = admin_listener.local_addr().unwrap();
        tokio::spawn(floodgate_booking::run_admin(
            admin_listener,
            booking_state.clone(),
            shutdown.child_token(),
        ));
        tokio::spawn(floodgate_booking::run(
            booking_listener,
            booking_state,
            shutdown.child_token(),
        ));

        let consumer_group = unique("floodgate-test-");
        let app = TestApp {
            db,
            redis: floodgate_platform::runtime::connect_redis(&redis_for(
                options.redis_url.clone(),
            ))
            .await
            .expect("redis"),
            keys: Keys::new(prefix),
            topic,
            consumer_group,
            signer,
            webhook_secret,
            payment_api_key,
            ops_token,
            audit_key,
            admin,
            gateway,
            gateway_admin,
            booking,
            sandbox,
            // Idle connections dropped under the services' 10 s idle cut (platform::listener).
            http: reqwest::Client::builder()
                .pool_idle_timeout(Duration::from_secs(5))
                .build()
                .unwrap(),
            kafka_brokers: brokers,
            redis_cluster: options.redis_cluster.clone(),
            shutdown,
        };
        if options.consumer {
            app.start_consumer();
        }
        app
    }

    /// Starts the consumer (in-process) on this app's topic and group.
    pub fn start_consumer(&self) {
        let config = floodgate_consumer::Config {
            kafka: KafkaArgs::plaintext(&self.kafka_brokers, &self.topic),
            group: self.consumer_group.clone(),
            instance_id: Some("consumer-1".into()),
            dlq_topic: None,
            batch_max: 500,
            batch_linger_ms: 10,
            session_timeout_ms: 45_000,
        };
        let (db, stop) = (self.db.clone(), self.shutdown.child_token());
        tokio::spawn(async move {
            floodgate_consumer::run(&config, db, stop)
                .await
                .expect("consumer runs")
        });
    }

    /// Starts another booking service in-process on port 0, sharing this app's Redis prefix,
    /// database, topic, keys and sandbox, but publishing to `kafka_brokers` with
    /// `delivery_timeout_ms`: a second instance that can see a broker the first cannot (or the
    /// other way round). Stops with the app.
    pub async fn extra_booking(&self, kafka_brokers: &str, delivery_timeout_ms: u64) -> SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let config = floodgate_booking::Config {
            listen: addr.to_string(),
            // The app's own Redis: its private cluster, if it runs on one.
            redis: redis_args_on(self.keys.prefix(), None, self.redis_cluster.as_deref()),
            kafka: KafkaArgs::plaintext(kafka_brokers, &self.topic),
            identity: identity_args(&self.sandbox, None),
            listener: Default::default(),
            delivery_timeout_ms,
            probe_topic: None,
            token_public_keys: format!("{}={}", self.signer.kid(), self.signer.public_base64()),
            payment_provider_url: Some(format!("http://{}", self.sandbox)),
            payment_ca_file: None,
            payment_sandbox: true,
            payment_api_key: Some(self.payment_api_key.clone().into()),
            webhook_secret: self.webhook_secret.clone().into(),
            webhook_tolerance_secs: 300,
            admin_listen: "127.0.0.1:0".into(),
            ops_token: self.ops_token.clone().into(),
            audit_key: self.audit_key.clone().into(),
            relay_interval_ms: 100,
            reaper_interval_ms: 100,
            reconcile_interval_ms: 200,
            // TestApp stops its services with its own token: no signal, nothing to drain.
            drain_delay_ms: 0,
            redis_min_replicas: None,
            redis_replica_timeout_ms: 500,
            instance_id: None,
        };
        let state = floodgate_booking::AppState::connect(&config, self.db.clone())
            .await
            .expect("booking state");
        tokio::spawn(floodgate_booking::run(
            listener,
            state,
            self.shutdown.child_token(),
        ));
        addr
    }

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

    /// One reservation request, as `floodgate_client` makes it: the 201's body, or why not.
    pub async fn reserve(
        &self,
        sale: &str,
        token: &str,
        idempotency_key: &str,
        pool: &str,
        seats: u32,
    ) -> Answer<ReservationCreated> {
        self.booking_client()
            .reserve(sale, token, idempotency_key, pool, seats)
            .await
    }

    /// A reservation request with any JSON body (the tests of malformed requests): the status
    /// and the JSON body.
    pub async fn post_reservation(
        &self,
        sale: &str,
        token: &str,
        idempotency_key: &str,
        body: &serde_json::Value,
    ) -> (u16, serde_json::Value) {
        let api = format!("http://{}", self.booking);
        self.post_reservation_at(&api, sale, token, idempotency_key, body)
            .await
    }

    /// [`TestApp::post_reservation`] to the booking API at `api` (`http://host:port`): another
    /// booking process than the app's own.
    pub async fn post_reservation_at(
        &self,
        api: &str,
        sale: &str,
        token: &str,
        idempotency_key: &str,
        body: &serde_json::Value,
    ) -> (u16, serde_json::Value) {
        self.answer(
            self.http
                .post(format!("{api}/v1/sales/{sale}/reservations"))
                .bearer_auth(token)
                .header("Idempotency-Key", idempotency_key)
                .json(body),
        )
        .await
    }

    /// A token for `sale` signed with the gateways' key, as a gateway would issue it.
    pub fn token(&self, sale: &str, ticket: u64, max_seats: u32, ttl_ms: i64) -> String {
        self.buyer_token(sale, ticket, max_seats, ttl_ms, None)
    }

    /// A token as a gateway issues it to the signed-in `buyer`'s place.
    pub fn buyer_token(
        &self,
        sale: &str,
        ticket: u64,
        max_seats: u32,
        ttl_ms: i64,
        buyer: Option<&str>,
    ) -> String {
        pass(&self.signer, sale, ticket, max_seats, ttl_ms, buyer)
    }

    /// An identity token for `sub` from the sign-in stand-in (as the operator's sign-in would
    /// give a signed-in buyer).
    pub async fn identity(&self, sub: &str) -> String {
        self.identity_with(&serde_json::json!({ "sub": sub })).await
    }

    /// An identity token from the sign-in stand-in with the claims `request` asks for (`sub`,
    /// and `aud`, `iss`, `expires_in_secs` to make it genuine yet wrong).
    pub async fn identity_with(&self, request: &serde_json::Value) -> String {
        let answer: serde_json::Value = self
            .http
            .post(format!("http://{}/v1/identity/tokens", self.sandbox))
            .json(request)
            .send()
            .await
            .expect("the sign-in stand-in answers")
            .json()
            .await
            .expect("a JSON token");
        answer["id_token"].as_str().expect("an id_token").to_owned()
    }

    /// Makes the sign-in stand-in sign with a new key (published beside the old ones); returns
    /// its key id.
    pub async fn rotate_identity_key(&self) -> String {
        let answer: serde_json::Value = self
            .http
            .post(format!("http://{}/v1/identity/rotate", self.sandbox))
            .bearer_auth(&self.payment_api_key)
            .send()
            .await
            .expect("the sign-in stand-in answers")
            .json()
            .await
            .expect("a JSON answer");
        answer["kid"].as_str().expect("a key id").to_owned()
    }

    /// One sample from a service's `GET /metrics` (Prometheus text, on its admin listener):
    /// `series` is the name with its labels as rendered, e.g.
    /// `floodgate_reservations_total{outcome="reserved"}`.
    pub async fn metric(&self, service: SocketAddr, series: &str) -> Option<f64> {
        let text = self
            .http
            .get(format!("http://{service}/metrics"))
            .send()
            .await
            .expect("metrics endpoint reachable")
            .text()
            .await
            .expect("metrics text");
        text.lines().find_map(|line| {
            line.strip_prefix(series)?
                .strip_prefix(' ')?
                .trim()
                .parse()
                .ok()
        })
    }

    /// Runs a one-key command that answers an integer (XLEN, SCARD, ...).
    pub async fn redis_int_cmd(&self, command: &str, key: &str) -> i64 {
        let mut conn = self.redis.clone();
        redis::cmd(command)
            .arg(key)
            .query_async(&mut conn)
            .await
            .expect("redis command")
    }

    /// Sends a request and returns its status and JSON body (every Floodgate answer is JSON).
    pub async fn answer(&self, request: reqwest::RequestBuilder) -> (u16, serde_json::Value) {
        let response = request.send().await.expect("service reachable");
        let status = response.status().as_u16();
        (status, response.json().await.expect("a JSON body"))
    }

    /// Delivers a payment-provider webhook as the provider does, signed with `secret` at
    /// `timestamp` (Unix seconds): the status and JSON body.
    pub async fn deliver_webhook(
        &self,
        event: &floodgate_protocol::payments::WebhookEvent,
        timestamp: i64,
        secret: &str,
    ) -> (u16, serde_json::Value) {
        use floodgate_protocol::payments::{sign, SIGNATURE_HEADER};
        let body = serde_json::to_vec(event).unwrap();
        self.answer(
            self.http
                .post(format!("http://{}/v1/payments/webhook", self.booking))
                .header(SIGNATURE_HEADER, sign(secret.as_bytes(), timestamp, &body))
                .body(body),
        )
        .await
    }

    /// Reads an integer key (0 if missing).
    pub async fn redis_int(&self, key: &str) -> i64 {
        let mut conn = self.redis.clone();
        let value: Option<i64> = redis::cmd("GET")
            .arg(key)
            .query_async(&mut conn)
            .await
            .expect("redis GET");
        value.unwrap_or(0)
    }

    /// GETs `url` and parses its JSON body, whatever the status.
    pub async fn get_json(&self, url: &str) -> serde_json::Value {
        self.http
            .get(url)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// The drawn order of `sale`'s closed pre-queue, from the public record of the gateway at
    /// `gateway` (the draw seed as published; tests of the record itself recompute it).
    pub async fn drawn_order(
        &self,
        gateway: SocketAddr,
        sale: &str,
    ) -> floodgate_protocol::lottery::Draw {
        let body = self
            .get_json(&format!("http://{gateway}/v1/sales/{sale}/draw"))
            .await;
        assert_eq!(body["status"], "drawn", "{body}");
        let seed: [u8; 32] = hex::decode(body["draw_seed"].as_str().unwrap())
            .unwrap()
            .try_into()
            .unwrap();
        floodgate_protocol::lottery::Draw::new(seed, body["prequeue_size"].as_u64().unwrap())
    }

    /// Bookings of `sale` in PostgreSQL with `status`.
    pub async fn bookings(&self, sale: &str, status: &str) -> i64 {
        sqlx::query_scalar("select count(*) from bookings where sale_id = $1 and status = $2")
            .bind(sale)
            .bind(status)
            .fetch_one(&self.db)
            .await
            .unwrap()
    }

    /// Runs a `floodgate-booking` admin command (`["sale", "reconcile", sale]`, say) against this
    /// app's Redis, broker and consumer group, with the PostgreSQL at `database_url`: its exit
    /// code and everything it printed (standard output, then standard error).
    pub fn booking_command(&self, database_url: &str, args: &[&str]) -> (i32, String) {
        self.booking_command_with(database_url, args, &[])
    }

    /// [`Self::booking_command`] with `extra` environment, which wins.
    pub fn booking_command_with(
        &self,
        database_url: &str,
        args: &[&str],
        extra: &[(&str, &str)],
    ) -> (i32, String) {
        let mut command = std::process::Command::new(binary("floodgate-booking"));
        command
            .args(args)
            .env("FLOODGATE_DATABASE_URL", database_url)
            .envs(redis_env())
            .env("FLOODGATE_REDIS_PREFIX", self.keys.prefix())
            .env("FLOODGATE_KAFKA_BROKERS", kafka_brokers())
            .env("FLOODGATE_RESERVATIONS_TOPIC", &self.topic)
            .env("FLOODGATE_CONSUMER_GROUP", &self.consumer_group)
            .env("FLOODGATE_AUDIT_KEY", &self.audit_key)
            .env("FLOODGATE_OPERATOR", "test-operator");
        if let Some(seeds) = &self.redis_cluster {
            command.env("FLOODGATE_REDIS_CLUSTER_NODES", seeds.join(","));
        }
        command.envs(extra.iter().copied());
        run_to_end(&mut command)
    }

    /// A new sale as `spec` says (its id `prefix` and a random tail), opened 300 ms from now;
    /// returns once it is open.
    pub async fn open_sale(&self, prefix: &str, spec: SaleSpec) -> String {
        let sale = unique(prefix);
        let spec = SaleSpec {
            opens_in: Duration::from_millis(300),
            ..spec
        };
        self.create_sale(&sale, &spec).await;
        self.until_open(&sale).await;
        sale
    }

    /// Waits until `sale` has opened (as the ops API sees it).
    pub async fn until_open(&self, sale: &str) {
        let path = format!("/admin/v1/sales/{sale}");
        eventually("the sale opens", Duration::from_secs(10), || async {
            let (_, figures) = self
                .ops(reqwest::Method::GET, &path, &self.ops_token, None)
                .await;
            figures["open"] == true
        })
        .await;
    }

    /// Pauses (`"pause"`) or resumes (`"resume"`) admission through the ops API.
    pub async fn admission(&self, sale: &str, control: &str) {
        let (status, body) = self
            .ops(
                reqwest::Method::POST,
                &format!("/admin/v1/sales/{sale}/{control}"),
                &self.ops_token,
                None,
            )
            .await;
        assert_eq!(status, 200, "{control}: {body}");
    }

    /// Calls the ops API with bearer `token`; the status and JSON body.
    pub async fn ops(
        &self,
        method: reqwest::Method,
        path: &str,
        token: &str,
        body: Option<serde_json::Value>,
    ) -> (u16, serde_json::Value) {
        let mut request = self
            .http
            .request(method, format!("http://{}{path}", self.admin))
            .bearer_auth(token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        (response.status().as_u16(), response.json().await.unwrap())
    }

    /// Starts paying for a reservation and completes the sandbox checkout with `outcome`
    /// (`succeed` or `fail`): the payment's start answer.
    pub async fn pay(
        &self,
        sale: &str,
        reservation_id: &str,
        secret: &str,
        outcome: &str,
    ) -> PaymentStarted {
        let checkout = serde_json::json!({ "outcome": outcome });
        self.pay_with(sale, reservation_id, secret, &checkout).await
    }

    /// As [`TestApp::pay`], with the sandbox's own checkout knobs (`delay_ms`, `deliveries`).
    pub async fn pay_with(
        &self,
        sale: &str,
        reservation_id: &str,
        secret: &str,
        checkout: &serde_json::Value,
    ) -> PaymentStarted {
        let started = self
            .booking_client()
            .start_payment(sale, reservation_id, secret)
            .await
            .expect("the payment starts");
        floodgate_client::booking::sandbox_checkout(
            &self.http,
            self.sandbox,
            &started.payment_id,
            checkout,
        )
        .await
        .expect("the sandbox takes the checkout");
        started
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

/// What a poll's probe answers: `true`, or `Some(value)`, once the wait is over.
pub trait Probe {
    type Value;
    fn ready(self) -> Option<Self::Value>;
}

impl Probe for bool {
    type Value = ();
    fn ready(self) -> Option<()> {
        self.then_some(())
    }
}

impl<T> Probe for Option<T> {
    type Value = T;
    fn ready(self) -> Option<T> {
        self
    }
}

/// The one way a test waits for something: polls `probe` every 50 ms until it answers `true`
/// or `Some(value)` (that value), and panics with `what` after `timeout`.
pub async fn eventually<P: Probe>(
    what: &str,
    timeout: Duration,
    mut probe: impl AsyncFnMut() -> P,
) -> P::Value {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(value) = probe().await.ready() {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
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

/// A fresh, migrated database on the `DATABASE_URL` server, for tests that need a multi-threaded
/// runtime (`#[sqlx::test]` runs on a single thread). Named `floodgate_test_*`; `deploy/test.sh`
/// drops leftovers of earlier runs.
pub async fn fresh_db() -> PgPool {
    fresh_database().await.1
}

/// A fresh, migrated database and its URL (for a process or a proxy of the test's own).
pub async fn fresh_database() -> (String, PgPool) {
    let server =
        std::env::var("DATABASE_URL").expect("DATABASE_URL names the test database server");
    let admin = PgPool::connect(&server)
        .await
        .expect("database server reachable");
    let name = unique("floodgate_test_");
    sqlx::query(&format!("create database \"{name}\""))
        .execute(&admin)
        .await
        .expect("create test database");
    let mut url = url_with_database(&server, &name);
    if url.is_empty() {
        url = server.clone();
    }
    let db = migrated_pool(&url).await;
    (url, db)
}

/// A pool on the database at `url` (a test's own server, say), with the schema applied.
pub async fn migrated_pool(url: &str) -> PgPool {
    let db = sqlx::postgres::PgPoolOptions::new()
        .max_connections(8)
        .connect(url)
        .await
        .expect("test database reachable");
    floodgate_platform::runtime::migrator()
        .run(&db)
        .await
        .expect("migrations apply");
    db
}

/// Publishes each `(key, payload)` to `topic`, in order, and waits for every acknowledgement.
pub async fn produce(brokers: &str, topic: &str, messages: &[(String, Vec<u8>)]) {
    use rdkafka::producer::{FutureProducer, FutureRecord};
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .set("linger.ms", "5")
        .create()
        .expect("a producer");
    let deliveries: Vec<_> = messages
        .iter()
        .map(|(key, payload)| {
            producer.send(
                FutureRecord::to(topic).key(key).payload(payload),
                Duration::from_secs(30),
            )
        })
        .collect();
    for delivery in futures::future::join_all(deliveries).await {
        delivery.expect("the broker acknowledges");
    }
}

/// An event as the booking service would publish it, for tests of the consumer alone.
pub fn event(
    sale: &str,
    pool: &str,
    reservation: &str,
    make: fn(ReservationData) -> Event,
) -> Envelope {
    let now = floodgate_protocol::now_millis();
    let event = make(ReservationData {
        reservation_id: reservation.to_owned(),
        token_id: format!("tok-{reservation}"),
        ticket: 1,
        seats: 1,
        reserved_at_ms: now,
        hold_expires_at_ms: now + 300_000,
        payment_id: None,
        buyer: None,
    });
    Envelope {
        v: floodgate_protocol::events::SCHEMA_VERSION,
        id: format!("{reservation}.{}", event.kind()),
        at_ms: now,
        sale: sale.to_owned(),
        pool: pool.to_owned(),
        seq: None,
        event,
    }
}

/// `postgres://user@host:port/db?opts` with its database replaced by `name`.
fn url_with_database(url: &str, name: &str) -> String {
    let (base, query) = url
        .split_once('?')
        .map_or((url, None), |(b, q)| (b, Some(q)));
    let Some(slash) = base.rfind('/').filter(|i| *i > "postgres://".len()) else {
        return String::new();
    };
    let mut out = format!("{}/{name}", &base[..slash]);
    if let Some(q) = query {
        out.push('?');
        out.push_str(q);
    }
    out
}
