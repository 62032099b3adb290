//! TLS to every dependency (issue 16), on the real binaries: the booking service reaches Redis on
//! its `tls-port`, a PostgreSQL that accepts nothing but TLS, the payment provider over HTTPS,
//! and Kafka with SASL_SSL (SCRAM-SHA-512 through a TLS-terminating proxy in front of a private
//! broker with authentication on), and the consumer reads that broker and writes that database
//! the same way. Each client refuses a server whose certificate does not chain to the CA it was
//! given. Every server here is private to its test, with a CA the test made.

use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

use floodgate_client::booking::BookingClient;
use floodgate_tests::broker::PrivateBroker;
use floodgate_tests::gateways::free_port;
use floodgate_tests::services::{booking_serve, start_service};
use floodgate_tests::tls::{
    install_provider, Identity, TestCa, TlsPostgres, TlsProxy, TlsRedis, TlsRedisCluster,
};
use floodgate_tests::{
    binary, eventually, run_to_end, secret, unique, SaleSpec, TestApp, TestOptions,
};

const WAIT: Duration = Duration::from_secs(30);

/// The private servers of one test, all with certificates of `ca`.
struct Servers {
    ca: TestCa,
    server: Identity,
    redis: TlsRedis,
    postgres: TlsPostgres,
}

impl Servers {
    async fn start() -> Self {
        install_provider();
        let ca = TestCa::new("Floodgate test CA");
        let server = ca.localhost();
        let redis = TlsRedis::start(&server, &ca.ca_file()).await;
        let postgres = TlsPostgres::start(&server).await;
        Self {
            ca,
            server,
            redis,
            postgres,
        }
    }

    fn ca_file(&self) -> String {
        self.ca.ca_file().display().to_string()
    }

    /// The database URL (TLS, verified against `ca_file`), with the schema applied through it.
    async fn database(&self, ca_file: &str) -> (String, sqlx::PgPool) {
        let url = self.postgres.url(ca_file.as_ref());
        let db = floodgate_tests::migrated_pool(&url).await;
        (url, db)
    }
}

/// The Kafka settings of a SASL_SSL client of `brokers`.
fn sasl_ssl(
    brokers: &str,
    user: &str,
    password: &str,
    ca_file: &str,
) -> Vec<(&'static str, String)> {
    vec![
        ("FLOODGATE_KAFKA_BROKERS", brokers.to_owned()),
        ("FLOODGATE_KAFKA_SECURITY_PROTOCOL", "sasl_ssl".into()),
        ("FLOODGATE_KAFKA_SASL_USERNAME", user.to_owned()),
        ("FLOODGATE_KAFKA_SASL_PASSWORD", password.to_owned()),
        ("FLOODGATE_KAFKA_SSL_CA_LOCATION", ca_file.to_owned()),
    ]
}

/// `floodgate-booking topics ensure` for `topic` with `env`: its exit code and output.
fn ensure_topics(topic: &str, env: &[(&str, String)]) -> (i32, String) {
    let mut command = Command::new(binary("floodgate-booking"));
    command
        .args(["topics", "ensure"])
        .env("FLOODGATE_RESERVATIONS_TOPIC", topic)
        .env("FLOODGATE_TOPIC_PARTITIONS", "2")
        .env("RUST_LOG", "error")
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())));
    run_to_end(&mut command)
}

/// A broker that requires SCRAM, behind a TLS proxy it advertises; the proxy's address.
async fn secured_broker(
    server: &Identity,
    user: &str,
    password: &str,
) -> (PrivateBroker, TlsProxy, String) {
    let proxy_port = free_port().port();
    let advertised = SocketAddr::from(([127, 0, 0, 1], proxy_port));
    let broker = PrivateBroker::start_authenticated(&[(user, password)], Some(advertised)).await;
    let target = SocketAddr::from(([127, 0, 0, 1], broker.port));
    let proxy = TlsProxy::start_on(proxy_port, server, target).await;
    (broker, proxy, advertised.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reservation_reaches_every_dependency_over_tls() {
    let servers = Servers::start().await;
    let ca_file = servers.ca_file();
    let (database_url, db) = servers.database(&ca_file).await;
    let refused = sqlx::PgPool::connect(&servers.postgres.plaintext_url()).await;
    assert!(refused.is_err(), "the database takes TLS connections only");

    let (user, password) = ("floodgate", secret("kafka_"));
    let (_broker, _kafka_tls, brokers) = secured_broker(&servers.server, user, &password).await;
    let kafka = sasl_ssl(&brokers, user, &password, &ca_file);
    // The test's own services (the sale, the sandbox provider, tokens) use the private Redis's
    // plaintext port and the database over TLS; the binaries below are what is tested.
    let options = TestOptions {
        redis_url: Some(servers.redis.url()),
        consumer: false,
        ..TestOptions::default()
    };
    let app = TestApp::spawn_with(db, options).await;
    let (code, said) = ensure_topics(&app.topic, &kafka);
    assert_eq!(code, 0, "topics made over SASL_SSL: {said}");
    assert!(said.contains("created"), "{said}");
    let provider = TlsProxy::start(&servers.server, app.sandbox).await;

    let mut env = kafka.clone();
    env.extend([
        ("FLOODGATE_REDIS_URL", servers.redis.tls_url()),
        ("FLOODGATE_REDIS_CLUSTER_NODES", String::new()),
        ("FLOODGATE_REDIS_TLS_CA_FILE", ca_file.clone()),
        ("FLOODGATE_PAYMENT_SANDBOX", "false".into()),
        (
            "FLOODGATE_PAYMENT_PROVIDER_URL",
            format!("https://localhost:{}", provider.addr.port()),
        ),
        ("FLOODGATE_PAYMENT_CA_FILE", ca_file.clone()),
        (
            "FLOODGATE_PAYMENT_API_KEY",
            app.payment_api_key().to_owned(),
        ),
        ("FLOODGATE_OPS_TOKEN", secret("ops_")),
        ("FLOODGATE_WEBHOOK_SECRET", app.webhook_secret.clone()),
    ]);
    let (mut command, admin, api) = booking_serve(&app, &database_url, &env);
    let mut booking = start_service(&mut command, &admin).await;
    let ready = reqwest::get(format!("{admin}/readyz")).await.unwrap();
    assert_eq!(
        ready.status(),
        200,
        "Redis, PostgreSQL and Kafka answer over TLS: {}",
        ready.text().await.unwrap()
    );

    let mut consumer = Command::new(binary("floodgate-consumer"))
        .env("FLOODGATE_DATABASE_URL", &database_url)
        .env("FLOODGATE_RESERVATIONS_TOPIC", &app.topic)
        .env("FLOODGATE_CONSUMER_GROUP", unique("tls-"))
        .env("FLOODGATE_CONSUMER_METRICS_LISTEN", free_port().to_string())
        .env("RUST_LOG", "error")
        .envs(kafka.iter().map(|(k, v)| (*k, v.as_str())))
        .spawn()
        .expect("the consumer starts");

    let sale = app.open_sale("tls-", SaleSpec::default()).await;
    let token = app.token(&sale, 1, 1, 60_000);
    let client = BookingClient::new(app.http.clone(), api.trim_start_matches("http://"));
    let created = client
        .reserve(&sale, &token, &unique("k"), "p1", 1)
        .await
        .expect("a reservation over TLS Redis and SASL_SSL Kafka");
    eventually("the consumer writes the booking over TLS", WAIT, || async {
        app.bookings(&sale, "PENDING_PAYMENT").await == 1
    })
    .await;
    let started = client
        .start_payment(&sale, &created.reservation_id, &created.secret)
        .await
        .expect("the payment provider is called over HTTPS");
    assert!(!started.payment_id.is_empty());

    for child in [&mut booking, &mut consumer] {
        let _ = child.kill();
        let _ = child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_whose_certificate_does_not_verify_is_refused() {
    let servers = Servers::start().await;
    let good = servers.ca_file();
    let impostor = TestCa::new("Not the servers' CA");
    let wrong = impostor.ca_file().display().to_string();

    // PostgreSQL: verify-full against the wrong CA fails before any query.
    let url = servers.postgres.url(wrong.as_ref());
    let mut migrate = Command::new(binary("floodgate-booking"));
    migrate.arg("migrate").env("FLOODGATE_DATABASE_URL", &url);
    let (code, said) = run_to_end(&mut migrate);
    assert_ne!(code, 0, "{said}");
    assert!(said.contains("connecting to PostgreSQL"), "{said}");

    // Redis: the booking service does not start on a Redis it cannot verify.
    let (database_url, db) = servers.database(&good).await;
    let options = TestOptions {
        redis_url: Some(servers.redis.url()),
        consumer: false,
        ..TestOptions::default()
    };
    let app = TestApp::spawn_with(db, options).await;
    let redis = |ca: &str| {
        vec![
            ("FLOODGATE_REDIS_URL", servers.redis.tls_url()),
            ("FLOODGATE_REDIS_CLUSTER_NODES", String::new()),
            ("FLOODGATE_REDIS_TLS_CA_FILE", ca.to_owned()),
            ("FLOODGATE_OPS_TOKEN", secret("ops_")),
            ("FLOODGATE_WEBHOOK_SECRET", secret("whsec_")),
        ]
    };
    let (mut command, _, _) = booking_serve(&app, &database_url, &redis(&wrong));
    let (code, said) = run_to_end(&mut command);
    assert_ne!(code, 0, "{said}");
    assert!(
        said.contains("connecting to Redis") && said.contains("certificate"),
        "{said}"
    );

    // Kafka over SSL (no SASL) through the proxy: good with the right CA, refused with the wrong.
    let proxy_port = free_port().port();
    let advertised = SocketAddr::from(([127, 0, 0, 1], proxy_port));
    let broker = PrivateBroker::start_on(free_port().port(), Some(advertised)).await;
    let target = SocketAddr::from(([127, 0, 0, 1], broker.port));
    let _proxy = TlsProxy::start_on(proxy_port, &servers.server, target).await;
    let ssl = |ca: &str| {
        vec![
            ("FLOODGATE_KAFKA_BROKERS", format!("127.0.0.1:{proxy_port}")),
            ("FLOODGATE_KAFKA_SECURITY_PROTOCOL", "ssl".into()),
            ("FLOODGATE_KAFKA_SSL_CA_LOCATION", ca.to_owned()),
        ]
    };
    let topic = unique("floodgate.tls.");
    let (code, said) = ensure_topics(&topic, &ssl(&wrong));
    assert_ne!(
        code, 0,
        "a broker behind a certificate of another CA: {said}"
    );
    let (code, said) = ensure_topics(&topic, &ssl(&good));
    assert_eq!(code, 0, "the same broker with the right CA: {said}");
    assert!(said.contains("created"), "{said}");

    // The payment provider: a booking service that trusts the wrong CA cannot start a payment.
    let provider = TlsProxy::start(&servers.server, app.sandbox).await;
    let mut env = redis(&good);
    env.extend([
        ("FLOODGATE_PAYMENT_SANDBOX", "false".into()),
        (
            "FLOODGATE_PAYMENT_PROVIDER_URL",
            format!("https://localhost:{}", provider.addr.port()),
        ),
        ("FLOODGATE_PAYMENT_CA_FILE", wrong.clone()),
        (
            "FLOODGATE_PAYMENT_API_KEY",
            app.payment_api_key().to_owned(),
        ),
    ]);
    let (mut command, admin, api) = booking_serve(&app, &database_url, &env);
    let mut booking = start_service(&mut command, &admin).await;
    let sale = app.open_sale("tls-", SaleSpec::default()).await;
    let client = BookingClient::new(app.http.clone(), api.trim_start_matches("http://"));
    let created = client
        .reserve(
            &sale,
            &app.token(&sale, 1, 1, 60_000),
            &unique("k"),
            "p1",
            1,
        )
        .await
        .expect("the reservation itself needs no provider");
    let refused = client
        .start_payment(&sale, &created.reservation_id, &created.secret)
        .await
        .expect_err("a provider whose certificate does not verify is never called");
    assert!(refused.status() >= 500, "{refused:?}");
    let _ = booking.kill();
    let _ = booking.wait();
}

/// TLS that does not check whom it talks to is refused before any connection: `sslmode=require`
/// or `verify-ca` encrypt to whoever answers at that address (or holds any certificate of the
/// CA), and a CA file given without `verify-full` would be a check that is not made. Only
/// `verify-full` (or no TLS at all, named: `disable`) starts; the error names the setting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_url_that_encrypts_without_checking_the_server_is_refused() {
    install_provider();
    let ca = TestCa::new("Floodgate test CA");
    let postgres = TlsPostgres::start(&ca.localhost()).await;
    let ca_file = ca.ca_file().display().to_string();
    let migrate = |url: &str| {
        let mut command = Command::new(binary("floodgate-booking"));
        command
            .arg("migrate")
            .env("FLOODGATE_DATABASE_URL", url)
            .env_remove("PGSSLMODE");
        run_to_end(&mut command)
    };
    let base = format!("postgres://postgres@localhost:{}/postgres", postgres.port);
    for query in [
        "sslmode=require".to_owned(),
        "sslmode=verify-ca".to_owned(),
        format!("sslmode=verify-ca&sslrootcert={ca_file}"),
        format!("sslrootcert={ca_file}"),
        // The library takes the last: a check that read the first would let `require` by.
        format!("sslmode=verify-full&sslrootcert={ca_file}&sslmode=require"),
        // ... and decodes the parameters' names.
        format!("sslmode=verify-full&sslrootcert={ca_file}&ssl%6Dode=require"),
        // The host it dials may be named in the query: across a network, with no sslmode.
        "host=db.invalid".to_owned(),
    ] {
        let (code, said) = migrate(&format!("{base}?{query}"));
        assert_ne!(code, 0, "{query}: {said}");
        assert!(
            said.contains("FLOODGATE_DATABASE_URL") && said.contains("sslmode=verify-full"),
            "{query}: {said}"
        );
        assert!(
            !said.contains("connecting to PostgreSQL"),
            "{query}: {said}"
        );
    }
    let (code, said) = migrate(&postgres.url(ca.ca_file().as_ref()));
    assert_eq!(code, 0, "verify-full with the CA: {said}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_scram_takes_the_right_password_and_refuses_a_wrong_one() {
    let (user, password) = ("floodgate", secret("kafka_"));
    let broker = PrivateBroker::start_authenticated(&[(user, &password)], None).await;
    let scram = |password: &str| {
        vec![
            ("FLOODGATE_KAFKA_BROKERS", broker.address()),
            ("FLOODGATE_KAFKA_SECURITY_PROTOCOL", "sasl_plaintext".into()),
            ("FLOODGATE_KAFKA_SASL_MECHANISM", "SCRAM-SHA-512".into()),
            ("FLOODGATE_KAFKA_SASL_USERNAME", user.into()),
            ("FLOODGATE_KAFKA_SASL_PASSWORD", password.to_owned()),
        ]
    };
    let topic = unique("floodgate.scram.");
    let (code, said) = ensure_topics(&topic, &scram(&secret("wrong_")));
    assert_ne!(code, 0, "a wrong password: {said}");
    assert!(!said.contains("created"), "{said}");
    let anonymous = vec![("FLOODGATE_KAFKA_BROKERS", broker.address())];
    let (code, said) = ensure_topics(&topic, &anonymous);
    assert_ne!(code, 0, "no credentials at all: {said}");
    let (code, said) = ensure_topics(&topic, &scram(&password));
    assert_eq!(code, 0, "the right password: {said}");
    assert!(said.contains("created"), "{said}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sale_runs_on_a_redis_cluster_that_speaks_only_tls() {
    install_provider();
    let ca = TestCa::new("Floodgate test CA");
    let cluster = TlsRedisCluster::start(&ca.localhost(), &ca.ca_file()).await;
    a_sale_runs_on(&cluster, &ca).await;
}

/// An operator's certificates name DNS names, not addresses: nodes that announce a hostname
/// are dialled by it, and the certificate is checked against it, redirections, the replica
/// waits and the gateways' reading of the layout included (docs/deploy.md, "Redis").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sale_runs_on_a_tls_cluster_known_by_name_whose_certificates_name_no_address() {
    install_provider();
    let ca = TestCa::new("Floodgate test CA");
    let by_name_only = ca.issue("localhost", &["localhost"]);
    let cluster = TlsRedisCluster::start_named(&by_name_only, &ca.ca_file(), "localhost").await;
    assert!(cluster
        .seeds
        .iter()
        .all(|s| s.starts_with("rediss://localhost:")));
    a_sale_runs_on(&cluster, &ca).await;
}

/// Two reservations on `cluster` through the gateway and the booking service, both written to
/// PostgreSQL; a client trusting another CA gets no connection.
async fn a_sale_runs_on(cluster: &TlsRedisCluster, ca: &TestCa) {
    // The gateway, the booking service and the test's own reads all on the cluster, over TLS,
    // redirections and the replica waits included.
    let options = TestOptions {
        redis_cluster: Some(cluster.seeds.clone()),
        redis_tls_ca_file: Some(ca.ca_file()),
        ..TestOptions::default()
    };
    let app = TestApp::spawn_with(floodgate_tests::fresh_db().await, options).await;
    let spec = SaleSpec {
        pools: vec![("p1".into(), 2), ("p2".into(), 2)],
        ..SaleSpec::default()
    };
    let sale = app.open_sale("tls-cluster-", spec).await;
    for (ticket, pool) in [(1, "p1"), (2, "p2")] {
        let token = app.token(&sale, ticket, 1, 60_000);
        app.reserve(&sale, &token, &unique("k"), pool, 1)
            .await
            .expect("a reservation on the TLS cluster");
    }
    eventually("both bookings are written", WAIT, || async {
        app.bookings(&sale, "PENDING_PAYMENT").await == 2
    })
    .await;

    // A client that does not trust the cluster's CA never gets a connection.
    let impostor = TestCa::new("Not the cluster's CA");
    let mut args = floodgate_tests::redis_args_on("x:", None, Some(&cluster.seeds));
    args.redis_tls_ca_file = Some(impostor.ca_file());
    let refused = floodgate_platform::runtime::connect_redis(&args).await;
    assert!(
        refused.is_err(),
        "a cluster whose certificates do not verify"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_that_asks_for_a_client_certificate_gets_the_one_configured() {
    install_provider();
    let ca = TestCa::new("Floodgate test CA");
    let redis = TlsRedis::start_requiring_client_certificates(&ca.localhost(), &ca.ca_file()).await;
    let mut args = floodgate_tests::redis_args(&unique("t"), Some(redis.tls_url()));
    args.redis_tls_ca_file = Some(ca.ca_file());
    let refused = floodgate_platform::runtime::connect_redis(&args).await;
    assert!(refused.is_err(), "no client certificate, no connection");

    let client = ca.issue("floodgate-booking", &["floodgate-booking"]);
    args.redis_tls_cert_file = Some(client.cert_file.clone());
    args.redis_tls_key_file = Some(client.key_file.clone());
    let mut redis_conn = floodgate_platform::runtime::connect_redis(&args)
        .await
        .expect("the client certificate is accepted");
    let pong: String = redis::cmd("PING")
        .query_async(&mut redis_conn)
        .await
        .unwrap();
    assert_eq!(pong, "PONG");

    // A certificate without its key is a mistake in the settings, said at once.
    args.redis_tls_key_file = None;
    let err = floodgate_platform::runtime::connect_redis(&args)
        .await
        .err();
    let said = err.map(|e| e.to_string()).unwrap_or_default();
    assert!(said.contains("needs its key"), "{said}");
}
