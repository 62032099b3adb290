//! `floodgate-sandbox`: the sandbox payment provider, and with `--signin` the sign-in stand-in,
//! for the demo and the tests. Never for a real sale: no money moves, and anyone may sign in as
//! anyone.

use anyhow::Context as _;
use clap::Parser;
use floodgate_platform::runtime;
use floodgate_sandbox::{Sandbox, SandboxConfig};

#[derive(Parser)]
#[command(name = "floodgate-sandbox", version, about)]
struct Cli {
    #[command(flatten)]
    config: SandboxConfig,
    /// Log as JSON lines (for log shippers) instead of human-readable text.
    #[arg(long, env = "FLOODGATE_LOG_JSON")]
    log_json: bool,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // Secret settings may come from files (`<VAR>_FILE`), as container platforms mount them.
    let cli: Cli = floodgate_platform::secret_files::parse_with_secret_files();
    // Kept until main returns: its drop exports the last spans.
    let _exporting =
        runtime::start("floodgate-sandbox", cli.log_json).map_err(anyhow::Error::msg)?;
    let config = cli.config;
    config.validate().map_err(anyhow::Error::msg)?;
    let listener = runtime::listen(&config.listen)
        .await
        .with_context(|| format!("binding {}", config.listen))?;
    tracing::warn!(addr = %listener.local_addr()?,
        "sandbox payment provider listening: test mode, no money moves");
    let shutdown = runtime::shutdown_on_signal();
    floodgate_platform::listener::serve(
        listener,
        Sandbox::new(config).router(),
        floodgate_sandbox::listener_limits(),
        async move { shutdown.cancelled().await },
    )
    .await?;
    Ok(())
}
