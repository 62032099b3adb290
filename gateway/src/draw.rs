//! The lottery's public record: `GET /v1/sales/{sale}/draw`, its nonces, its batches of joins
//! and one ticket's proof. Everything a verifier needs to recompute every pre-queue place
//! (docs/protocol.md, "Checking the draw"); the bodies are `floodgate_protocol::api::room`'s.

use floodgate_platform::http::SaleId;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::response::Response;
use floodgate_protocol::api::code;
use floodgate_protocol::api::room::{
    BatchPage, BatchRef, DrawProof, DrawRecord, NoncePage, PrequeueBatch,
};
use floodgate_protocol::lottery::{self, draw_seed};
use serde::Deserialize;

use crate::error::ApiError;
use crate::scripts::draw::{self as record, JoinBatch};
use crate::AppState;
use asked::{part, Asked, Part};
use floodgate_platform::clients::ClientAddress;

mod asked;

/// Most nonces in one page.
const MAX_NONCES: u64 = 10_000;
/// Most batches in one page of `GET .../draw/batches`.
const MAX_BATCHES: u64 = 1_000;
/// The highest ticket number a page may name: list indexes are signed 64-bit in Redis.
const MAX_TICKET: u64 = i64::MAX as u64;

fn damaged() -> ApiError {
    ApiError::new(code::DRAW_UNAVAILABLE, "the draw record is damaged".into())
}

/// `GET /v1/sales/{sale}/draw`: the commitment while the pre-queue is open; once it has closed,
/// the revealed secret seed, the pre-queue's size and digest, and the draw seed.
#[utoipa::path(get, path = "/v1/sales/{sale}/draw", tag = "draw", params(floodgate_platform::openapi::SalePath),
    responses(
        (status = 200, description = "The commitment while the pre-queue is open; once closed, the revealed seed and everything to recompute the draw (then cached for a year).", body = DrawRecord),
        crate::openapi::DrawRefusals,
    ))]
pub async fn draw(
    State(state): State<AppState>,
    ClientAddress(client): ClientAddress,
    SaleId(sale): SaleId,
) -> Result<Response, ApiError> {
    // Through the guard like every part of the record: each ask of a sale not drawn (a made-up
    // id among them) reads Redis.
    let asked = Asked {
        state: &state,
        client,
        key: format!("draw {sale}"),
    };
    asked.answer(|| read_draw(&state, sale)).await
}

/// The draw's record as Redis holds it, and whether it is final.
async fn read_draw(state: &AppState, sale: String) -> Result<Part, ApiError> {
    let keys = state.keys.sale(&sale);
    let (meta, issued) = record::meta_and_issued(&mut state.redis.clone(), &keys).await?;
    let meta = meta.ok_or_else(ApiError::unknown_sale)?;
    let closed = (
        meta.prequeue_size,
        meta.prequeue_digest,
        meta.lottery_secret,
    );
    let (Some(size), Some(digest), Some(secret)) = closed else {
        let open = DrawRecord::PreQueue {
            sale,
            opens_at_ms: meta.opens_at_ms,
            commitment: meta.lottery_commitment,
            prequeue_size_so_far: issued,
        };
        return part(&open, false);
    };
    let secret_bytes: [u8; 32] = hex::decode(&secret)
        .ok()
        .and_then(|b| b.try_into().ok())
        .ok_or_else(damaged)?;
    let drawn = DrawRecord::Drawn {
        nonces_url: format!("/v1/sales/{sale}/draw/nonces?from=1&count={MAX_NONCES}"),
        sale,
        opens_at_ms: meta.opens_at_ms,
        closed_at_ms: meta.prequeue_closed_at_ms,
        algorithm: "floodgate-lottery-v1".into(),
        commitment: meta.lottery_commitment,
        draw_seed: hex::encode(draw_seed(&secret_bytes, &digest)),
        secret_seed: secret,
        prequeue_size: size,
        prequeue_digest: digest,
    };
    part(&drawn, true)
}

/// A page of a list: `from` (1-based) and `count`.
#[derive(Deserialize)]
pub struct Page {
    from: Option<u64>,
    count: Option<u64>,
}

impl Page {
    /// `from` and `count` within `1..=MAX_TICKET` and `1..=most`, with `from + count - 1` a
    /// valid index too, so no crafted page can overflow or wrap to the list's end.
    fn check(page: Result<Query<Page>, QueryRejection>, most: u64) -> Option<(u64, u64)> {
        let Query(Page { from, count }) = page.ok()?;
        let (from, count) = (from.unwrap_or(1), count.unwrap_or(most));
        let valid = (1..=most).contains(&count)
            && (1..=MAX_TICKET).contains(&from)
            && from
                .checked_add(count - 1)
                .is_some_and(|last| last <= MAX_TICKET);
        valid.then_some((from, count))
    }
}

/// `GET /v1/sales/{sale}/draw/nonces?from=1&count=10000`: the draw nonces of pre-queue tickets
/// `from..from+count`, in ticket order (the input of the pre-queue's hash chain).
#[utoipa::path(get, path = "/v1/sales/{sale}/draw/nonces", tag = "draw",
    params(
        floodgate_platform::openapi::SalePath,
        ("from" = Option<u64>, Query, minimum = 1, description = "The first ticket (default 1)."),
        ("count" = Option<u64>, Query, minimum = 1, maximum = 10000, description = "How many (default and most: 10,000)."),
    ),
    responses((status = 200, description = "The draw nonces of consecutive tickets.", body = NoncePage), crate::openapi::PageRefusals))]
pub async fn nonces(
    State(state): State<AppState>,
    ClientAddress(client): ClientAddress,
    SaleId(sale): SaleId,
    page: Result<Query<Page>, QueryRejection>,
) -> Result<Response, ApiError> {
    let (from, count) = Page::check(page, MAX_NONCES).ok_or_else(|| {
        ApiError::new(
            code::BAD_PAGE,
            format!("from is a ticket number from 1 to {MAX_TICKET}; count is 1 to {MAX_NONCES}"),
        )
    })?;
    let asked = Asked {
        state: &state,
        client,
        key: format!("nonces {sale} {from} {count}"),
    };
    asked
        .answer(|| async {
            let keys = state.keys.sale(&sale);
            let last = from + count - 1;
            let read = record::nonces(&mut state.redis.clone(), &keys, from, last).await?;
            if !read.status.armed {
                return Err(ApiError::unknown_sale());
            }
            // Once the pre-queue has closed no nonce is ever added or changed: any page is final.
            let page = NoncePage {
                sale: sale.clone(),
                from,
                nonces: read.found,
            };
            part(&page, read.status.closed)
        })
        .await
}

/// `GET /v1/sales/{sale}/draw/batches?from=1&count=1000`: the pre-queue's batches of joins in
/// ticket order (`from` counts batches from 1), each with its first ticket, size, Merkle root,
/// the chain after it, and its nonces: everything a verifier recomputes the digest from.
#[utoipa::path(get, path = "/v1/sales/{sale}/draw/batches", tag = "draw",
    params(
        floodgate_platform::openapi::SalePath,
        ("from" = Option<u64>, Query, minimum = 1, description = "The first batch (default 1)."),
        ("count" = Option<u64>, Query, minimum = 1, maximum = 1000, description = "How many (default and most: 1,000)."),
    ),
    responses((status = 200, description = "The pre-queue's batches of joins, in ticket order.", body = BatchPage), crate::openapi::PageRefusals))]
pub async fn batches(
    State(state): State<AppState>,
    ClientAddress(client): ClientAddress,
    SaleId(sale): SaleId,
    page: Result<Query<Page>, QueryRejection>,
) -> Result<Response, ApiError> {
    let (from, count) = Page::check(page, MAX_BATCHES).ok_or_else(|| {
        ApiError::new(
            code::BAD_PAGE,
            format!("from is a batch number from 1; count is 1 to {MAX_BATCHES}"),
        )
    })?;
    let asked = Asked {
        state: &state,
        client,
        key: format!("batches {sale} {from} {count}"),
    };
    asked
        .answer(|| read_batches(&state, &sale, from, count))
        .await
}

/// A page of the pre-queue's batches, each with its nonces, read from Redis.
async fn read_batches(
    state: &AppState,
    sale: &str,
    from: u64,
    count: u64,
) -> Result<Part, ApiError> {
    let keys = state.keys.sale(sale);
    let mut conn = state.redis.clone();
    let read = record::batches(&mut conn, &keys, from, count).await?;
    if !read.status.armed {
        return Err(ApiError::unknown_sale());
    }
    let mut batches = read
        .found
        .into_iter()
        .collect::<Option<Vec<JoinBatch>>>()
        .ok_or_else(damaged)?;
    // A page carries at most MAX_NONCES nonces (but always its first batch whole).
    let mut nonces_in_page = 0;
    batches.retain(|b| {
        nonces_in_page += b.count;
        nonces_in_page == b.count || nonces_in_page <= MAX_NONCES
    });
    let nonces = match (batches.first(), batches.last()) {
        (Some(first), Some(last)) => {
            record::nonce_range(&mut conn, &keys, first.first, last.last()).await?
        }
        _ => Vec::new(),
    };
    let base = batches.first().map_or(0, |b| b.first);
    let listed = batches
        .into_iter()
        .map(|b| {
            let start = (b.first - base) as usize;
            let own = nonces.get(start..start + b.count as usize);
            PrequeueBatch {
                nonces: own.unwrap_or_default().to_vec(),
                first: b.first,
                count: b.count,
                root: b.root,
                chain: b.chain,
            }
        })
        .collect();
    let page = BatchPage {
        sale: sale.to_owned(),
        from,
        batches: listed,
    };
    part(&page, read.status.closed)
}

#[derive(Deserialize)]
pub struct ProofQuery {
    ticket: u64,
}

/// `GET /v1/sales/{sale}/draw/proof?ticket=N`: what ticket N needs to check, on its own, that
/// the draw counted its nonce: the nonce, its batch (first ticket, size, root), its RFC 6962
/// audit path in the batch's tree, and the chain before and after the batch.
#[utoipa::path(get, path = "/v1/sales/{sale}/draw/proof", tag = "draw",
    params(floodgate_platform::openapi::SalePath, ("ticket" = u64, Query, minimum = 1, description = "The ticket to prove.")),
    responses((status = 200, description = "What the ticket needs to check, on its own, that the draw counted its nonce.", body = DrawProof), crate::openapi::ProofRefusals))]
pub async fn proof(
    State(state): State<AppState>,
    ClientAddress(client): ClientAddress,
    SaleId(sale): SaleId,
    query: Result<Query<ProofQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(ProofQuery { ticket }) = query
        .ok()
        .filter(|q| (1..=MAX_TICKET).contains(&q.ticket))
        .ok_or_else(|| {
            ApiError::new(code::BAD_TICKET, "ticket is a ticket number from 1".into())
        })?;
    let asked = Asked {
        state: &state,
        client,
        key: format!("proof {sale} {ticket}"),
    };
    asked.answer(|| read_proof(&state, &sale, ticket)).await
}

/// Ticket `ticket`'s proof, read from Redis.
async fn read_proof(state: &AppState, sale: &str, ticket: u64) -> Result<Part, ApiError> {
    let keys = state.keys.sale(sale);
    let mut conn = state.redis.clone();
    let read = record::batch_of(&mut conn, &keys, ticket).await?;
    if !read.status.armed {
        return Err(ApiError::unknown_sale());
    }
    let not_drawn = || {
        ApiError::new(
            code::NOT_IN_PREQUEUE,
            format!("ticket {ticket} did not join the pre-queue, so the draw did not place it"),
        )
    };
    let mut around = read.found.into_iter();
    let batch = around.next().ok_or_else(not_drawn)?.ok_or_else(damaged)?;
    if ticket > batch.last() {
        return Err(not_drawn());
    }
    let chain_before = match around.next() {
        Some(previous) => previous.ok_or_else(damaged)?.chain,
        None => String::new(),
    };
    let nonces = record::nonce_range(&mut conn, &keys, batch.first, batch.last()).await?;
    if nonces.len() as u64 != batch.count {
        return Err(damaged());
    }
    let leaves: Vec<[u8; 32]> = nonces.iter().map(|n| lottery::leaf_hash(n)).collect();
    let index = (ticket - batch.first) as usize;
    let path = lottery::inclusion_path(&leaves, index)
        .iter()
        .map(hex::encode)
        .collect();
    let proof = DrawProof {
        sale: sale.to_owned(),
        ticket,
        nonce: nonces[index].clone(),
        index,
        batch: BatchRef {
            first: batch.first,
            count: batch.count,
            root: batch.root,
        },
        path,
        chain_before,
        chain_after: batch.chain,
    };
    part(&proof, read.status.closed)
}
