//! `floodgate-booking`'s command line: every command, its arguments and their help (what each
//! does is in main.rs).

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use floodgate_booking::{rebuild, Config};
use floodgate_platform::runtime::{DatabaseArgs, KafkaArgs, RedisArgs};

#[derive(Parser)]
#[command(name = "floodgate-booking", version, about)]
pub(crate) struct Cli {
    /// Log as JSON lines (for log shippers) instead of human-readable text.
    #[arg(long, env = "FLOODGATE_LOG_JSON", global = true)]
    pub(crate) log_json: bool,
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Subcommand)]
pub(crate) enum Command {
    /// Serve the booking API (and run the outbox relay and the hold reaper).
    // Boxed: the service's settings are many times the size of any other command's.
    Serve(Box<Config>),
    /// Apply the database migrations in `migrations/` (idempotent).
    Migrate(DatabaseArgs),
    /// Gone: the sandbox provider is its own binary, `floodgate-sandbox`, with the same settings.
    /// Kept, hidden, so a script or manifest that still runs it stops saying so, rather than with
    /// "unrecognized subcommand".
    #[command(hide = true, disable_help_flag = true)]
    SandboxPay {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        _ignored: Vec<String>,
    },
    /// Create and arm sales in the catalog.
    // Boxed: its commands' settings are many times the size of the small commands'.
    #[command(subcommand)]
    Sale(Box<SaleCommand>),
    /// The Kafka topics: `topics ensure` creates the reservations topic and its dead-letter
    /// topic where missing, and checks those that exist (exits 2 on a difference).
    #[command(subcommand)]
    Topics(TopicsCommand),
    /// The Lua scripts, for benchmarks.
    #[command(subcommand)]
    Scripts(ScriptsCommand),
    /// The audit trail of operator actions.
    #[command(subcommand)]
    Audit(AuditCommand),
}

#[derive(Subcommand)]
pub(crate) enum AuditCommand {
    /// Check every row of the audit trail against its chain (FLOODGATE_AUDIT_KEY): exits 2 naming
    /// each row that was edited, inserted by hand, or follows a deleted one; prints the newest
    /// row's id and MAC, to compare with the last one the services logged.
    Verify {
        #[command(flatten)]
        db: DatabaseArgs,
        #[command(flatten)]
        audit: AuditArgs,
    },
    /// Hand the chain over to FLOODGATE_AUDIT_KEY: a rotation row made with it, carrying the
    /// handover of the key in force (which must be among FLOODGATE_AUDIT_PREVIOUS_KEYS). From
    /// it on, only the new key appends; run it once every booking service holds the new key.
    Rotate {
        #[command(flatten)]
        db: DatabaseArgs,
        #[command(flatten)]
        audit: AuditArgs,
    },
}

/// Who runs an admin command, and the key its audit rows are chained with.
#[derive(clap::Args)]
pub(crate) struct AuditArgs {
    /// The audit trail's chain key, the booking services' own (required by every command that
    /// changes something: each is recorded).
    #[arg(long, env = "FLOODGATE_AUDIT_KEY", hide_env_values = true)]
    pub(crate) audit_key: Option<secrecy::SecretString>,
    /// The keys the trail was chained with before the current one, comma-separated: rows made
    /// before a rotation still check, and until `audit rotate` the key in force appends.
    #[arg(long, env = "FLOODGATE_AUDIT_PREVIOUS_KEYS", hide_env_values = true)]
    pub(crate) previous_keys: Option<secrecy::SecretString>,
    /// Who is running the command, as the audit trail records it (default: cli:<login name>).
    #[arg(long, env = "FLOODGATE_OPERATOR")]
    pub(crate) operator: Option<String>,
}

#[derive(Subcommand)]
pub(crate) enum ScriptsCommand {
    /// Loads the scripts into Redis and prints, as JSON, each script a reservation of one seat
    /// in `pool` runs (claim_token, reserve, ack) with its SHA-1, KEYS and ARGV, as the booking
    /// service sends them; ids that must be fresh per reservation hold redis-benchmark's
    /// `__rand_int__` (deploy/bench.sh times them).
    Bench {
        #[command(flatten)]
        redis: RedisArgs,
        #[arg(long)]
        sale: String,
        #[arg(long)]
        pool: String,
    },
}

#[derive(Subcommand)]
pub(crate) enum TopicsCommand {
    /// Create the reservations and dead-letter topics as the settings say, or check them.
    Ensure {
        #[command(flatten)]
        kafka: KafkaArgs,
        /// The dead-letter topic (default: the reservations topic's name with `.dlq`).
        #[arg(long, env = "FLOODGATE_DLQ_TOPIC")]
        dlq_topic: Option<String>,
        /// The booking service's probe topic (default: the reservations topic's name with
        /// `.probe`).
        #[arg(long, env = "FLOODGATE_PROBE_TOPIC")]
        probe_topic: Option<String>,
        #[command(flatten)]
        settings: floodgate_booking::topics::TopicSettings,
    },
}

#[derive(Subcommand)]
pub(crate) enum SaleCommand {
    /// Write a sale file (TOML) to the catalog; with --arm, arm it too.
    Create {
        file: PathBuf,
        /// Override the file's sale id (rehearse the same file as many sales).
        #[arg(long)]
        id: Option<String>,
        /// Override the file's opens_at: open this many seconds from now (demos, rehearsals).
        #[arg(long)]
        opens_in_secs: Option<u64>,
        /// Arm the sale right after creating it.
        #[arg(long)]
        arm: bool,
        #[command(flatten)]
        stores: StoreArgs,
    },
    /// Pre-load a catalog sale's counters and settings into Redis (refused once it has opened).
    Arm {
        sale: String,
        #[command(flatten)]
        stores: StoreArgs,
    },
    /// Write the sale's static catalog JSON (trains, classes, pools, fares) with gzip and brotli
    /// siblings under <out>/data/sales/, for the gateways' static folder or a CDN origin.
    Publish {
        sale: String,
        #[arg(long, env = "FLOODGATE_STATIC_DIR", default_value = "static")]
        out: PathBuf,
        #[command(flatten)]
        db: DatabaseArgs,
    },
    /// Rebuild a pool whose Redis state was lost, from PostgreSQL once the consumer has applied
    /// the Kafka tail; refused for a pool that has its state.
    Rebuild {
        sale: String,
        pool: String,
        #[command(flatten)]
        stores: StoreArgs,
        #[command(flatten)]
        tail: TailArgs,
    },
    /// End a sale: nothing more is sold. New claims stop at once; each pool ends once nothing is
    /// in flight there (exits 2 saying what it waits for; run it again). The sale then leaves the
    /// relay's and reaper's walk.
    End {
        sale: String,
        #[command(flatten)]
        stores: StoreArgs,
    },
    /// Delete an ended sale's Redis state once PostgreSQL has everything (reconciled, nothing
    /// held or awaiting payment, every event applied); exits 2 saying why not, deleting nothing.
    Purge {
        sale: String,
        #[command(flatten)]
        stores: StoreArgs,
    },
    /// Compare each pool's Redis counters with PostgreSQL and print the drifts; exits with 2 if
    /// any remain. With --repair, fix those that are safe to fix (it only ever makes fewer seats
    /// sellable), rebuild from PostgreSQL every pool refused for lost writes (after the Kafka
    /// tail), and say what was done.
    Reconcile {
        sale: String,
        #[arg(long)]
        repair: bool,
        #[command(flatten)]
        stores: StoreArgs,
        #[command(flatten)]
        tail: TailArgs,
    },
}

/// Where the Kafka tail is, for the commands that wait until PostgreSQL has it.
#[derive(clap::Args)]
pub(crate) struct TailArgs {
    #[command(flatten)]
    pub(crate) kafka: KafkaArgs,
    /// The consumer group that writes the bookings (its progress is the Kafka tail).
    #[arg(
        long,
        env = "FLOODGATE_CONSUMER_GROUP",
        default_value = floodgate_platform::kafka::DEFAULT_CONSUMER_GROUP
    )]
    pub(crate) group: String,
    /// How long to wait for the consumer to catch up, seconds.
    #[arg(long = "wait-secs", default_value = "60", value_parser = floodgate_platform::settings::secs)]
    pub(crate) wait: std::time::Duration,
}

impl TailArgs {
    pub(crate) fn tail(self) -> rebuild::KafkaTail {
        rebuild::KafkaTail {
            kafka: self.kafka,
            group: self.group,
            timeout: self.wait,
        }
    }
}

#[derive(clap::Args)]
pub(crate) struct StoreArgs {
    #[command(flatten)]
    pub(crate) db: DatabaseArgs,
    #[command(flatten)]
    pub(crate) redis: RedisArgs,
    #[command(flatten)]
    pub(crate) audit: AuditArgs,
}
