//! `floodgate-loadgen naive`: the approach the design notes warn about, measured on the same
//! PostgreSQL: one counter row per pool, and a booking as (a) `SELECT ... FOR UPDATE`, decrement,
//! insert, commit, or (b) read the counter, then write back what was read minus one (the
//! read-then-write race of a hand-rolled script). The report gives attempts per second and how
//! many seats were sold beyond the capacity. Runs in a schema of its own, dropped at the end.

use std::path::PathBuf;
use std::time::Instant;

use futures::StreamExt;
use serde_json::json;

use crate::report::Table;

#[derive(Clone, Debug, clap::Args)]
pub struct NaiveArgs {
    /// PostgreSQL to run in (a scratch schema is created and dropped).
    #[arg(long, env = "FLOODGATE_DATABASE_URL")]
    pub database_url: String,
    /// `for-update` or `race`.
    #[arg(long, default_value = "for-update")]
    pub mode: String,
    /// Seats in the one pool.
    #[arg(long, default_value_t = 1_000)]
    pub capacity: i64,
    /// Booking attempts.
    #[arg(long, default_value_t = 20_000)]
    pub attempts: u64,
    /// Attempts in flight at once (each on a connection of its own).
    #[arg(long, default_value_t = 50)]
    pub concurrency: u32,
    #[arg(long)]
    pub json: Option<PathBuf>,
}

pub async fn run(args: NaiveArgs) -> anyhow::Result<bool> {
    let race = match args.mode.as_str() {
        "for-update" => false,
        "race" => true,
        other => anyhow::bail!("--mode is for-update or race, not {other}"),
    };
    let schema = format!("naive_{}", std::process::id());
    let db = scratch(&args, &schema).await?;
    let started = Instant::now();
    let outcomes: Vec<anyhow::Result<bool>> = futures::stream::iter(0..args.attempts)
        .map(|_| book(db.clone(), race))
        .buffer_unordered(args.concurrency.max(1) as usize)
        .collect()
        .await;
    let seconds = started.elapsed().as_secs_f64();
    let booked: i64 = sqlx::query_scalar("select count(*) from booking")
        .fetch_one(&db)
        .await?;
    let errors = outcomes.iter().filter(|o| o.is_err()).count();
    sqlx::query(&format!("drop schema {schema} cascade"))
        .execute(&db)
        .await?;
    let oversold = (booked - args.capacity).max(0);
    let report = json!({
        "scenario": "naive",
        "mode": args.mode,
        "capacity": args.capacity,
        "attempts": args.attempts,
        "concurrency": args.concurrency,
        "seconds": seconds,
        "attempts_per_second": args.attempts as f64 / seconds.max(1e-9),
        "booked": booked,
        "oversold": oversold,
        "errors": errors,
    });
    let mut table = Table::new(&["figure", "value"]);
    table.row(&["mode".into(), args.mode.clone()]);
    table.row(&[
        "attempts per second".into(),
        format!(
            "{:.0}",
            report["attempts_per_second"].as_f64().unwrap_or(0.0)
        ),
    ]);
    table.row(&[
        "booked / capacity".into(),
        format!("{booked} / {}", args.capacity),
    ]);
    table.row(&["oversold".into(), oversold.to_string()]);
    println!("{table}");
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_vec_pretty(&report)?)?;
    }
    Ok(errors == 0)
}

/// A pool of `capacity` seats in a scratch schema of its own; connections use it.
async fn scratch(args: &NaiveArgs, schema: &str) -> anyhow::Result<sqlx::PgPool> {
    let db = sqlx::postgres::PgPoolOptions::new()
        .max_connections(args.concurrency.max(1))
        .after_connect({
            let schema = schema.to_owned();
            move |conn, _| {
                let schema = schema.clone();
                Box::pin(async move {
                    sqlx::query(&format!("set search_path = {schema}"))
                        .execute(conn)
                        .await?;
                    Ok(())
                })
            }
        })
        .connect(&args.database_url)
        .await?;
    sqlx::query(&format!("create schema {schema}"))
        .execute(&db)
        .await?;
    sqlx::query("create table pool (id int primary key, available bigint not null)")
        .execute(&db)
        .await?;
    sqlx::query("create table booking (id bigserial primary key, pool int not null, at timestamptz not null default now())")
        .execute(&db)
        .await?;
    sqlx::query("insert into pool values (1, $1)")
        .bind(args.capacity)
        .execute(&db)
        .await?;
    Ok(db)
}

/// One booking attempt: whether it booked a seat.
async fn book(db: sqlx::PgPool, race: bool) -> anyhow::Result<bool> {
    let mut tx = db.begin().await?;
    let lock = if race { "" } else { " for update" };
    let available: i64 =
        sqlx::query_scalar(&format!("select available from pool where id = 1{lock}"))
            .fetch_one(&mut *tx)
            .await?;
    if available <= 0 {
        tx.rollback().await?;
        return Ok(false);
    }
    if race {
        // What was read, minus one: the lost update of a read-then-write.
        sqlx::query("update pool set available = $1 where id = 1")
            .bind(available - 1)
            .execute(&mut *tx)
            .await?;
    } else {
        sqlx::query("update pool set available = available - 1 where id = 1")
            .execute(&mut *tx)
            .await?;
    }
    sqlx::query("insert into booking (pool) values (1)")
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(true)
}
