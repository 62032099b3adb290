//! `floodgate-consumer`: persist reservation events to PostgreSQL.

use floodgate_consumer::{supervise, Config, Consumer};
use floodgate_platform::{runtime, service};

#[derive(clap::Parser)]
#[command(name = "floodgate-consumer", version, about)]
struct Cli {
    #[command(flatten)]
    config: Config,
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
    runtime::metrics();
    metrics::gauge!("floodgate_consumer_worker_restarts").set(restarts as f64);
    service::main::<Consumer>(cli.config).await
}
