//! `floodgate-booking`: serve the booking API, apply migrations, create and arm sales.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use floodgate_booking::catalog::{self, SaleFile};
use floodgate_booking::{ending, rebuild, reconcile};
use floodgate_booking::{AppState, Config};
use floodgate_contract::keys::Keys;
use floodgate_contract::runtime::{self, migrator, DatabaseArgs, KafkaArgs, RedisArgs};

/// mimalloc, not glibc's malloc: a reservation makes a few hundred short-lived allocations
/// across the runtime's threads, and glibc's arenas (their locks, frees and consolidation) were
/// an eighth of the service's CPU (BENCHMARKS.md, "Profiles").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(name = "floodgate-booking", version, about)]
struct Cli {
    /// Log as JSON lines (for log shippers) instead of human-readable text.
    #[arg(long, env = "FLOODGATE_LOG_JSON", global = true)]
    log_json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the booking API (and run the outbox relay and the hold reaper).
    Serve {
        // Boxed: the service's settings are many times the size of any other command's.
        #[command(flatten)]
        config: Box<Config>,
        #[command(flatten)]
        db: DatabaseArgs,
    },
    /// Run the sandbox payment provider (for demos and tests).
    SandboxPay(floodgate_booking::sandbox::SandboxConfig),
    /// Apply the database migrations in `migrations/` (idempotent).
    Migrate(DatabaseArgs),
    /// Create and arm sales in the catalog.
    #[command(subcommand)]
    Sale(SaleCommand),
    /// The Kafka topics: `topics ensure` creates the reservations topic and its dead-letter
    /// topic where missing, and checks those that exist (exits 2 on a difference).
    #[command(subcommand)]
    Topics(TopicsCommand),
    /// The Lua scripts, for benchmarks.
    #[command(subcommand)]
    Scripts(ScriptsCommand),
}

#[derive(Subcommand)]
enum ScriptsCommand {
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
enum TopicsCommand {
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
enum SaleCommand {
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
struct TailArgs {
    #[command(flatten)]
    kafka: KafkaArgs,
    /// The consumer group that writes the bookings (its progress is the Kafka tail).
    #[arg(
        long,
        env = "FLOODGATE_CONSUMER_GROUP",
        default_value = "floodgate-consumer"
    )]
    group: String,
    /// How long to wait for the consumer to catch up.
    #[arg(long, default_value_t = 60)]
    wait_secs: u64,
}

impl TailArgs {
    fn tail(self) -> rebuild::KafkaTail {
        rebuild::KafkaTail {
            kafka: self.kafka,
            group: self.group,
            timeout: std::time::Duration::from_secs(self.wait_secs),
        }
    }
}

#[derive(clap::Args)]
struct StoreArgs {
    #[command(flatten)]
    db: DatabaseArgs,
    #[command(flatten)]
    redis: RedisArgs,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // Secret settings may come from files (`<VAR>_FILE`), as container platforms mount them.
    let cli: Cli = floodgate_contract::secret_files::parse_with_secret_files();
    runtime::install_tls_provider();
    // Kept until main returns: its drop exports the last spans.
    let _exporting =
        runtime::init_tracing(cli.log_json, "floodgate-booking").map_err(anyhow::Error::msg)?;
    let open_files = runtime::raise_open_files_limit();
    tracing::debug!(open_files, "open-files limit");
    match cli.command {
        Command::Serve { config, db } => serve(*config, db).await,
        Command::SandboxPay(config) => sandbox_pay(config).await,
        Command::Migrate(db) => {
            let pool = connect_db(&db).await?;
            migrator().run(&pool).await.context("applying migrations")?;
            println!("migrations applied");
            Ok(())
        }
        Command::Sale(command) => sale(command).await,
        Command::Topics(TopicsCommand::Ensure {
            kafka,
            dlq_topic,
            probe_topic,
            settings,
        }) => ensure_topics(kafka, (dlq_topic, probe_topic), settings).await,
        Command::Scripts(ScriptsCommand::Bench { redis, sale, pool }) => {
            floodgate_contract::ids::check_sale_id(&sale)?;
            floodgate_contract::ids::check_pool_id(&pool)?;
            let keys = redis.keys().map_err(anyhow::Error::msg)?;
            let redis = runtime::connect_redis(&redis)
                .await
                .context("connecting to Redis")?;
            let calls =
                floodgate_booking::gatekeeper::calls::load_bench_calls(redis, keys, &sale, &pool)
                    .await
                    .context("loading the scripts")?;
            println!("{}", serde_json::to_string_pretty(&calls)?);
            Ok(())
        }
    }
}

/// `topics ensure`: a line per topic; exits 2 if one differs from the settings.
async fn ensure_topics(
    kafka: KafkaArgs,
    (dlq_topic, probe_topic): (Option<String>, Option<String>),
    settings: floodgate_booking::topics::TopicSettings,
) -> anyhow::Result<()> {
    use floodgate_booking::topics::{ensure, TopicState};
    let topic = &kafka.reservations_topic;
    let dlq = dlq_topic.unwrap_or_else(|| format!("{topic}.dlq"));
    let probe = floodgate_booking::topics::probe_topic(&kafka, probe_topic.as_deref());
    let mut differs = false;
    for (name, state) in ensure(&kafka, (&dlq, &probe), &settings).await? {
        match state {
            TopicState::Created => println!("topic {name}: created"),
            TopicState::AsSet => println!("topic {name}: as set"),
            TopicState::Differs(differences) => {
                differs = true;
                println!("topic {name}: differs from the settings (left as it is):");
                differences.iter().for_each(|d| println!("  {d}"));
            }
        }
    }
    if differs {
        std::process::exit(2);
    }
    Ok(())
}

async fn sale(command: SaleCommand) -> anyhow::Result<()> {
    match command {
        SaleCommand::Create {
            file,
            id,
            opens_in_secs,
            arm,
            stores,
        } => create_sale(file, id, opens_in_secs, arm, stores).await,
        SaleCommand::Arm { sale, stores } => {
            let (db, keys, redis) = connect_stores(&stores).await?;
            arm_sale(&db, &redis, &keys, &sale).await
        }
        SaleCommand::Publish { sale, out, db } => {
            let db = connect_db(&db).await?;
            let path = floodgate_booking::publish_static::publish(&db, &sale, &out).await?;
            println!("published {}", path.display());
            Ok(())
        }
        SaleCommand::Rebuild {
            sale,
            pool,
            stores,
            tail,
        } => rebuild_pool(sale, pool, stores, tail.tail()).await,
        SaleCommand::Reconcile {
            sale,
            repair,
            stores,
            tail,
        } => reconcile_sale(sale, repair, stores, tail.tail()).await,
        SaleCommand::End { sale, stores } => {
            let (db, keys, redis) = connect_stores(&stores).await?;
            match ending::end(&db, &redis, &keys, &sale).await? {
                ending::Ending::Ended => println!("sale {sale} ended: nothing more is sold"),
                ending::Ending::Waiting(waiting) => {
                    println!("sale {sale} is ending: new reservations are refused; waiting for");
                    waiting.iter().for_each(|line| println!("  {line}"));
                    println!("run `sale end {sale}` again once they are done");
                    std::process::exit(2);
                }
            }
            Ok(())
        }
        SaleCommand::Purge { sale, stores } => {
            let (db, keys, redis) = connect_stores(&stores).await?;
            match ending::purge(&db, &redis, &keys, &sale).await? {
                ending::Purge::Purged { keys } => {
                    println!(
                        "sale {sale} purged from Redis ({keys} keys); PostgreSQL keeps everything"
                    )
                }
                ending::Purge::Refused(problems) => {
                    println!("sale {sale} not purged; nothing was deleted:");
                    problems.iter().for_each(|line| println!("  {line}"));
                    std::process::exit(2);
                }
            }
            Ok(())
        }
    }
}

/// `sandbox-pay`: the payment provider's stand-in, for the demo and the tests.
async fn sandbox_pay(config: floodgate_booking::sandbox::SandboxConfig) -> anyhow::Result<()> {
    config.validate().map_err(anyhow::Error::msg)?;
    let listener = runtime::listen(&config.listen)
        .await
        .with_context(|| format!("binding {}", config.listen))?;
    tracing::info!(addr = %listener.local_addr()?, "sandbox payment provider listening");
    let shutdown = runtime::shutdown_on_signal();
    axum::serve(
        listener,
        floodgate_booking::sandbox::Sandbox::new(config).router(),
    )
    .with_graceful_shutdown(async move { shutdown.cancelled().await })
    .await?;
    Ok(())
}

/// `sale create`: a sale file into the catalog, and armed if asked.
async fn create_sale(
    file: PathBuf,
    id: Option<String>,
    opens_in_secs: Option<u64>,
    arm: bool,
    stores: StoreArgs,
) -> anyhow::Result<()> {
    let text =
        std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
    let mut sale = SaleFile::parse(&text).with_context(|| format!("in {}", file.display()))?;
    if let Some(id) = id {
        floodgate_contract::ids::check_sale_id(&id)?;
        sale.id = id;
    }
    if let Some(secs) = opens_in_secs {
        sale.opens_at = time::OffsetDateTime::now_utc() + time::Duration::seconds(secs as i64);
    }
    let db = connect_db(&stores.db).await?;
    catalog::create_sale(&db, &sale).await?;
    println!(
        "sale {} written to the catalog ({} pools, opens at {})",
        sale.id,
        sale.pools.len(),
        sale.opens_at
    );
    if arm {
        let (db, keys, redis) = connect_stores(&stores).await?;
        arm_sale(&db, &redis, &keys, &sale.id).await?;
    }
    Ok(())
}

/// `sale rebuild`: a pool whose Redis state was lost, from PostgreSQL once the consumer has
/// caught up.
async fn rebuild_pool(
    sale: String,
    pool: String,
    stores: StoreArgs,
    tail: rebuild::KafkaTail,
) -> anyhow::Result<()> {
    let (db, keys, redis) = connect_stores(&stores).await?;
    println!(
        "waiting for the consumer group {} to apply the Kafka tail",
        tail.group
    );
    let done = rebuild::rebuild(&db, &redis, &keys, &tail, &sale, &pool).await?;
    println!(
        "pool {pool} rebuilt: available {}, held {}, sold {} ({} reservation records restored)",
        done.available, done.held, done.sold, done.records
    );
    Ok(())
}

/// `sale reconcile`: Redis against PostgreSQL, repaired where safe if asked; exits 2 while
/// anything disagrees.
async fn reconcile_sale(
    sale: String,
    repair: bool,
    stores: StoreArgs,
    tail: rebuild::KafkaTail,
) -> anyhow::Result<()> {
    let (db, keys, redis) = connect_stores(&stores).await?;
    let mut reports = reconcile::report(&db, &redis, &keys, &sale).await?;
    print!("{}", reconcile::render(&sale, &reports));
    if repair {
        let mut done = reconcile::repair(&redis, &keys, &sale, &reports).await?;
        for report in reports.iter().filter(|r| r.lost_writes()) {
            let pool = &report.pool;
            println!("pool {pool} lost writes: waiting for the Kafka tail, then rebuilding it from PostgreSQL");
            let rebuilt = rebuild::rebuild(&db, &redis, &keys, &tail, &sale, pool).await?;
            done.push(format!(
                "{pool}: rebuilt from PostgreSQL: available {}, held {}, sold {}",
                rebuilt.available, rebuilt.held, rebuilt.sold
            ));
        }
        println!();
        if done.is_empty() {
            println!("nothing safe to repair");
        }
        for line in &done {
            println!("repaired {line}");
        }
        reports = reconcile::report(&db, &redis, &keys, &sale).await?;
        println!();
        print!("{}", reconcile::render(&sale, &reports));
    }
    if reports.iter().any(|r| !r.drifts.is_empty()) {
        std::process::exit(2);
    }
    Ok(())
}

async fn serve(config: Config, db: DatabaseArgs) -> anyhow::Result<()> {
    // Settings first: a missing or weak secret stops the service before it touches anything.
    config.validate().map_err(anyhow::Error::msg)?;
    let db = connect_db(&db).await?;
    migrator().run(&db).await.context("applying migrations")?;
    let state = AppState::connect(&config, db).await?;
    let listener = runtime::listen(&config.listen)
        .await
        .with_context(|| format!("binding {}", config.listen))?;
    tracing::info!(addr = %listener.local_addr()?, "booking API listening");
    let shutdown = runtime::shutdown_on_signal();
    let admin = runtime::listen(&config.admin_listen)
        .await
        .with_context(|| format!("binding {}", config.admin_listen))?;
    tracing::info!(addr = %admin.local_addr()?, "admin listener (ops API, console, metrics) listening");
    tokio::spawn(floodgate_booking::run_admin(
        admin,
        state.clone(),
        shutdown.clone(),
    ));
    floodgate_booking::run(listener, state, shutdown).await?;
    Ok(())
}

async fn connect_db(db: &DatabaseArgs) -> anyhow::Result<sqlx::PgPool> {
    db.connect().await.map_err(anyhow::Error::msg)
}

/// PostgreSQL, the key layout and Redis, as the admin commands need them.
async fn connect_stores(
    stores: &StoreArgs,
) -> anyhow::Result<(sqlx::PgPool, Keys, floodgate_contract::runtime::RedisConn)> {
    let db = connect_db(&stores.db).await?;
    let keys = stores.redis.keys().map_err(anyhow::Error::msg)?;
    let redis = runtime::connect_redis(&stores.redis)
        .await
        .context("connecting to Redis")?;
    Ok((db, keys, redis))
}

async fn arm_sale(
    db: &sqlx::PgPool,
    redis: &floodgate_contract::runtime::RedisConn,
    keys: &Keys,
    sale: &str,
) -> anyhow::Result<()> {
    let report = catalog::arm_sale(db, redis, keys, sale).await?;
    for (pool, capacity) in &report.pools {
        println!("armed pool {pool}: {capacity} seats");
    }
    println!("sale {} armed; opens at {}", report.sale, report.opens_at);
    Ok(())
}
