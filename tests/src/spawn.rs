//! How a test's Floodgate starts: every service in-process on port 0 against the real
//! Redis, broker and PostgreSQL, the sandbox beside them, and more booking instances or a
//! consumer when a test asks.

use super::*;

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
}
