//! The sale catalog: sale files, their rows in PostgreSQL, and arming a sale into Redis.
//!
//! A sale file (TOML, see `deploy/sales/demo.toml`) declares trains, classes, pools and the sale's
//! settings. `create_sale` writes it to the catalog; `arm_sale` pre-loads each pool's counter
//! and publishes the sale's settings to the waiting room. Both are refused once the sale has
//! opened, because from then on Redis counters are live and re-loading them would sell seats twice.

use floodgate_contract::ids::{check_pool_id, check_sale_id};
use floodgate_contract::keys::Keys;
use floodgate_contract::settings;
use redis::aio::ConnectionManager;
use serde::Deserialize;
use sqlx::PgPool;
use time::macros::format_description;
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

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SaleFile {
    pub id: String,
    pub name: String,
    #[serde(with = "time::serde::rfc3339")]
    pub opens_at: OffsetDateTime,
    pub hold_ttl_secs: u32,
    pub token_ttl_secs: u32,
    pub max_seats_per_booking: u32,
    pub admission_rate: f64,
    pub active_cap: u32,
    /// Admitted users with an unspent token allowed per available seat (default 2.0): the
    /// controller never lets more in than `stock_factor x available`, so people are not
    /// admitted to a sold-out page.
    #[serde(default = "default_stock_factor")]
    pub stock_factor: f64,
    #[serde(default)]
    pub classes: Vec<ClassDef>,
    #[serde(default)]
    pub trains: Vec<TrainDef>,
    pub pools: Vec<PoolDef>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassDef {
    pub code: String,
    pub name: String,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainDef {
    pub id: String,
    pub name: String,
    pub origin: String,
    pub destination: String,
    pub departs: String,
    pub arrives: String,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolDef {
    pub id: String,
    pub train: String,
    /// Travel date, `YYYY-MM-DD`.
    pub date: String,
    pub class: String,
    #[serde(default = "general_quota")]
    pub quota: String,
    pub capacity: u32,
    /// Fare per seat in the currency's minor unit (paise for INR).
    pub fare_minor: i64,
    #[serde(default = "default_currency")]
    pub currency: String,
}

fn general_quota() -> String {
    "GN".into()
}

fn default_stock_factor() -> f64 {
    2.0
}

fn default_currency() -> String {
    "INR".into()
}

impl SaleFile {
    pub fn parse(text: &str) -> Result<Self, CatalogError> {
        let sale: SaleFile = toml::from_str(text)?;
        sale.validate()?;
        Ok(sale)
    }

    /// Everything the database constraints would refuse, said in the file's own terms.
    fn validate(&self) -> Result<(), CatalogError> {
        let invalid = |m: String| Err(CatalogError::Invalid(m));
        check_sale_id(&self.id).map_err(|e| CatalogError::Invalid(e.to_string()))?;
        if self.hold_ttl_secs == 0 {
            return invalid("hold_ttl_secs must be positive".into());
        }
        settings::check_token_ttl_secs(self.token_ttl_secs).map_err(CatalogError::Invalid)?;
        if !(1..=16).contains(&self.max_seats_per_booking) {
            return invalid("max_seats_per_booking must be between 1 and 16".into());
        }
        settings::check_admission_rate(self.admission_rate).map_err(CatalogError::Invalid)?;
        settings::check_active_cap(u64::from(self.active_cap)).map_err(CatalogError::Invalid)?;
        if !(self.stock_factor.is_finite() && self.stock_factor > 0.0) {
            return invalid("stock_factor must be a positive number".into());
        }
        if self.pools.is_empty() {
            return invalid("a sale needs at least one pool".into());
        }
        let mut seen = std::collections::HashSet::new();
        for pool in &self.pools {
            check_pool_id(&pool.id).map_err(|e| CatalogError::Invalid(e.to_string()))?;
            if !seen.insert(&pool.id) {
                return invalid(format!("pool {:?} is declared twice", pool.id));
            }
            if pool.capacity == 0 || pool.fare_minor < 0 {
                return invalid(format!(
                    "pool {:?} needs a positive capacity and a non-negative fare",
                    pool.id
                ));
            }
            parse_date(&pool.date)?;
        }
        Ok(())
    }
}

fn parse_date(text: &str) -> Result<time::Date, CatalogError> {
    time::Date::parse(text, format_description!("[year]-[month]-[day]"))
        .map_err(|_| CatalogError::Invalid(format!("date {text:?} is not YYYY-MM-DD")))
}

/// Writes a sale file to the catalog in one transaction: trains and classes are upserted, the
/// sale and its pools replaced. Refused once the sale has opened (by the database's clock).
pub async fn create_sale(db: &PgPool, sale: &SaleFile) -> Result<(), CatalogError> {
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
           max_seats_per_booking, admission_rate, active_cap, stock_factor)
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9)
         on conflict (id) do update set name = excluded.name, opens_at = excluded.opens_at,
           hold_ttl_secs = excluded.hold_ttl_secs, token_ttl_secs = excluded.token_ttl_secs,
           max_seats_per_booking = excluded.max_seats_per_booking,
           admission_rate = excluded.admission_rate, active_cap = excluded.active_cap,
           stock_factor = excluded.stock_factor, updated_at = now()",
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
    redis: &ConnectionManager,
    keys: &Keys,
    sale_id: &str,
) -> Result<ArmReport, CatalogError> {
    type SaleRow = (OffsetDateTime, i32, i32, i32, f64, i32, bool, f64);
    let row: Option<SaleRow> = sqlx::query_as(
        "select opens_at, hold_ttl_secs, token_ttl_secs, max_seats_per_booking, admission_rate,
           active_cap, paused, stock_factor from sales where id = $1",
    )
    .bind(sale_id)
    .fetch_optional(db)
    .await?;
    let (opens_at, hold_ttl, token_ttl, max_seats, rate, active_cap, paused, stock_factor) =
        row.ok_or_else(|| CatalogError::NotFound(sale_id.to_owned()))?;
    // Rows written before these bounds existed are refused here rather than handed to the
    // admission controller and the claim records, which rely on them.
    settings::check_admission_rate(rate).map_err(CatalogError::Invalid)?;
    settings::check_token_ttl_secs(u32::try_from(token_ttl).unwrap_or(0))
        .map_err(CatalogError::Invalid)?;
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
        rate,
        token_ttl_ms: i64::from(token_ttl) * 1000,
        max_seats: u32::try_from(max_seats).unwrap_or(0),
        active_cap: u32::try_from(active_cap).unwrap_or(0),
        pools: &pool_ids,
        paused,
        stock_factor,
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

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"
        id = "s1"
        name = "Test"
        opens_at = "2026-12-01T04:30:00Z"
        hold_ttl_secs = 300
        token_ttl_secs = 120
        max_seats_per_booking = 4
        admission_rate = 10.0
        active_cap = 100
        [[pools]]
        id = "p1"
        train = "12951"
        date = "2026-12-01"
        class = "3A"
        capacity = 10
        fare_minor = 100
    "#;

    #[test]
    fn the_shipped_sale_files_are_valid() {
        for text in [
            include_str!("../../deploy/sales/demo.toml"),
            include_str!("../../deploy/sales/bench.toml"),
        ] {
            let sale = SaleFile::parse(text).unwrap();
            assert!(!sale.pools.is_empty());
        }
    }

    #[test]
    fn a_minimal_sale_file_parses_with_defaults() {
        let sale = SaleFile::parse(MINIMAL).unwrap();
        assert_eq!(sale.pools[0].quota, "GN");
        assert_eq!(sale.pools[0].currency, "INR");
    }

    #[test]
    fn invalid_sale_files_say_what_is_wrong() {
        let cases = [
            (MINIMAL.replace("capacity = 10", "capacity = 0"), "capacity"),
            (MINIMAL.replace("\"2026-12-01\"", "\"1 Dec\""), "YYYY-MM-DD"),
            (MINIMAL.replace("id = \"p1\"", "id = \"p{1}\""), "pool id"),
            (
                MINIMAL.replace("admission_rate = 10.0", "admission_rate = 0.0"),
                "admission_rate",
            ),
            (
                MINIMAL.replace("max_seats_per_booking = 4", "max_seats_per_booking = 40"),
                "max_seats",
            ),
            // Defect 4: a rate the controller cannot pace by.
            (
                MINIMAL.replace("admission_rate = 10.0", "admission_rate = 1e-20"),
                "admission_rate",
            ),
            (
                MINIMAL.replace("admission_rate = 10.0", "admission_rate = 1e9"),
                "admission_rate",
            ),
            // Defect 9: a token that outlives what its claim can cover.
            (
                MINIMAL.replace("token_ttl_secs = 120", "token_ttl_secs = 86400"),
                "token_ttl_secs",
            ),
            (
                MINIMAL.replace("token_ttl_secs = 120", "token_ttl_secs = 0"),
                "token_ttl_secs",
            ),
        ];
        for (text, expected) in cases {
            let err = SaleFile::parse(&text).unwrap_err().to_string();
            assert!(err.contains(expected), "{err} should mention {expected}");
        }
        assert!(matches!(
            SaleFile::parse("id = 3"),
            Err(CatalogError::Parse(_))
        ));
    }
}
