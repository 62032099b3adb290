//! How a test's Floodgate starts: every service in-process on port 0 against the real
//! Redis, broker and PostgreSQL, the sandbox beside them, and more booking instances or a
//! consumer when a test asks.

use super::*;

use floodgate_booking::Booking;
use floodgate_gateway::Gateway;
use floodgate_platform::service::{self, Lifecycle, Listeners, Service};

/// Settings of type `T` from `(variable, value)` pairs, every other one at its default: the
/// same declarations, defaults and checks as the binaries read (floodgate_platform::settings),
/// never the test process's own environment.
pub fn settings<T: clap::Args + clap::FromArgMatches>(pairs: &[(&str, String)]) -> T {
    floodgate_platform::settings::by_name(pairs).unwrap_or_else(|e| panic!("test settings: {e}"))
}

/// The identity settings of services that trust the sign-in stand-in of the sandbox at
/// `sandbox` (its keys fetched over HTTP, as from a real issuer), or `issuer`.
fn identity_settings(
    sandbox: &SocketAddr,
    buyer_id_key: Option<&str>,
    issuer: Option<&crate::oidc::IssuerSettings>,
) -> Vec<(&'static str, String)> {
    let (issuer, audience, jwks) = match issuer {
        Some(i) => (i.issuer.clone(), i.audience.clone(), i.jwks_url.clone()),
        None => (
            format!("http://{sandbox}"),
            IDENTITY_AUDIENCE.to_owned(),
            format!("http://{sandbox}/.well-known/jwks.json"),
        ),
    };
    let mut pairs = vec![
        ("FLOODGATE_IDENTITY_ISSUER", issuer),
        ("FLOODGATE_IDENTITY_AUDIENCE", audience),
        ("FLOODGATE_IDENTITY_JWKS_URL", jwks),
        ("FLOODGATE_IDENTITY_LEEWAY_SECS", "0".into()),
    ];
    if let Some(key) = buyer_id_key {
        pairs.push(("FLOODGATE_BUYER_ID", "hash".into()));
        pairs.push(("FLOODGATE_BUYER_ID_KEY", key.into()));
    }
    pairs
}

/// The Redis settings of a service with key prefix `prefix`: `url` (a proxy, a private
/// server), else the cluster `cluster` or the one under test, else the shared Redis.
pub(crate) fn redis_settings(
    prefix: &str,
    url: Option<String>,
    cluster: Option<&[String]>,
    ca_file: Option<&std::path::Path>,
) -> Vec<(&'static str, String)> {
    let args = redis_args_on(prefix, url, cluster);
    let mut pairs = vec![
        ("FLOODGATE_REDIS_URL", args.redis_url),
        ("FLOODGATE_REDIS_PREFIX", args.redis_prefix),
    ];
    if !args.redis_cluster_nodes.is_empty() {
        pairs.push((
            "FLOODGATE_REDIS_CLUSTER_NODES",
            args.redis_cluster_nodes.join(","),
        ));
    }
    if let Some(ca) = ca_file {
        pairs.push(("FLOODGATE_REDIS_TLS_CA_FILE", ca.display().to_string()));
    }
    pairs
}

/// The settings a test's booking instance always has: its listeners, the app's secrets, keys
/// and sandbox, and no drain (TestApp stops its services with its own token: no signal).
fn booking_settings(
    listen: &SocketAddr,
    signer: &TokenSigner,
    sandbox: &SocketAddr,
    secrets: [&str; 5],
) -> Vec<(&'static str, String)> {
    let [payment_api_key, webhook_secret, ops_token, audit_key, reservation_key] = secrets;
    vec![
        ("FLOODGATE_BOOKING_LISTEN", listen.to_string()),
        ("FLOODGATE_ADMIN_LISTEN", "127.0.0.1:0".into()),
        (
            "FLOODGATE_TOKEN_PUBLIC_KEYS",
            format!("{}={}", signer.kid(), signer.public_base64()),
        ),
        (
            "FLOODGATE_PAYMENT_PROVIDER_URL",
            format!("http://{sandbox}"),
        ),
        ("FLOODGATE_PAYMENT_SANDBOX", "true".into()),
        ("FLOODGATE_PAYMENT_API_KEY", payment_api_key.into()),
        ("FLOODGATE_WEBHOOK_SECRET", webhook_secret.into()),
        ("FLOODGATE_OPS_TOKEN", ops_token.into()),
        ("FLOODGATE_AUDIT_KEY", audit_key.into()),
        ("FLOODGATE_RESERVATION_KEY", reservation_key.into()),
        ("FLOODGATE_EDGE_KEY", crate::edge_key().into()),
        ("FLOODGATE_RECONCILE_INTERVAL_MS", "200".into()),
        ("FLOODGATE_DRAIN_DELAY_MS", "0".into()),
    ]
}

/// Runs a built service on `listeners` until the app's `shutdown`, as its binary would
/// (floodgate_platform::service), but with no signal: nothing to drain.
fn serve<S: Service>(service: S, listeners: Listeners, life: Lifecycle) {
    tokio::spawn(async move {
        if let Err(e) = service::serve(service, listeners, life).await {
            eprintln!("a test's {} stopped with an error: {e:#}", S::NAME);
        }
    });
}

/// Binds a listener on port 0 of loopback.
async fn bind() -> tokio::net::TcpListener {
    tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap()
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
        let reservation_key = secret("rk_");
        let shutdown = CancellationToken::new();

        // The gateway, booking and the sandbox provider name each other: bind all three listeners
        // before configuring any.
        let booking_listener = bind().await;
        let booking = booking_listener.local_addr().unwrap();
        let sandbox_listener = bind().await;
        let sandbox = sandbox_listener.local_addr().unwrap();
        let listener = bind().await;
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
            floodgate_sandbox::listener_limits(),
            async move { sandbox_stop.cancelled().await },
        ));

        let identity = if options.without_sign_in {
            Vec::new()
        } else {
            identity_settings(
                &sandbox,
                options.buyer_id_key.as_deref(),
                options.identity_issuer.as_ref(),
            )
        };
        // The app's Redis for a service: `url` (a proxy, a private server), else the cluster
        // or the shared one, with the CA its `rediss://` connections verify against.
        let redis_for = |url: Option<String>| {
            redis_settings(
                &prefix,
                url,
                options.redis_cluster.as_deref(),
                options.redis_tls_ca_file.as_deref(),
            )
        };
        let listener_settings = options.listener_settings();
        let mut gateway_settings = vec![
            ("FLOODGATE_GATEWAY_ADMIN_LISTEN", "127.0.0.1:0".into()),
            ("FLOODGATE_TOKEN_KEY_ID", signer.kid().to_owned()),
            ("FLOODGATE_TOKEN_SIGNING_KEY", signer.seed_base64()),
            ("FLOODGATE_EDGE_KEY", crate::edge_key().into()),
            ("FLOODGATE_TICK_MS", "50".into()),
            ("FLOODGATE_LEASE_MS", "2000".into()),
            ("FLOODGATE_SEND_TIMEOUT_MS", "5000".into()),
            ("FLOODGATE_DRAIN_DELAY_MS", "0".into()),
            ("FLOODGATE_BOOKING_URL", format!("http://{booking}")),
            ("FLOODGATE_INSTANCE_ID", "gw-test".into()),
            (
                "FLOODGATE_CHECKOUT_ORIGINS",
                options
                    .checkout_origins
                    .clone()
                    .unwrap_or_else(|| vec![format!("http://{sandbox}")])
                    .join(","),
            ),
        ];
        gateway_settings.extend(options.gateway_settings());
        gateway_settings.extend(redis_for(
            options
                .gateway_redis_url
                .clone()
                .or_else(|| options.redis_url.clone()),
        ));
        gateway_settings.extend(identity.iter().cloned());
        gateway_settings.extend(listener_settings.iter().cloned());
        let gateway_life = Lifecycle::child_of(&shutdown);
        let gateway_service = Gateway::build(settings(&gateway_settings), &gateway_life)
            .await
            .expect("the gateway starts");
        let gateway_admin_listener = bind().await;
        let gateway_admin = gateway_admin_listener.local_addr().unwrap();
        serve(
            gateway_service,
            Listeners {
                public: vec![listener],
                admin: gateway_admin_listener,
            },
            gateway_life,
        );

        let mut booking_settings = booking_settings(
            &booking,
            &signer,
            &sandbox,
            [
                &payment_api_key,
                &webhook_secret,
                &ops_token,
                &audit_key,
                &reservation_key,
            ],
        );
        booking_settings.extend([
            ("FLOODGATE_KAFKA_BROKERS", brokers.clone()),
            ("FLOODGATE_RESERVATIONS_TOPIC", topic.clone()),
            (
                "FLOODGATE_DELIVERY_TIMEOUT_MS",
                options.delivery_timeout_ms.to_string(),
            ),
            (
                "FLOODGATE_RELAY_INTERVAL_MS",
                options.relay_interval_ms.to_string(),
            ),
            (
                "FLOODGATE_REAPER_INTERVAL_MS",
                options.reaper_interval_ms.to_string(),
            ),
        ]);
        booking_settings.extend(redis_for(
            options
                .booking_redis_url
                .clone()
                .or_else(|| options.redis_url.clone()),
        ));
        booking_settings.extend(identity.iter().cloned());
        booking_settings.extend(listener_settings.iter().cloned());
        booking_settings.extend(options.booking_limits());
        let booking_life = Lifecycle::child_of(&shutdown);
        let booking_service =
            Booking::on_database(settings(&booking_settings), db.clone(), &booking_life)
                .await
                .expect("the booking service starts");
        let admin_listener = bind().await;
        let admin = admin_listener.local_addr().unwrap();
        serve(
            booking_service,
            Listeners {
                public: vec![booking_listener],
                admin: admin_listener,
            },
            booking_life,
        );

        let consumer_group = unique("floodgate-test-");
        let app = TestApp {
            db,
            redis: floodgate_platform::runtime::connect_redis(&RedisArgs {
                redis_tls_ca_file: options.redis_tls_ca_file.clone(),
                ..redis_args_on(
                    &prefix,
                    options.redis_url.clone(),
                    options.redis_cluster.as_deref(),
                )
            })
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
            reservation_key,
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

    /// Starts the consumer (in-process, as its binary runs it) on this app's topic and group.
    pub fn start_consumer(&self) {
        let config: floodgate_consumer::Config = settings(&[
            ("FLOODGATE_KAFKA_BROKERS", self.kafka_brokers.clone()),
            ("FLOODGATE_RESERVATIONS_TOPIC", self.topic.clone()),
            ("FLOODGATE_CONSUMER_GROUP", self.consumer_group.clone()),
            ("FLOODGATE_CONSUMER_INSTANCE_ID", "consumer-1".into()),
        ]);
        let (db, life) = (self.db.clone(), Lifecycle::child_of(&self.shutdown));
        tokio::spawn(async move {
            let consumer = floodgate_consumer::Consumer::on_database(config, db, &life)
                .expect("the consumer starts");
            let listeners = Listeners {
                public: Vec::new(),
                admin: bind().await,
            };
            service::serve(consumer, listeners, life)
                .await
                .expect("the consumer runs")
        });
    }

    /// Starts another booking service in-process on port 0, sharing this app's Redis prefix,
    /// database, topic, keys and sandbox, but publishing to `kafka_brokers` with
    /// `delivery_timeout_ms`: a second instance that can see a broker the first cannot (or the
    /// other way round). Stops with the app.
    pub async fn extra_booking(&self, kafka_brokers: &str, delivery_timeout_ms: u64) -> SocketAddr {
        let listener = bind().await;
        let addr = listener.local_addr().unwrap();
        let mut pairs = booking_settings(
            &addr,
            &self.signer,
            &self.sandbox,
            [
                &self.payment_api_key,
                &self.webhook_secret,
                &self.ops_token,
                &self.audit_key,
                &self.reservation_key,
            ],
        );
        pairs.extend([
            ("FLOODGATE_KAFKA_BROKERS", kafka_brokers.to_owned()),
            ("FLOODGATE_RESERVATIONS_TOPIC", self.topic.clone()),
            (
                "FLOODGATE_DELIVERY_TIMEOUT_MS",
                delivery_timeout_ms.to_string(),
            ),
            ("FLOODGATE_RELAY_INTERVAL_MS", "100".into()),
            ("FLOODGATE_REAPER_INTERVAL_MS", "100".into()),
        ]);
        // The app's own Redis: its private cluster, if it runs on one.
        pairs.extend(redis_settings(
            self.keys.prefix(),
            None,
            self.redis_cluster.as_deref(),
            None,
        ));
        pairs.extend(identity_settings(&self.sandbox, None, None));
        let life = Lifecycle::child_of(&self.shutdown);
        let booking = Booking::on_database(settings(&pairs), self.db.clone(), &life)
            .await
            .expect("booking state");
        serve(
            booking,
            Listeners {
                public: vec![listener],
                admin: bind().await,
            },
            life,
        );
        addr
    }
}
