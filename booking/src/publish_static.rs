//! The static catalog JSON a CDN serves: a sale's trains, classes, pools and fares, written as
//! files (with gzip and brotli siblings) for the gateways' static folder or any origin bucket
//! (`floodgate-booking sale publish <sale> --out <folder>`). Browsing trains then never touches
//! a service: only the live seat counts come from a gateway (`seats.json`).

use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use sqlx::PgPool;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// The catalog of `sale` as the browser client reads it.
pub async fn catalog(db: &PgPool, sale: &str) -> anyhow::Result<Value> {
    type SaleRow = (String, OffsetDateTime, i32, i32);
    let (name, opens_at, max_seats, hold_ttl): SaleRow = sqlx::query_as(
        "select name, opens_at, max_seats_per_booking, hold_ttl_secs from sales where id = $1",
    )
    .bind(sale)
    .fetch_optional(db)
    .await?
    .ok_or_else(|| anyhow::anyhow!("the catalog has no sale {sale}"))?;
    type PoolRow = (String, String, time::Date, String, String, i32, i64, String);
    let pools: Vec<PoolRow> = sqlx::query_as(
        "select id, train_id, travel_date, class_code, quota, capacity, fare_minor, currency
         from pools where sale_id = $1 order by train_id, travel_date, class_code, id",
    )
    .bind(sale)
    .fetch_all(db)
    .await?;
    let trains: Vec<(String, String, String, String, String, String)> = sqlx::query_as(
        "select t.id, t.name, t.origin, t.destination, t.departs, t.arrives from trains t
         where t.id in (select train_id from pools where sale_id = $1) order by t.id",
    )
    .bind(sale)
    .fetch_all(db)
    .await?;
    let classes: Vec<(String, String)> = sqlx::query_as(
        "select c.code, c.name from seat_classes c
         where c.code in (select class_code from pools where sale_id = $1) order by c.code",
    )
    .bind(sale)
    .fetch_all(db)
    .await?;
    Ok(json!({
        "sale": sale,
        "name": name,
        "opens_at": opens_at.format(&Rfc3339)?,
        "opens_at_ms": (opens_at.unix_timestamp_nanos() / 1_000_000) as i64,
        "max_seats_per_booking": max_seats,
        "hold_ttl_secs": hold_ttl,
        "trains": trains.into_iter().map(|(id, name, origin, destination, departs, arrives)| json!({
            "id": id, "name": name, "origin": origin, "destination": destination,
            "departs": departs, "arrives": arrives,
        })).collect::<Vec<_>>(),
        "classes": classes.into_iter().map(|(code, name)| json!({"code": code, "name": name}))
            .collect::<Vec<_>>(),
        "pools": pools.into_iter().map(|(id, train, date, class, quota, capacity, fare, currency)| json!({
            "id": id, "train": train, "date": date.to_string(), "class": class, "quota": quota,
            "capacity": capacity, "fare_minor": fare, "currency": currency,
        })).collect::<Vec<_>>(),
        "seats_url": format!("/v1/sales/{sale}/seats.json"),
    }))
}

/// The list of sales a visitor can pick from: every armed sale that opens later or opened within
/// the last day, soonest first.
pub async fn sales_index(db: &PgPool) -> anyhow::Result<Value> {
    let sales: Vec<(String, String, OffsetDateTime)> = sqlx::query_as(
        "select id, name, opens_at from sales
         where armed_at is not null and opens_at > now() - interval '1 day'
         order by opens_at, id limit 100",
    )
    .fetch_all(db)
    .await?;
    let mut listed = Vec::with_capacity(sales.len());
    for (id, name, opens_at) in sales {
        listed.push(json!({
            "sale": id,
            "name": name,
            "opens_at": opens_at.format(&Rfc3339)?,
            "opens_at_ms": (opens_at.unix_timestamp_nanos() / 1_000_000) as i64,
            "catalog_url": format!("/data/sales/{id}.json"),
        }));
    }
    Ok(json!({ "sales": listed }))
}

/// Writes `<out>/data/sales/<sale>.json` and refreshes `<out>/data/sales/index.json`, each with
/// `.gz` and `.br` siblings (every file written to a temporary name and renamed, so a reader
/// never sees half a file). Returns the sale's JSON path.
pub async fn publish(db: &PgPool, sale: &str, out: &Path) -> anyhow::Result<PathBuf> {
    // The index shares the folder; a sale of that name would be overwritten by it.
    anyhow::ensure!(
        sale != "index",
        "a sale called \"index\" cannot be published"
    );
    let body = serde_json::to_vec_pretty(&catalog(db, sale).await?)?;
    let dir = out.join("data").join("sales");
    // The folder named, so that a read-only or missing one says where (a container's root is
    // read-only: the catalog goes to a volume or a CDN's origin).
    std::fs::create_dir_all(&dir)
        .map_err(|e| anyhow::anyhow!("writing the catalog to {}: {e}", dir.display()))?;
    let path = dir.join(format!("{sale}.json"));
    write_compressed(&path, &body)?;
    let index = serde_json::to_vec_pretty(&sales_index(db).await?)?;
    write_compressed(&dir.join("index.json"), &index)?;
    Ok(path)
}

/// `path` and its gzip and brotli siblings, as a precompressing static server expects them.
fn write_compressed(path: &Path, body: &[u8]) -> anyhow::Result<()> {
    write_atomically(path, body)?;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(body)?;
    write_atomically(&path.with_extension("json.gz"), &gz.finish()?)?;
    let mut br = Vec::new();
    let params = brotli::enc::BrotliEncoderParams {
        quality: 11,
        ..Default::default()
    };
    brotli::BrotliCompress(&mut &body[..], &mut br, &params)?;
    write_atomically(&path.with_extension("json.br"), &br)?;
    Ok(())
}

fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(".partial");
    let temporary = PathBuf::from(temporary);
    std::fs::write(&temporary, bytes)?;
    std::fs::rename(&temporary, path)
}
