//! Process plumbing every Floodgate binary shares: telemetry, shutdown signals, the Redis
//! connection. Kept here so the three services start, log and stop the same way.

pub use crate::redis_conn::RedisConn;
use tokio_util::sync::CancellationToken;

/// Starts `tracing` with `RUST_LOG` (default `info`), as JSON lines when `json` is set.
pub fn init_tracing(json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    // A second init (tests start several services in one process) is harmless: keep the first.
    let _ = if json {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
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
        RedisConn::single(&args.redis_url).await
    } else {
        RedisConn::cluster(&seeds).await
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
}

impl RedisArgs {
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
    /// A small pool (the services' queries are few and batched); the error names the database
    /// without its password.
    pub async fn connect(&self) -> Result<sqlx::PgPool, String> {
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

/// The schema (`migrations/`), applied at start-up by the booking service and the consumer and
/// by `floodgate-booking migrate`. Migrations a newer release already applied are tolerated, so
/// an instance of the previous release can restart during a rolling upgrade (every migration is
/// additive for that reason).
pub fn migrator() -> sqlx::migrate::Migrator {
    let mut migrator = sqlx::migrate!("../migrations");
    migrator.set_ignore_missing(true);
    migrator
}

/// Where Kafka is and which topic carries reservation events.
#[derive(Clone, Debug, clap::Args)]
pub struct KafkaArgs {
    /// Kafka bootstrap servers.
    #[arg(
        long,
        env = "FLOODGATE_KAFKA_BROKERS",
        default_value = "127.0.0.1:9092"
    )]
    pub kafka_brokers: String,
    /// Topic of reservation events.
    #[arg(long, env = "FLOODGATE_RESERVATIONS_TOPIC", default_value = crate::events::DEFAULT_RESERVATIONS_TOPIC)]
    pub reservations_topic: String,
}

/// The process-wide Prometheus recorder, installed on first use. Every service serves its
/// rendering at `GET /metrics`; several services in one process (the tests) share it.
pub fn metrics() -> &'static metrics_exporter_prometheus::PrometheusHandle {
    static HANDLE: std::sync::OnceLock<metrics_exporter_prometheus::PrometheusHandle> =
        std::sync::OnceLock::new();
    HANDLE.get_or_init(|| {
        metrics_exporter_prometheus::PrometheusBuilder::new()
            .install_recorder()
            .expect("the Prometheus recorder is installed once per process")
    })
}
