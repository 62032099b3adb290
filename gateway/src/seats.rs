//! `GET /v1/sales/{sale}/seats.json`: rough live seat counts per pool, for display only, made
//! to be cached. Most traffic before an opening is people looking; a CDN (deploy/nginx) serves
//! them from its cache and asks this origin about once a second whatever the crowd.
//!
//! Each sale's snapshot is rebuilt at most once per [`MAX_AGE`], by one request at a time (the
//! others wait for it and share it), and kept precompressed (gzip, brotli) with a strong ETag per
//! representation, so a revalidation is a 304 with no body.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use bytes::Bytes;
use dashmap::DashMap;
use floodgate_contract::ids::check_sale_id;
use floodgate_contract::keys::Keys;
use floodgate_contract::state::{redis_time_ms, PoolCounts, SaleMeta};
use redis::aio::ConnectionManager;
use serde::Serialize;

use crate::assets::{respond, Asset};
use crate::error::ApiError;
use crate::{unknown_sale, AppState};

/// How old a snapshot may be before the next request rebuilds it.
pub const MAX_AGE: Duration = Duration::from_secs(1);
/// What caches are told: fresh for a second, and servable stale for five more while one request
/// refreshes it (so no viewer ever waits on the origin).
const CACHE_CONTROL: &str = "public, max-age=1, stale-while-revalidate=5";

/// `seats.json`: the body of a snapshot (docs/protocol.md 1.8).
#[derive(Serialize)]
struct SeatCounts {
    sale: String,
    at_ms: i64,
    opens_at_ms: i64,
    sold_out: bool,
    pools: Vec<PoolSeats>,
}

/// One pool's counts as `seats.json` shows them (`null` where the pool's state is missing).
#[derive(Serialize)]
struct PoolSeats {
    pool: String,
    capacity: Option<i64>,
    available: Option<i64>,
    held: Option<i64>,
    sold: Option<i64>,
}

/// One snapshot, in the three encodings a client may accept.
pub struct Snapshot {
    made: Instant,
    body: Asset,
}

/// The snapshots of every sale asked about, each behind its own lock (single flight).
#[derive(Default)]
pub struct SeatBoard {
    sales: DashMap<String, Arc<tokio::sync::Mutex<Option<Arc<Snapshot>>>>>,
}

impl SeatBoard {
    async fn get(
        &self,
        redis: &ConnectionManager,
        keys: &Keys,
        sale: &str,
    ) -> Result<Arc<Snapshot>, ApiError> {
        let slot = self.sales.entry(sale.to_owned()).or_default().clone();
        let mut current = slot.lock().await;
        if let Some(snapshot) = current.as_ref().filter(|s| s.made.elapsed() < MAX_AGE) {
            return Ok(snapshot.clone());
        }
        match build(redis, keys, sale).await? {
            Some(snapshot) => {
                let snapshot = Arc::new(snapshot);
                *current = Some(snapshot.clone());
                Ok(snapshot)
            }
            None => {
                // Unknown sales take no room: the map holds only sales that exist.
                drop(current);
                self.sales.remove(sale);
                Err(unknown_sale())
            }
        }
    }
}

async fn build(
    redis: &ConnectionManager,
    keys: &Keys,
    sale: &str,
) -> Result<Option<Snapshot>, ApiError> {
    let mut conn = redis.clone();
    let mut pipe = redis::pipe();
    SaleMeta::query(&mut pipe, &keys.sale(sale));
    let (meta, time): (Vec<Option<String>>, (i64, i64)) =
        pipe.cmd("TIME").query_async(&mut conn).await?;
    let Some(meta) = SaleMeta::from_fields(&meta) else {
        return Ok(None);
    };
    let mut pipe = redis::pipe();
    for pool in &meta.pools {
        PoolCounts::query(&mut pipe, &keys.pool(sale, pool));
    }
    let replies: Vec<redis::Value> = pipe.query_async(&mut conn).await?;
    let pools = meta
        .pools
        .iter()
        .zip(PoolCounts::all_from_replies(&replies))
        .map(|(pool, counts)| PoolSeats {
            pool: pool.clone(),
            capacity: counts.capacity,
            available: counts.available,
            held: counts.held,
            sold: counts.sold,
        })
        .collect();
    let body = serde_json::to_vec(&SeatCounts {
        sale: sale.to_owned(),
        at_ms: redis_time_ms(time),
        opens_at_ms: meta.opens_at_ms,
        sold_out: meta.sold_out,
        pools,
    })
    .expect("JSON serialises");
    Ok(Some(Snapshot {
        made: Instant::now(),
        body: Asset::new("application/json", body),
    }))
}

pub(crate) fn gzip(body: &[u8]) -> Bytes {
    use std::io::Write as _;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(body).expect("writing to memory");
    Bytes::from(encoder.finish().expect("writing to memory"))
}

pub(crate) fn brotli(body: &[u8]) -> Bytes {
    let mut out = Vec::new();
    let params = brotli::enc::BrotliEncoderParams {
        quality: 5,
        ..Default::default()
    };
    brotli::BrotliCompress(&mut &body[..], &mut out, &params).expect("writing to memory");
    Bytes::from(out)
}

/// The encodings this endpoint can answer with, best first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    Brotli,
    Gzip,
    Identity,
}

/// Picks brotli, then gzip, from an `Accept-Encoding` header (a coding with `q=0` is refused).
pub fn negotiate(accept: Option<&str>) -> Encoding {
    let accepted = |name: &str| {
        accept.unwrap_or_default().split(',').any(|item| {
            let mut parts = item.split(';').map(str::trim);
            parts.next() == Some(name)
                && !parts.any(|p| {
                    p.strip_prefix("q=")
                        .and_then(|q| q.parse::<f32>().ok())
                        .is_some_and(|q| q <= 0.0)
                })
        })
    };
    if accepted("br") {
        Encoding::Brotli
    } else if accepted("gzip") {
        Encoding::Gzip
    } else {
        Encoding::Identity
    }
}

/// The handler.
pub async fn seats(
    State(state): State<AppState>,
    Path(sale): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let sale = sale.strip_suffix(".json").unwrap_or(&sale).to_owned();
    check_sale_id(&sale).map_err(|_| unknown_sale())?;
    metrics::counter!("floodgate_seat_snapshot_requests_total").increment(1);
    let snapshot = state.seats.get(&state.redis, &state.keys, &sale).await?;
    Ok(respond(&snapshot.body, &headers, CACHE_CONTROL))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn brotli_is_preferred_then_gzip_and_q0_refuses() {
        assert_eq!(negotiate(Some("gzip, deflate, br")), Encoding::Brotli);
        assert_eq!(negotiate(Some("gzip")), Encoding::Gzip);
        assert_eq!(negotiate(Some("br;q=0, gzip;q=0.8")), Encoding::Gzip);
        assert_eq!(negotiate(Some("identity")), Encoding::Identity);
        assert_eq!(negotiate(None), Encoding::Identity);
        assert_eq!(negotiate(Some("gzipx")), Encoding::Identity);
    }

    #[test]
    fn compressed_bodies_decompress_to_the_json() {
        use std::io::Read as _;
        let body = br#"{"sale":"s","pools":[]}"#;
        let mut plain = Vec::new();
        flate2::read::GzDecoder::new(&gzip(body)[..])
            .read_to_end(&mut plain)
            .unwrap();
        assert_eq!(plain, body);
        let mut plain = Vec::new();
        brotli::BrotliDecompress(&mut &brotli(body)[..], &mut plain).unwrap();
        assert_eq!(plain, body);
    }
}
