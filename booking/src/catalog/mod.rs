//! The sale catalog: sale files, their rows in PostgreSQL, and arming a sale into Redis.
//!
//! A sale file (TOML, see `deploy/sales/demo.toml`) declares trains, classes, pools and the sale's
//! settings. `create_sale` writes it to the catalog; `arm_sale` pre-loads each pool's counter
//! and publishes the sale's settings to the waiting room. Both are refused once the sale has
//! opened, because from then on Redis counters are live and re-loading them would sell seats twice.

mod file;
pub mod served;

use file::{door_from, parse_date};
pub use file::{ClassDef, PoolDef, SaleFile, TrainDef};

use floodgate_platform::keys::Keys;
use floodgate_platform::runtime::RedisConn;
use floodgate_protocol::settings;
use sqlx::PgPool;
use time::OffsetDateTime;

use crate::gatekeeper::arming::{self, Armed, PoolArming, SaleArming};

#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("the sale file is not valid TOML for a sale: {0}")]
    Parse(#[from] toml::de::Error),
    #[error("the sale file is invalid: {0}")]
    Invalid(String),
    #[error("no sale {0:?} in the catalog")]
    NotFound(String),
    #[error("sale {sale:?} opened at {opens_at}; it can no longer be changed or armed")]
    AlreadyOpen {
        sale: String,
        opens_at: OffsetDateTime,
    },
    #[error("database: {0}")]
    Db(#[from] sqlx::Error),
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
}

/// Writes a sale file to the catalog in one transaction: trains and classes are upserted, the
/// sale and its pools replaced. Refused once the sale has opened (by the database's clock).
pub async fn create_sale(db: &PgPool, sale: &SaleFile) -> Result<(), CatalogError> {
    // A file is checked as it is read; a sale built in code is checked here, before anything
    // is written.
    sale.validate()?;
    let mut tx = db.begin().await?;
    let opened: Option<(OffsetDateTime, bool)> =
        sqlx::query_as("select opens_at, opens_at <= now() from sales where id = $1 for update")
            .bind(&sale.id)
            .fetch_optional(&mut *tx)
            .await?;
    if let Some((opens_at, true)) = opened {
        return Err(CatalogError::AlreadyOpen {
            sale: sale.id.clone(),
            opens_at,
        });
    }
    upsert_trains_and_classes(&mut tx, sale).await?;
    upsert_sale(&mut tx, sale).await?;
    replace_pools(&mut tx, sale).await?;
    tx.commit().await?;
    Ok(())
}

/// The trains and seat classes a sale file declares, added or updated (others' sales share them).
async fn upsert_trains_and_classes(
    tx: &mut sqlx::PgConnection,
    sale: &SaleFile,
) -> Result<(), CatalogError> {
    for class in &sale.classes {
        sqlx::query(
            "insert into seat_classes (code, name) values ($1, $2)
             on conflict (code) do update set name = excluded.name",
        )
        .bind(&class.code)
        .bind(&class.name)
        .execute(&mut *tx)
        .await?;
    }
    for train in &sale.trains {
        sqlx::query(
            "insert into trains (id, name, origin, destination, departs, arrives)
             values ($1, $2, $3, $4, $5, $6)
             on conflict (id) do update set name = excluded.name, origin = excluded.origin,
               destination = excluded.destination, departs = excluded.departs,
               arrives = excluded.arrives",
        )
        .bind(&train.id)
        .bind(&train.name)
        .bind(&train.origin)
        .bind(&train.destination)
        .bind(&train.departs)
        .bind(&train.arrives)
        .execute(&mut *tx)
        .await?;
    }
    Ok(())
}

/// The sale's own row, added or replaced.
async fn upsert_sale(tx: &mut sqlx::PgConnection, sale: &SaleFile) -> Result<(), CatalogError> {
    sqlx::query(
        "insert into sales (id, name, opens_at, hold_ttl_secs, token_ttl_secs,
           max_seats_per_booking, admission_rate, active_cap, stock_factor, identity,
           max_seats_per_buyer, challenge, pow_difficulty, grace_secs, stock_hold_secs)
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
         on conflict (id) do update set name = excluded.name, opens_at = excluded.opens_at,
           hold_ttl_secs = excluded.hold_ttl_secs, token_ttl_secs = excluded.token_ttl_secs,
           max_seats_per_booking = excluded.max_seats_per_booking,
           admission_rate = excluded.admission_rate, active_cap = excluded.active_cap,
           stock_factor = excluded.stock_factor, identity = excluded.identity,
           max_seats_per_buyer = excluded.max_seats_per_buyer, challenge = excluded.challenge,
           pow_difficulty = excluded.pow_difficulty, grace_secs = excluded.grace_secs,
           stock_hold_secs = excluded.stock_hold_secs, updated_at = now()",
    )
    .bind(&sale.id)
    .bind(&sale.name)
    .bind(sale.opens_at)
    .bind(sale.hold_ttl_secs as i32)
    .bind(sale.token_ttl_secs as i32)
    .bind(sale.max_seats_per_booking as i32)
    .bind(sale.admission_rate)
    .bind(sale.active_cap as i32)
    .bind(sale.stock_factor)
    .bind(&sale.identity)
    .bind(sale.max_seats_per_buyer.map(|s| s as i32))
    .bind(&sale.challenge)
    .bind(i32::from(sale.pow_difficulty))
    .bind(sale.grace_secs.map(|s| s as i32))
    .bind(sale.stock_hold_secs.map(|s| s as i32))
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// The sale's pools, replaced by the file's.
async fn replace_pools(tx: &mut sqlx::PgConnection, sale: &SaleFile) -> Result<(), CatalogError> {
    sqlx::query("delete from pools where sale_id = $1")
        .bind(&sale.id)
        .execute(&mut *tx)
        .await?;
    for pool in &sale.pools {
        sqlx::query(
            "insert into pools (sale_id, id, train_id, travel_date, class_code, quota, capacity,
               fare_minor, currency)
             values ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .bind(&sale.id)
        .bind(&pool.id)
        .bind(&pool.train)
        .bind(parse_date(&pool.date)?)
        .bind(&pool.class)
        .bind(&pool.quota)
        .bind(pool.capacity as i32)
        .bind(pool.fare_minor)
        .bind(&pool.currency)
        .execute(&mut *tx)
        .await
        .map_err(|e| match &e {
            sqlx::Error::Database(d) if d.is_foreign_key_violation() => CatalogError::Invalid(format!(
                "pool {:?} names a train or class that is not in the catalog (declare it under [[trains]] or [[classes]])",
                pool.id
            )),
            _ => CatalogError::Db(e),
        })?;
    }
    Ok(())
}

/// A sale's settings as the catalog keeps them.
#[derive(sqlx::FromRow)]
struct SaleRow {
    opens_at: OffsetDateTime,
    hold_ttl_secs: i32,
    token_ttl_secs: i32,
    max_seats_per_booking: i32,
    admission_rate: f64,
    active_cap: i32,
    paused: bool,
    stock_factor: f64,
    identity: String,
    challenge: String,
    pow_difficulty: i32,
    max_seats_per_buyer: Option<i32>,
    grace_secs: Option<i32>,
    stock_hold_secs: Option<i32>,
}

impl SaleRow {
    async fn read(db: &PgPool, sale: &str) -> Result<Option<Self>, sqlx::Error> {
        sqlx::query_as(
            "select opens_at, hold_ttl_secs, token_ttl_secs, max_seats_per_booking,
               admission_rate, active_cap, paused, stock_factor, identity, challenge,
               pow_difficulty, max_seats_per_buyer, grace_secs, stock_hold_secs
             from sales where id = $1",
        )
        .bind(sale)
        .fetch_optional(db)
        .await
    }
}

/// What arming did.
#[derive(Debug, PartialEq, Eq)]
pub struct ArmReport {
    pub sale: String,
    pub pools: Vec<(String, u32)>,
    pub opens_at: OffsetDateTime,
}

/// Loads each pool's counter and the sale's settings into Redis. Idempotent before the opening:
/// arming again resets the (untouched) counters to the catalog's capacities. Refused from the
/// opening on, by Redis' clock, which is also the clock admission starts by.
pub async fn arm_sale(
    db: &PgPool,
    redis: &RedisConn,
    keys: &Keys,
    sale_id: &str,
) -> Result<ArmReport, CatalogError> {
    let row = SaleRow::read(db, sale_id)
        .await?
        .ok_or_else(|| CatalogError::NotFound(sale_id.to_owned()))?;
    let (opens_at, hold_ttl, token_ttl) = (row.opens_at, row.hold_ttl_secs, row.token_ttl_secs);
    // Rows written before these bounds existed are refused here rather than handed to the
    // admission controller and the claim records, which rely on them.
    settings::check_admission_rate(row.admission_rate).map_err(CatalogError::Invalid)?;
    settings::check_token_ttl_secs(u32::try_from(token_ttl).unwrap_or(0))
        .map_err(CatalogError::Invalid)?;
    let door = door_from(
        &row.identity,
        &row.challenge,
        i64::from(row.pow_difficulty),
        row.max_seats_per_buyer.map(i64::from),
        row.grace_secs.map(i64::from),
    )?;
    let pools: Vec<(String, i32, i64, String)> = sqlx::query_as(
        "select id, capacity, fare_minor, currency from pools where sale_id = $1 order by id",
    )
    .bind(sale_id)
    .fetch_all(db)
    .await?;
    let opens_at_ms = (opens_at.unix_timestamp_nanos() / 1_000_000) as i64;
    let already_open = || CatalogError::AlreadyOpen {
        sale: sale_id.to_owned(),
        opens_at,
    };

    let mut conn = redis.clone();
    for (pool, capacity, fare_minor, currency) in &pools {
        let pool = PoolArming {
            sale: sale_id,
            pool,
            capacity: u32::try_from(*capacity).unwrap_or(0),
            hold_ttl_ms: i64::from(hold_ttl) * 1000,
            opens_at_ms,
            fare_minor: *fare_minor,
            currency,
        };
        if arming::arm_pool(&mut conn, keys, &pool).await? != Armed::Armed {
            return Err(already_open());
        }
    }
    let pool_ids: Vec<&str> = pools.iter().map(|(id, ..)| id.as_str()).collect();
    let sale = SaleArming {
        sale: sale_id,
        opens_at_ms,
        rate: row.admission_rate,
        token_ttl_ms: i64::from(token_ttl) * 1000,
        max_seats: u32::try_from(row.max_seats_per_booking).unwrap_or(0),
        active_cap: u32::try_from(row.active_cap).unwrap_or(0),
        pools: &pool_ids,
        paused: row.paused,
        stock_factor: row.stock_factor,
        // The pass's whole life unless the sale says shorter (never longer: checked on loading).
        stock_hold_ms: row.stock_hold_secs.map_or(i64::from(token_ttl), |s| {
            i64::from(s).min(i64::from(token_ttl))
        }) * 1000,
        door,
    };
    if arming::arm_sale(&mut conn, keys, &sale).await? != Armed::Armed {
        return Err(already_open());
    }
    sqlx::query("update sales set armed_at = now() where id = $1")
        .bind(sale_id)
        .execute(db)
        .await?;
    Ok(ArmReport {
        sale: sale_id.to_owned(),
        pools: pools
            .into_iter()
            .map(|(id, c, ..)| (id, c as u32))
            .collect(),
        opens_at,
    })
}
