//! `floodgate-consumer`: persist reservation events to PostgreSQL.

use anyhow::Context as _;
use clap::Parser;
use floodgate_consumer::{migrator, Config};
use floodgate_contract::runtime;
use sqlx::postgres::PgPoolOptions;

#[derive(Parser)]
#[command(name = "floodgate-consumer", version, about)]
struct Cli {
    #[command(flatten)]
    config: Config,
    /// PostgreSQL to write bookings to. May carry a password: it is never printed (not by
    /// `--help`, not in errors).
    #[arg(
        long,
        env = "FLOODGATE_DATABASE_URL",
        default_value = "postgres://postgres@127.0.0.1:5432/floodgate",
        hide_env_values = true
    )]
    database_url: String,
    /// Where Prometheus scrapes this consumer's metrics (`GET /metrics`).
    #[arg(
        long,
        env = "FLOODGATE_CONSUMER_METRICS_LISTEN",
        default_value = "127.0.0.1:9102"
    )]
    metrics_listen: String,
    /// Log as JSON lines instead of human-readable text.
    #[arg(long, env = "FLOODGATE_LOG_JSON")]
    log_json: bool,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    runtime::init_tracing(cli.log_json);
    let db = PgPoolOptions::new()
        .max_connections(4)
        .connect(&cli.database_url)
        .await
        .with_context(|| {
            format!(
                "connecting to PostgreSQL at {}",
                floodgate_contract::secrets::redact_url(&cli.database_url)
            )
        })?;
    migrator().run(&db).await.context("applying migrations")?;
    let metrics_listener = tokio::net::TcpListener::bind(&cli.metrics_listen)
        .await
        .with_context(|| format!("binding {}", cli.metrics_listen))?;
    let metrics_app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(|| async { runtime::metrics().render() }),
    );
    tokio::spawn(async move { axum::serve(metrics_listener, metrics_app).await });
    floodgate_consumer::run(&cli.config, db, runtime::shutdown_on_signal()).await
}
