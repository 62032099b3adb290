//! `floodgate-booking`: serve the booking API, apply migrations, create and arm sales.

use std::path::PathBuf;

use anyhow::Context as _;
use floodgate_booking::catalog::{self, SaleFile};
use floodgate_booking::Booking;
use floodgate_booking::{ending, rebuild, reconcile};
use floodgate_platform::keys::Keys;
use floodgate_platform::runtime::{self, DatabaseArgs, KafkaArgs};
use floodgate_platform::service;
use serde_json::json;

/// mimalloc, not glibc's malloc: a reservation makes a few hundred short-lived allocations
/// across the runtime's threads, and glibc's arenas (their locks, frees and consolidation) were
/// an eighth of the service's CPU (BENCHMARKS.md, "Profiles").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod audited;
mod bench;
mod cli;

use audited::Ended;
use cli::{AuditCommand, Cli, Command, SaleCommand, ScriptsCommand, StoreArgs, TopicsCommand};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // Secret settings may come from files (`<VAR>_FILE`), as container platforms mount them.
    let cli: Cli = floodgate_platform::secret_files::parse_with_secret_files();
    // Kept until main returns: its drop exports the last spans.
    let _exporting =
        runtime::start("floodgate-booking", cli.log_json).map_err(anyhow::Error::msg)?;
    match cli.command {
        Command::Serve(config) => service::main::<Booking>(*config).await,
        Command::SandboxPay { .. } => anyhow::bail!(
            "`floodgate-booking sandbox-pay` is now its own binary: run `floodgate-sandbox` \
             (the same FLOODGATE_SANDBOX_* settings; the image ships it)"
        ),
        Command::Migrate(db) => {
            db.connect_migrated().await.map_err(anyhow::Error::msg)?;
            println!("migrations applied");
            Ok(())
        }
        Command::Sale(command) => sale(*command).await,
        Command::Audit(AuditCommand::Verify { db, audit }) => {
            audited::verify(&connect_db(&db).await?, &audit).await
        }
        Command::Audit(AuditCommand::Rotate { db, audit }) => {
            audited::rotate(&connect_db(&db).await?, &audit).await
        }
        Command::Topics(TopicsCommand::Ensure {
            kafka,
            dlq_topic,
            probe_topic,
            settings,
        }) => ensure_topics(kafka, (dlq_topic, probe_topic), settings).await,
        Command::Scripts(ScriptsCommand::Bench { redis, sale, pool }) => {
            floodgate_protocol::ids::check_sale_id(&sale)?;
            floodgate_protocol::ids::check_pool_id(&pool)?;
            let keys = redis.keys().map_err(anyhow::Error::msg)?;
            let redis = runtime::connect_redis(&redis)
                .await
                .context("connecting to Redis")?;
            let calls = bench::load_bench_calls(redis, keys, &sale, &pool)
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
    use floodgate_booking::topics::{ensure_and_report, probe_topic as probe};
    let dlq = kafka.dead_letter_topic(dlq_topic.as_deref());
    let probe = probe(&kafka, probe_topic.as_deref());
    if !ensure_and_report(&kafka, (&dlq, &probe), &settings).await? {
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
            let work = arm_sale(&db, &redis, &keys, &sale);
            audited::run(&db, &stores.audit, (&sale, "arm"), json!({}), work).await?;
            Ok(())
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
        SaleCommand::End { sale, stores } => end_sale(sale, stores).await,
        SaleCommand::Purge { sale, stores } => purge_sale(sale, stores).await,
    }
}

/// `sale end`: new claims stop at once; exits 2 while a pool still has something in flight.
async fn end_sale(sale: String, stores: StoreArgs) -> anyhow::Result<()> {
    let (db, keys, redis) = connect_stores(&stores).await?;
    let work = async {
        Ok(match ending::end(&db, &redis, &keys, &sale).await? {
            ending::Ending::Ended => Ended::done(vec!["ended".into()]),
            // New claims are refused from now on: a change, still waiting to finish.
            ending::Ending::Waiting(waiting) => Ended {
                phase: floodgate_booking::audit::Phase::Done,
                said: waiting,
            },
        })
    };
    let ended = audited::run(&db, &stores.audit, (&sale, "end"), json!({}), work).await?;
    if ended.said == ["ended"] {
        println!("sale {sale} ended: nothing more is sold");
        return Ok(());
    }
    println!("sale {sale} is ending: new reservations are refused; waiting for");
    ended.said.iter().for_each(|line| println!("  {line}"));
    println!("run `sale end {sale}` again once they are done");
    std::process::exit(2);
}

/// `sale purge`: an ended sale's Redis state deleted; exits 2 saying why not.
async fn purge_sale(sale: String, stores: StoreArgs) -> anyhow::Result<()> {
    let (db, keys, redis) = connect_stores(&stores).await?;
    let work = async {
        Ok(match ending::purge(&db, &redis, &keys, &sale).await? {
            ending::Purge::Purged { keys } => Ended::done(vec![format!("{keys} keys deleted")]),
            ending::Purge::Refused(problems) => Ended::refused(problems),
        })
    };
    let ended = audited::run(&db, &stores.audit, (&sale, "purge"), json!({}), work).await?;
    if ended.phase == floodgate_booking::audit::Phase::Done {
        let deleted = ended.said.join("");
        println!("sale {sale} purged from Redis ({deleted}); PostgreSQL keeps everything");
        return Ok(());
    }
    println!("sale {sale} not purged; nothing was deleted:");
    ended.said.iter().for_each(|line| println!("  {line}"));
    std::process::exit(2);
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
        floodgate_protocol::ids::check_sale_id(&id)?;
        sale.id = id;
    }
    if let Some(secs) = opens_in_secs {
        sale.opens_at = time::OffsetDateTime::now_utc() + time::Duration::seconds(secs as i64);
    }
    let db = connect_db(&stores.db).await?;
    let asked = json!({ "file": file.display().to_string(), "pools": sale.pools.len() });
    let work = async {
        catalog::create_sale(&db, &sale).await?;
        Ok(Ended::done(vec![format!(
            "sale {} written to the catalog ({} pools, opens at {})",
            sale.id,
            sale.pools.len(),
            sale.opens_at
        )]))
    };
    let ended = audited::run(&db, &stores.audit, (&sale.id, "create"), asked, work).await?;
    ended.said.iter().for_each(|line| println!("{line}"));
    if arm {
        let (db, keys, redis) = connect_stores(&stores).await?;
        let work = arm_sale(&db, &redis, &keys, &sale.id);
        audited::run(&db, &stores.audit, (&sale.id, "arm"), json!({}), work).await?;
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
    let work = async {
        let done = rebuild::rebuild(&db, &redis, &keys, &tail, &sale, &pool).await?;
        Ok(Ended::done(vec![format!(
            "pool {pool} rebuilt: available {}, held {}, sold {} ({} reservation records restored)",
            done.available, done.held, done.sold, done.records
        )]))
    };
    let asked = json!({ "pool": pool });
    let ended = audited::run(&db, &stores.audit, (&sale, "rebuild"), asked, work).await?;
    ended.said.iter().for_each(|line| println!("{line}"));
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
        let work = async {
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
            Ok(Ended::done(done))
        };
        let asked = json!({ "drifts": reports.iter().map(|r| r.drifts.len()).sum::<usize>() });
        let done = audited::run(&db, &stores.audit, (&sale, "repair"), asked, work)
            .await?
            .said;
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

async fn connect_db(db: &DatabaseArgs) -> anyhow::Result<sqlx::PgPool> {
    db.connect().await.map_err(anyhow::Error::msg)
}

/// PostgreSQL, the key layout and Redis, as the admin commands need them.
async fn connect_stores(
    stores: &StoreArgs,
) -> anyhow::Result<(sqlx::PgPool, Keys, floodgate_platform::runtime::RedisConn)> {
    let db = connect_db(&stores.db).await?;
    let keys = stores.redis.keys().map_err(anyhow::Error::msg)?;
    let redis = runtime::connect_redis(&stores.redis)
        .await
        .context("connecting to Redis")?;
    Ok((db, keys, redis))
}

async fn arm_sale(
    db: &sqlx::PgPool,
    redis: &floodgate_platform::runtime::RedisConn,
    keys: &Keys,
    sale: &str,
) -> anyhow::Result<Ended> {
    let report = catalog::arm_sale(db, redis, keys, sale).await?;
    let mut said: Vec<String> = report
        .pools
        .iter()
        .map(|(pool, capacity)| format!("armed pool {pool}: {capacity} seats"))
        .collect();
    said.push(format!(
        "sale {} armed; opens at {}",
        report.sale, report.opens_at
    ));
    said.iter().for_each(|line| println!("{line}"));
    Ok(Ended::done(said))
}
