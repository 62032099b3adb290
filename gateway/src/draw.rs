//! The lottery's public record: `GET /v1/sales/{sale}/draw` and its nonce list. Everything a
//! verifier needs to recompute every pre-queue place (docs/protocol.md, "Checking the draw").

use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::Json;
use floodgate_contract::ids::check_sale_id;
use floodgate_contract::lottery::{self, draw_seed};
use floodgate_contract::state::{SaleMeta, SaleStatus};
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
    let mut pipe = redis::pipe();
    SaleMeta::query(&mut pipe, &keys);
    let (meta, issued): (Vec<Option<String>>, Option<u64>) =
        pipe.get(keys.seq()).query_async(&mut conn).await?;
    let meta = SaleMeta::from_fields(&meta).ok_or_else(unknown_sale)?;
    let (opens_at_ms, commitment) = (meta.opens_at_ms, meta.lottery_commitment.clone());
    let closed = (
        meta.prequeue_size,
        meta.prequeue_digest,
        meta.lottery_secret,
    );
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
            "closed_at_ms": meta.prequeue_closed_at_ms,
            "algorithm": "floodgate-lottery-v1",
            "commitment": commitment,
            "secret_seed": secret,
            "prequeue_size": size,
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
    let mut pipe = redis::pipe();
    SaleStatus::query(&mut pipe, &keys);
    let (armed, closed, nonces): (bool, bool, Vec<String>) = pipe
        .lrange(keys.prequeue(), first as isize, last as isize)
        .query_async(&mut conn)
        .await?;
    let SaleStatus { armed, closed } = SaleStatus::from_replies((armed, closed));
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

/// Most batches in one page of `GET .../draw/batches`.
const MAX_BATCHES: u64 = 1_000;

#[derive(Deserialize)]
pub struct BatchPage {
    #[serde(default = "first")]
    from: u64,
    #[serde(default = "batch_page")]
    count: u64,
}

fn batch_page() -> u64 {
    MAX_BATCHES
}

/// One recorded batch of pre-queue joins: `<first>:<count>:<root>:<chain after it>`.
#[derive(Debug, PartialEq, Eq)]
struct Batch {
    first: u64,
    count: u64,
    root: String,
    chain: String,
}

impl Batch {
    fn parse(member: &str) -> Option<Self> {
        let mut parts = member.splitn(4, ':');
        let first = parts.next()?.parse().ok()?;
        let count = parts.next()?.parse().ok()?;
        let root = parts.next()?.to_owned();
        let chain = parts.next()?.to_owned();
        (count > 0).then_some(Batch {
            first,
            count,
            root,
            chain,
        })
    }

    fn last(&self) -> u64 {
        self.first + self.count - 1
    }
}

fn damaged() -> ApiError {
    ApiError::Unavailable("draw_unavailable", "the draw record is damaged".into())
}

/// `GET /v1/sales/{sale}/draw/batches?from=1&count=1000`: the pre-queue's batches of joins in
/// ticket order (`from` counts batches from 1), each with its first ticket, size, Merkle root,
/// the chain after it, and its nonces: everything a verifier recomputes the digest from.
pub async fn batches(
    State(state): State<AppState>,
    Path(sale): Path<String>,
    page: Result<Query<BatchPage>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    check_sale_id(&sale).map_err(|_| unknown_sale())?;
    let bad_page = || {
        ApiError::BadRequest(
            "bad_page",
            format!("from is a batch number from 1; count is 1 to {MAX_BATCHES}"),
        )
    };
    let Query(BatchPage { from, count }) = page.map_err(|_| bad_page())?;
    if !(1..=MAX_BATCHES).contains(&count) || !(1..=MAX_TICKET).contains(&from) {
        return Err(bad_page());
    }
    let keys = state.keys.sale(&sale);
    let mut conn = state.redis.clone();
    let mut pipe = redis::pipe();
    SaleStatus::query(&mut pipe, &keys);
    let (armed, closed, members): (bool, bool, Vec<String>) = pipe
        .zrange(
            keys.prequeue_batches(),
            (from - 1) as isize,
            (from - 1 + count - 1) as isize,
        )
        .query_async(&mut conn)
        .await?;
    if !armed {
        return Err(unknown_sale());
    }
    let mut batches = members
        .iter()
        .map(|m| Batch::parse(m).ok_or_else(damaged))
        .collect::<Result<Vec<_>, _>>()?;
    // A page carries at most MAX_NONCES nonces (but always its first batch whole).
    let mut nonces_in_page = 0;
    batches.retain(|b| {
        nonces_in_page += b.count;
        nonces_in_page == b.count || nonces_in_page <= MAX_NONCES
    });
    let nonces: Vec<String> = match (batches.first(), batches.last()) {
        (Some(first), Some(last)) => {
            redis::cmd("LRANGE")
                .arg(keys.prequeue())
                .arg(first.first - 1)
                .arg(last.last() - 1)
                .query_async(&mut conn)
                .await?
        }
        _ => Vec::new(),
    };
    let base = batches.first().map_or(0, |b| b.first);
    let listed: Vec<Value> = batches
        .iter()
        .map(|b| {
            let start = (b.first - base) as usize;
            let own = nonces
                .get(start..start + b.count as usize)
                .unwrap_or_default();
            json!({
                "first": b.first, "count": b.count, "root": b.root, "chain": b.chain,
                "nonces": own,
            })
        })
        .collect();
    let cache_control = if closed { FINAL_CACHE } else { OPEN_CACHE };
    Ok(cached(
        json!({ "sale": sale, "from": from, "batches": listed }),
        cache_control,
    ))
}

#[derive(Deserialize)]
pub struct ProofQuery {
    ticket: u64,
}

/// `GET /v1/sales/{sale}/draw/proof?ticket=N`: what ticket N needs to check, on its own, that
/// the draw counted its nonce: the nonce, its batch (first ticket, size, root), its RFC 6962
/// audit path in the batch's tree, and the chain before and after the batch.
pub async fn proof(
    State(state): State<AppState>,
    Path(sale): Path<String>,
    query: Result<Query<ProofQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    check_sale_id(&sale).map_err(|_| unknown_sale())?;
    let Query(ProofQuery { ticket }) = query
        .ok()
        .filter(|q| (1..=MAX_TICKET).contains(&q.ticket))
        .ok_or_else(|| {
            ApiError::BadRequest("bad_ticket", "ticket is a ticket number from 1".into())
        })?;
    let keys = state.keys.sale(&sale);
    let mut conn = state.redis.clone();
    // The batch holding the ticket is the last one starting at or before it; the one before
    // that gives the chain the batch extended.
    let mut pipe = redis::pipe();
    SaleStatus::query(&mut pipe, &keys);
    let (armed, closed, around): (bool, bool, Vec<String>) = pipe
        .cmd("ZREVRANGEBYSCORE")
        .arg(keys.prequeue_batches())
        .arg(ticket)
        .arg("-inf")
        .arg("LIMIT")
        .arg(0)
        .arg(2)
        .query_async(&mut conn)
        .await?;
    if !armed {
        return Err(unknown_sale());
    }
    let not_drawn = || {
        ApiError::NotFound(
            "not_in_prequeue",
            format!("ticket {ticket} did not join the pre-queue, so the draw did not place it"),
        )
    };
    let batch = around.first().ok_or_else(not_drawn)?;
    let batch = Batch::parse(batch).ok_or_else(damaged)?;
    if ticket > batch.last() {
        return Err(not_drawn());
    }
    let chain_before = match around.get(1) {
        Some(previous) => Batch::parse(previous).ok_or_else(damaged)?.chain,
        None => String::new(),
    };
    let nonces: Vec<String> = redis::cmd("LRANGE")
        .arg(keys.prequeue())
        .arg(batch.first - 1)
        .arg(batch.last() - 1)
        .query_async(&mut conn)
        .await?;
    if nonces.len() as u64 != batch.count {
        return Err(damaged());
    }
    let leaves: Vec<[u8; 32]> = nonces.iter().map(|n| lottery::leaf_hash(n)).collect();
    let index = (ticket - batch.first) as usize;
    let path: Vec<String> = lottery::inclusion_path(&leaves, index)
        .iter()
        .map(hex::encode)
        .collect();
    let cache_control = if closed { FINAL_CACHE } else { OPEN_CACHE };
    Ok(cached(
        json!({
            "sale": sale,
            "ticket": ticket,
            "nonce": nonces[index],
            "index": index,
            "batch": { "first": batch.first, "count": batch.count, "root": batch.root },
            "path": path,
            "chain_before": chain_before,
            "chain_after": batch.chain,
        }),
        cache_control,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_records_parse() {
        assert_eq!(
            Batch::parse("3:2:ab:cd"),
            Some(Batch {
                first: 3,
                count: 2,
                root: "ab".into(),
                chain: "cd".into()
            })
        );
        assert_eq!(Batch::parse("3:2:ab:cd").unwrap().last(), 4);
        for bad in ["", "3:2:ab", "x:2:ab:cd", "3:0:ab:cd"] {
            assert_eq!(Batch::parse(bad), None, "{bad}");
        }
    }
}
