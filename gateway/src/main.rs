//! `floodgate-gateway`: serve the waiting room, or make a token signing key.

use clap::{Parser, Subcommand};
use floodgate_gateway::{Config, Gateway};
use floodgate_platform::{runtime, service};
use floodgate_protocol::token::TokenSigner;

/// jemalloc, not glibc's malloc: a gateway holds tens of thousands of small long-lived
/// allocations per socket (the session's task, its WebSocket, its seat), made between the
/// short-lived ones of each join. glibc leaves the freed ones as holes between the kept ones;
/// jemalloc keeps each size in runs of its own, so what a join frees is given back whole: 2.1
/// KB per idle connection against glibc's 2.6 (BENCHMARKS.md, "Gateway memory per idle
/// WebSocket"), for a process 1 MiB larger at start (mimalloc's was 12 MiB larger).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Parser)]
#[command(name = "floodgate-gateway", version, about)]
struct Cli {
    /// Log as JSON lines instead of human-readable text.
    #[arg(long, env = "FLOODGATE_LOG_JSON", global = true)]
    log_json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the waiting room.
    Serve(Box<Config>),
    /// Print a new Ed25519 admission-token key pair as environment variables.
    Keygen {
        /// Key id written into tokens; pick a new one per rotation (e.g. a date).
        #[arg(long, default_value = "k1")]
        kid: String,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // Secret settings may come from files (`<VAR>_FILE`), as container platforms mount them.
    let cli: Cli = floodgate_platform::secret_files::parse_with_secret_files();
    // Kept until main returns: its drop exports the last spans.
    let _exporting =
        runtime::start("floodgate-gateway", cli.log_json).map_err(anyhow::Error::msg)?;
    match cli.command {
        Command::Keygen { kid } => {
            let signer = TokenSigner::generate(&kid);
            println!("# gateways only (secret):");
            println!("FLOODGATE_TOKEN_KEY_ID={kid}");
            println!("FLOODGATE_TOKEN_SIGNING_KEY={}", signer.seed_base64());
            println!("# booking service (public; list every key still in use):");
            println!(
                "FLOODGATE_TOKEN_PUBLIC_KEYS={kid}={}",
                signer.public_base64()
            );
            Ok(())
        }
        Command::Serve(config) => service::main::<Gateway>(*config).await,
    }
}
