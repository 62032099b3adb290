//! `floodgate-consumer`: persist reservation events to PostgreSQL.

use anyhow::Context as _;
use floodgate_consumer::{supervise, Config};
use floodgate_platform::runtime::{self, migrator, DatabaseArgs};

#[derive(clap::Parser)]
#[command(name = "floodgate-consumer", version, about)]
struct Cli {
    #[command(flatten)]
    config: Config,
    #[command(flatten)]
    database: DatabaseArgs,
    /// Where Prometheus scrapes this consumer's metrics (`GET /metrics`), and where probes find
    /// `GET /healthz` and `GET /readyz`.
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
    // Secret settings (the Kafka SASL password) may come from files (`<VAR>_FILE`).
    let cli: Cli = floodgate_platform::secret_files::parse_with_secret_files();
    // Kept until main returns: its drop exports the last spans.
    let _exporting =
        runtime::start("floodgate-consumer", cli.log_json).map_err(anyhow::Error::msg)?;
    // This process supervises the worker, which does the work (floodgate_consumer::supervise
    // says why).
    if !supervise::is_worker() {
        let code = supervise::supervise(runtime::shutdown_on_signal()).await?;
        std::process::exit(code);
    }
    let restarts = supervise::become_worker()?;
    let db = cli.database.connect().await.map_err(anyhow::Error::msg)?;
    migrator().run(&db).await.context("applying migrations")?;
    let metrics_listener = runtime::listen(&cli.metrics_listen)
        .await
        .with_context(|| format!("binding {}", cli.metrics_listen))?;
    runtime::metrics();
    metrics::gauge!("floodgate_consumer_worker_restarts").set(restarts as f64);
    let admin = floodgate_consumer::probes::admin_router(&cli.config, db.clone())?;
    tokio::spawn(floodgate_platform::listener::serve(
        metrics_listener,
        admin,
        floodgate_platform::listener::Limits::internal(),
        std::future::pending(),
    ));
    floodgate_consumer::run(&cli.config, db, runtime::shutdown_on_signal()).await
}
