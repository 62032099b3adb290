//! The lottery's public record: `GET /v1/sales/{sale}/draw` and its nonce list. Everything a
//! verifier needs to recompute every pre-queue place (docs/protocol.md, "Checking the draw").

use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::Json;
use floodgate_contract::ids::check_sale_id;
use floodgate_contract::lottery::draw_seed;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::error::ApiError;
use crate::{unknown_sale, AppState};

/// While the pre-queue is open its record changes with every join: a second's caching lets a
/// CDN absorb a crowd of verifiers without anyone seeing an old commitment (it never changes).
const OPEN_CACHE: &str = "public, max-age=1";
/// Once drawn, nothing in the record can change again.
const FINAL_CACHE: &str = "public, max-age=31536000, immutable";

fn cached(body: Value, cache_control: &'static str) -> Response {
    let mut response = Json(body).into_response();
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static(cache_control),
    );
    response
}

/// `GET /v1/sales/{sale}/draw`: the commitment while the pre-queue is open; once it has closed,
/// the revealed secret seed, the pre-queue's size and digest, and the draw seed.
pub async fn draw(
    State(state): State<AppState>,
    Path(sale): Path<String>,
) -> Result<Response, ApiError> {
    check_sale_id(&sale).map_err(|_| unknown_sale())?;
    let keys = state.keys.sale(&sale);
    let mut conn = state.redis.clone();
    let (meta, issued): (Vec<Option<String>>, Option<u64>) = redis::pipe()
        .hget(
            keys.meta(),
            &[
                "opens_at_ms",
                "lottery_commitment",
                "prequeue_size",
                "prequeue_digest",
                "lottery_secret",
                "prequeue_closed_at_ms",
            ],
        )
        .get(keys.seq())
        .query_async(&mut conn)
        .await?;
    let get = |i: usize| meta.get(i).cloned().flatten();
    let opens_at_ms: i64 = get(0)
        .and_then(|v| v.parse().ok())
        .ok_or_else(unknown_sale)?;
    let commitment = get(1).unwrap_or_default();
    let closed = (get(2), get(3), get(4));
    let (Some(size), Some(digest), Some(secret)) = closed else {
        return Ok(cached(
            json!({
                "sale": sale,
                "status": "pre_queue",
                "opens_at_ms": opens_at_ms,
                "commitment": commitment,
                "prequeue_size_so_far": issued.unwrap_or(0),
            }),
            OPEN_CACHE,
        ));
    };
    let secret_bytes: [u8; 32] = hex::decode(&secret)
        .ok()
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| {
            ApiError::Unavailable("draw_unavailable", "the draw record is damaged".into())
        })?;
    Ok(cached(
        json!({
            "sale": sale,
            "status": "drawn",
            "opens_at_ms": opens_at_ms,
            "closed_at_ms": get(5).and_then(|v| v.parse::<i64>().ok()),
            "algorithm": "floodgate-lottery-v1",
            "commitment": commitment,
            "secret_seed": secret,
            "prequeue_size": size.parse::<u64>().unwrap_or(0),
            "prequeue_digest": digest,
            "draw_seed": hex::encode(draw_seed(&secret_bytes, &digest)),
            "nonces_url": format!("/v1/sales/{sale}/draw/nonces?from=1&count={MAX_NONCES}"),
        }),
        FINAL_CACHE,
    ))
}

/// Most nonces in one page.
const MAX_NONCES: u64 = 10_000;

#[derive(Deserialize)]
pub struct NoncePage {
    #[serde(default = "first")]
    from: u64,
    #[serde(default = "page")]
    count: u64,
}

fn first() -> u64 {
    1
}

fn page() -> u64 {
    MAX_NONCES
}

/// `GET /v1/sales/{sale}/draw/nonces?from=1&count=10000`: the draw nonces of pre-queue tickets
/// `from..from+count`, in ticket order (the input of the pre-queue's hash chain).
pub async fn nonces(
    State(state): State<AppState>,
    Path(sale): Path<String>,
    page: Result<Query<NoncePage>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    check_sale_id(&sale).map_err(|_| unknown_sale())?;
    let bad_page = || {
        ApiError::BadRequest(
            "bad_page",
            format!("from is a ticket number from 1 to {MAX_TICKET}; count is 1 to {MAX_NONCES}"),
        )
    };
    let Query(NoncePage { from, count }) = page.map_err(|_| bad_page())?;
    // The list is indexed from 0 by a signed 64-bit number: every index is checked to fit
    // before Redis sees it, so no crafted page can overflow or wrap to the list's end.
    if !(1..=MAX_NONCES).contains(&count) || !(1..=MAX_TICKET).contains(&from) {
        return Err(bad_page());
    }
    let first = from - 1;
    let last = first
        .checked_add(count - 1)
        .filter(|last| *last < MAX_TICKET)
        .ok_or_else(bad_page)?;
    let keys = state.keys.sale(&sale);
    let mut conn = state.redis.clone();
    let (armed, closed, nonces): (bool, bool, Vec<String>) = redis::pipe()
        .hexists(keys.meta(), "opens_at_ms")
        .hexists(keys.meta(), "prequeue_size")
        .lrange(keys.prequeue(), first as isize, last as isize)
        .query_async(&mut conn)
        .await?;
    if !armed {
        return Err(unknown_sale());
    }
    // Once the pre-queue has closed no nonce is ever added or changed: any page is final.
    let cache_control = if closed { FINAL_CACHE } else { OPEN_CACHE };
    Ok(cached(
        json!({ "sale": sale, "from": from, "nonces": nonces }),
        cache_control,
    ))
}

/// The highest ticket number a page may name: list indexes are signed 64-bit in Redis.
const MAX_TICKET: u64 = i64::MAX as u64;
