//! Process plumbing every Floodgate binary shares: telemetry, shutdown signals, the Redis
//! connection. Kept here so the three services start, log and stop the same way.

pub use crate::kafka::KafkaArgs;
pub use crate::redis_conn::RedisConn;
pub use crate::telemetry::metrics;
use tokio_util::sync::CancellationToken;

/// Makes rustls's `ring` provider the process's default, before any TLS connection (Redis,
/// PostgreSQL, HTTPS) is made: one provider for every client, chosen here rather than by
/// whichever crate asks first. A second call is a no-op.
pub fn install_tls_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Raises this process' open-files soft limit to its hard limit and returns the limit now in
/// force. Every socket is a file descriptor (a gateway holds one per waiting client), and a
/// container platform can set only the hard limit (`ulimits` in compose, the runtime's default
/// in Kubernetes, where a Pod spec has no field for it), so each binary raises its own.
pub fn raise_open_files_limit() -> u64 {
    match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(limit) => limit,
        Err(e) => {
            tracing::warn!(error = %e, "could not raise the open-files limit");
            rlimit::getrlimit(rlimit::Resource::NOFILE).map_or(1024, |(soft, _)| soft)
        }
    }
}

/// The accept queue every listener asks for. A flash crowd opens tens of thousands of
/// connections in a second; tokio's own `TcpListener::bind` asks for 1,024, and a full queue
/// drops the next SYNs, which the client's kernel resends only after 1, 3, 7 s: a join that
/// arrived on time waits seconds for nothing, and a poll times out. The kernel caps the queue at
/// `net.core.somaxconn` (4,096 by default; docs/deploy.md says how to raise it), so asking for
/// the most it can be lets the operator's setting decide.
pub const LISTEN_BACKLOG: u32 = 65_535;

/// Listens on `addr` (`host:port`; the first address it resolves to that can be bound) with an
/// accept queue of [`LISTEN_BACKLOG`].
pub async fn listen(addr: &str) -> std::io::Result<tokio::net::TcpListener> {
    let mut last = None;
    for resolved in tokio::net::lookup_host(addr).await? {
        let socket = match resolved {
            std::net::SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
            std::net::SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
        };
        // As `TcpListener::bind` does: a restarted service binds while its old connections
        // are still in TIME_WAIT.
        socket.set_reuseaddr(true)?;
        match socket.bind(resolved) {
            Ok(()) => return socket.listen(LISTEN_BACKLOG),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{addr} names no address"),
        )
    }))
}

/// Starts `tracing`: logs with `RUST_LOG` (default `info`), as JSON lines when `json` is set,
/// and the spans of `service` exported by OTLP when `OTEL_EXPORTER_OTLP_ENDPOINT` is set
/// ([`crate::trace`]). Keep the guard until the service ends: dropping it flushes the spans.
pub fn init_tracing(json: bool, service: &'static str) -> Result<crate::trace::Exporting, String> {
    use tracing_subscriber::prelude::*;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let logs = if json {
        tracing_subscriber::fmt::layer()
            .json()
            .with_filter(filter)
            .boxed()
    } else {
        tracing_subscriber::fmt::layer().with_filter(filter).boxed()
    };
    let (spans, exporting) = crate::trace::layer(service)?;
    // A second init (tests start several services in one process) is harmless: keep the first.
    let _ = tracing_subscriber::registry()
        .with(logs)
        .with(spans)
        .try_init();
    Ok(exporting)
}

/// What every binary does first, in this order: the TLS provider before any client is built,
/// tracing (the guard it returns exports the last spans when dropped: keep it until `main`
/// returns), and the open-files limit raised as far as allowed (a child process inherits it).
pub fn start(service: &'static str, log_json: bool) -> Result<crate::trace::Exporting, String> {
    install_tls_provider();
    let exporting = init_tracing(log_json, service)?;
    let open_files = raise_open_files_limit();
    tracing::debug!(open_files, "open-files limit");
    Ok(exporting)
}

/// A token cancelled on the first SIGINT or SIGTERM; every task of a service watches it.
pub fn shutdown_on_signal() -> CancellationToken {
    let token = CancellationToken::new();
    let trigger = token.clone();
    tokio::spawn(async move {
        let ctrl_c = tokio::signal::ctrl_c();
        #[cfg(unix)]
        let term = async {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut s) => {
                    s.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        };
        #[cfg(not(unix))]
        let term = std::future::pending::<()>();
        tokio::select! {
            _ = ctrl_c => {},
            _ = term => {},
        }
        tracing::info!("shutdown signal received");
        trigger.cancel();
    });
    token
}

/// Connects to the Redis `args` name: its cluster if seed nodes are given, else the single
/// server at its URL.
pub async fn connect_redis(args: &RedisArgs) -> Result<RedisConn, redis::RedisError> {
    let seeds: Vec<String> = args
        .redis_cluster_nodes
        .iter()
        .filter(|n| !n.trim().is_empty())
        .cloned()
        .collect();
    if seeds.is_empty() {
        RedisConn::single(&args.redis_url, &args.tls()).await
    } else {
        RedisConn::cluster(&seeds, &args.tls()).await
    }
}

/// Where Redis is, for every service that uses it.
#[derive(Clone, Debug, clap::Args)]
pub struct RedisArgs {
    /// Redis holding the waiting rooms and the inventory. May carry a password: it is never
    /// printed (not by `--help` either).
    #[arg(
        long,
        env = "FLOODGATE_REDIS_URL",
        default_value = "redis://127.0.0.1:6379",
        hide_env_values = true
    )]
    pub redis_url: String,
    /// Prefix of every Redis key (several deployments or tests can share one Redis). No braces.
    #[arg(long, env = "FLOODGATE_REDIS_PREFIX", default_value = "fg:")]
    pub redis_prefix: String,
    /// A Redis Cluster's seed nodes instead of one server, comma-separated
    /// (`redis://10.0.0.1:6379,redis://10.0.0.2:6379`): any few of its nodes; the rest are
    /// found from them. When set, `FLOODGATE_REDIS_URL` is not used.
    #[arg(
        long,
        env = "FLOODGATE_REDIS_CLUSTER_NODES",
        value_delimiter = ',',
        hide_env_values = true
    )]
    pub redis_cluster_nodes: Vec<String>,
    /// With `rediss://` URLs: a PEM file of the CA certificates the Redis servers' certificates
    /// must chain to (default: the system's store).
    #[arg(long, env = "FLOODGATE_REDIS_TLS_CA_FILE")]
    pub redis_tls_ca_file: Option<std::path::PathBuf>,
    /// With `rediss://` URLs: this client's certificate (PEM), for servers that require one.
    #[arg(long, env = "FLOODGATE_REDIS_TLS_CERT_FILE")]
    pub redis_tls_cert_file: Option<std::path::PathBuf>,
    /// With `rediss://` URLs: the private key (PEM) of that certificate.
    #[arg(long, env = "FLOODGATE_REDIS_TLS_KEY_FILE")]
    pub redis_tls_key_file: Option<std::path::PathBuf>,
}

impl RedisArgs {
    /// How `rediss://` connections are checked.
    pub fn tls(&self) -> crate::redis_conn::RedisTls {
        crate::redis_conn::RedisTls {
            ca_file: self.redis_tls_ca_file.clone(),
            client_cert_file: self.redis_tls_cert_file.clone(),
            client_key_file: self.redis_tls_key_file.clone(),
        }
    }

    /// The key builder for this prefix, refusing a prefix that would break the hash tags.
    pub fn keys(&self) -> Result<crate::keys::Keys, String> {
        if crate::keys::check_prefix(&self.redis_prefix) {
            Ok(crate::keys::Keys::new(&self.redis_prefix))
        } else {
            Err("FLOODGATE_REDIS_PREFIX must be at most 32 bytes and contain no braces".into())
        }
    }
}

/// Where PostgreSQL is, for the booking service and the consumer.
#[derive(Clone, Debug, clap::Args)]
pub struct DatabaseArgs {
    /// PostgreSQL holding the catalog and the bookings. May carry a password: it is never
    /// printed (not by `--help`, not in errors).
    #[arg(
        long,
        env = "FLOODGATE_DATABASE_URL",
        default_value = "postgres://postgres@127.0.0.1:5432/floodgate",
        hide_env_values = true
    )]
    pub database_url: String,
}

impl DatabaseArgs {
    /// [`DatabaseArgs::connect`], then the migrations applied (each service does both before
    /// it serves: the schema is never behind the code that reads it).
    pub async fn connect_migrated(&self) -> Result<sqlx::PgPool, String> {
        let db = self.connect().await?;
        migrator()
            .run(&db)
            .await
            .map_err(|e| format!("applying migrations: {e}"))?;
        Ok(db)
    }

    /// A small pool (the services' queries are few and batched); the error names the database
    /// without its password.
    pub async fn connect(&self) -> Result<sqlx::PgPool, String> {
        check_database_tls(&self.database_url)?;
        sqlx::postgres::PgPoolOptions::new()
            .max_connections(4)
            .connect(&self.database_url)
            .await
            .map_err(|e| {
                format!(
                    "connecting to PostgreSQL at {}: {e}",
                    crate::secrets::redact_url(&self.database_url)
                )
            })
    }
}

/// Refuses a database URL whose TLS would not check the server, as the library will read it
/// (its query parameters decoded, the last of one given twice, `host=` and `hostaddr=`, and the
/// `PG*` variables where the URL says nothing): `sslmode` `require` and `verify-ca` encrypt to
/// whoever answers (or to any holder of a certificate of the CA), which is no protection against
/// the one who can stand in for PostgreSQL; `prefer` (the library's default) and `allow` can be
/// stripped by whoever is on the path, so they are taken only for a server on this machine
/// (loopback, a Unix socket), where there is no path; and a CA file (`sslrootcert`) without
/// `verify-full` is a check an operator believes in and nobody makes. Allowed: `verify-full`,
/// and `disable` (no TLS, said out loud: a network the operator owns, a sidecar).
pub fn check_database_tls(url: &str) -> Result<(), String> {
    use sqlx::postgres::{PgConnectOptions, PgSslMode};
    use sqlx::ConnectOptions as _;
    let options: PgConnectOptions = url.parse().map_err(|_| {
        format!(
            "FLOODGATE_DATABASE_URL ({}) is not a PostgreSQL URL the client can read",
            crate::secrets::redact_url(url)
        )
    })?;
    let root_cert = options
        .to_url_lossy()
        .query_pairs()
        .any(|(key, _)| key == "sslrootcert");
    let local = options.get_socket().is_some() || is_this_machine(options.get_host());
    let fix = "use sslmode=verify-full (with sslrootcert=<CA file> for a private CA), or \
               sslmode=disable on a link that needs no TLS (loopback, a sidecar, a network you own)";
    match options.get_ssl_mode() {
        PgSslMode::VerifyFull => Ok(()),
        PgSslMode::Disable | PgSslMode::Prefer | PgSslMode::Allow if root_cert => Err(format!(
            "FLOODGATE_DATABASE_URL names a CA file (sslrootcert) that would not be used to check \
             the server: {fix}"
        )),
        PgSslMode::Disable => Ok(()),
        PgSslMode::Prefer | PgSslMode::Allow if local => Ok(()),
        PgSslMode::Prefer | PgSslMode::Allow => Err(format!(
            "FLOODGATE_DATABASE_URL names a server across a network with no sslmode (or prefer, \
             or allow), so the connection is encrypted only if nobody on the path says otherwise, \
             and checked never: {fix}"
        )),
        PgSslMode::Require | PgSslMode::VerifyCa => Err(format!(
            "FLOODGATE_DATABASE_URL asks for TLS that does not check that the server is the one \
             named (sslmode=require or verify-ca), so whoever stands on the path can pose as \
             PostgreSQL: {fix}"
        )),
    }
}

/// Whether `host` (as the client will dial it) is this machine: `localhost` or a loopback
/// address.
fn is_this_machine(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The schema (`migrations/`), applied at start-up by the booking service and the consumer and
/// by `floodgate-booking migrate`. Migrations a newer release already applied are tolerated, so
/// an instance of the previous release can restart during a rolling upgrade (every migration is
/// additive for that reason).
pub fn migrator() -> sqlx::migrate::Migrator {
    let mut migrator = sqlx::migrate!("../migrations");
    migrator.set_ignore_missing(true);
    migrator
}

#[cfg(test)]
mod tests {
    use super::check_database_tls;

    const DB: &str = "postgres://floodgate:pw@db.internal:5432/floodgate";

    #[test]
    fn only_tls_that_checks_the_servers_name_is_accepted() {
        let check = |query: &str| check_database_tls(&format!("{DB}{query}"));
        assert!(check("?sslmode=disable").is_ok());
        assert!(check("?sslmode=verify-full").is_ok());
        assert!(check("?sslmode=verify-full&sslrootcert=/ca.crt").is_ok());
        assert!(check("?ssl-mode=verify-full").is_ok());
        for query in [
            "?sslmode=require",
            "?sslmode=verify-ca&sslrootcert=/ca.crt",
            "?sslmode=prefer",
            "?sslmode=allow",
            "?sslrootcert=/ca.crt",
            "?sslmode=disable&sslrootcert=/ca.crt",
            // The library takes the last of a parameter given twice, its name decoded: so does
            // the check.
            "?sslmode=verify-full&sslmode=require",
            "?sslmode=verify-full&ssl%6Dode=require",
        ] {
            let refused = check(query).expect_err(query);
            assert!(refused.contains("FLOODGATE_DATABASE_URL"), "{refused}");
            assert!(refused.contains("verify-full"), "{refused}");
            assert!(!refused.contains("pw"), "the password stays out: {refused}");
        }
        assert!(check("?sslmode=require&sslmode=verify-full").is_ok());
        let unknown = check("?sslmode=verify_full").expect_err("an unknown sslmode");
        assert!(unknown.contains("FLOODGATE_DATABASE_URL") && !unknown.contains("pw:"));
    }

    #[test]
    fn a_database_across_a_network_must_say_how_it_is_reached() {
        // Saying nothing is the library's `prefer`: encrypted only if the server offers it,
        // checked never, and strippable by whoever is on the path. Fine on this machine only.
        for url in [
            "postgres://postgres@127.0.0.1:5432/floodgate",
            "postgres://postgres@localhost/floodgate",
            "postgres://postgres@[::1]:5432/floodgate",
            "postgres:///floodgate?host=/var/run/postgresql",
            "postgres://%2Fvar%2Frun%2Fpostgresql/floodgate",
            "postgres://postgres@127.0.0.1/floodgate?sslmode=prefer",
        ] {
            assert!(check_database_tls(url).is_ok(), "{url}");
        }
        // The host the library will dial, wherever the URL names it.
        for url in [
            "postgres://app:pw@db.internal:5432/floodgate",
            "postgres://app:pw@10.0.0.7/floodgate",
            "postgresql://app:pw@cluster-rw.floodgate.svc:5432/app",
            "postgres:///floodgate?host=db.internal",
            "postgres://localhost/floodgate?hostaddr=10.0.0.7",
        ] {
            let refused = check_database_tls(url).expect_err(url);
            assert!(refused.contains("sslmode=verify-full"), "{refused}");
            assert!(refused.contains("sslmode=disable"), "{refused}");
            assert!(!refused.contains("pw"), "{refused}");
        }
        assert!(check_database_tls("postgres://app:pw@db.internal/f?sslmode=disable").is_ok());
        assert!(check_database_tls("postgres://app:pw@db.internal/f?sslmode=verify-full").is_ok());
    }
}
