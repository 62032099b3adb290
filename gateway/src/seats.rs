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
use dashmap::DashMap;
use floodgate_platform::clients::ClientAddress;
use floodgate_platform::keys::Keys;
use floodgate_platform::runtime::RedisConn;
use floodgate_platform::state::SaleCounts;
use floodgate_protocol::api::code;
use floodgate_protocol::api::room::{PoolSeats, SeatCounts};
use floodgate_protocol::ids::check_sale_id;

use crate::cache::{respond, Asset};
use crate::error::ApiError;
use crate::AppState;

/// How old a snapshot may be before the next request rebuilds it.
pub const MAX_AGE: Duration = Duration::from_secs(1);
/// What caches are told: fresh for a second, and servable stale for five more while one request
/// refreshes it (so no viewer ever waits on the origin).
const CACHE_CONTROL: &str = "public, max-age=1, stale-while-revalidate=5";

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
    /// The snapshot of `sale`, rebuilt if it is older than [`MAX_AGE`]. A sale with none kept
    /// yet (a made-up id among them) is first let through `unknown`, the asker's allowance of
    /// such lookups: each reads Redis, however many ask at once.
    async fn get(
        &self,
        redis: &RedisConn,
        keys: &Keys,
        sale: &str,
        unknown: impl FnOnce() -> Result<(), ApiError>,
    ) -> Result<Arc<Snapshot>, ApiError> {
        let slot = self.sales.entry(sale.to_owned()).or_default().clone();
        let mut current = slot.lock().await;
        if let Some(snapshot) = current.as_ref().filter(|s| s.made.elapsed() < MAX_AGE) {
            return Ok(snapshot.clone());
        }
        if current.is_none() {
            if let Err(refused) = unknown() {
                // Unknown sales take no room: the map holds only sales that exist.
                drop(current);
                self.sales.remove(sale);
                return Err(refused);
            }
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
                Err(ApiError::unknown_sale())
            }
        }
    }
}

async fn build(redis: &RedisConn, keys: &Keys, sale: &str) -> Result<Option<Snapshot>, ApiError> {
    let Some(counts) = SaleCounts::read(&mut redis.clone(), keys, sale).await? else {
        return Ok(None);
    };
    let pools = counts
        .pools
        .into_iter()
        .map(|(pool, counts)| PoolSeats {
            pool,
            capacity: counts.capacity,
            available: counts.available,
            held: counts.held,
            sold: counts.sold,
        })
        .collect();
    let body = serde_json::to_vec(&SeatCounts {
        sale: sale.to_owned(),
        at_ms: counts.at_ms,
        opens_at_ms: counts.meta.opens_at_ms,
        sold_out: counts.meta.sold_out,
        pools,
    })
    .expect("JSON serialises");
    Ok(Some(Snapshot {
        made: Instant::now(),
        body: Asset::new("application/json", body),
    }))
}

/// `GET /v1/sales/{sale}/seats`: rough live seat counts, for display.
#[utoipa::path(get, path = "/v1/sales/{sale}/seats", tag = "waiting room", params(floodgate_platform::openapi::SalePath),
    responses(
        (status = 200, description = "Counts at most a second old; compressed per Accept-Encoding, with an ETag.", body = SeatCounts),
        (status = 304, description = "Not modified since the ETag in If-None-Match."),
        crate::openapi::LookupRefusals,
    ))]
pub async fn seats(
    State(state): State<AppState>,
    ClientAddress(client): ClientAddress,
    Path(sale): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let sale = sale.strip_suffix(".json").unwrap_or(&sale).to_owned();
    check_sale_id(&sale).map_err(|_| ApiError::unknown_sale())?;
    metrics::counter!("floodgate_seat_snapshot_requests_total").increment(1);
    // A sale whose counts are not kept here yet (a made-up id, say) reads Redis to find out:
    // held to the address's allowance of such lookups.
    let unknown = || state.lookups.admit(client);
    let snapshot = state
        .seats
        .get(&state.redis, &state.keys, &sale, unknown)
        .await?;
    Ok(respond(&snapshot.body, &headers, CACHE_CONTROL))
}

/// `GET /v1/sales/{sale}/seats.json`: the same counts, under the name a CDN caches as a file.
#[utoipa::path(get, path = "/v1/sales/{sale}/seats.json", tag = "waiting room", params(floodgate_platform::openapi::SalePath),
    responses(
        (status = 200, description = "As `GET /v1/sales/{sale}/seats`.", body = SeatCounts),
        (status = 304, description = "Not modified since the ETag in If-None-Match."),
        crate::openapi::LookupRefusals,
    ))]
pub async fn seats_file(
    state: State<AppState>,
    client: ClientAddress,
    sale: Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    seats(state, client, sale, headers).await
}

/// Any other file under a sale: a JSON 404, like every unknown path.
pub async fn no_such_file() -> ApiError {
    ApiError::new(code::NOT_FOUND, "no such endpoint".into())
}
