//! `GET /data/sales/{file}`: the catalog documents the page reads (`<sale>.json`: a sale's
//! trains, classes, pools and fares; `index.json`: the sales a visitor picks from), made from
//! PostgreSQL exactly as `sale publish` writes them (`crate::publish_static`), for the edge to
//! cache. Behind the shipped edge nothing needs publishing: it routes `/data/sales/` here, so a
//! sale armed in a cluster (whose gateways' static folders are read-only and hold the page
//! only) shows its trains and fares at once, and a change to the sale shows within a minute.
//! `sale publish` remains for a CDN that serves files from a bucket.
//!
//! A crowd reaches this only through the edge's cache: about a request a minute per edge and
//! document. Whatever a stranger asks directly costs bounded work and memory: a name that is no
//! armed sale's is refused from memory (the armed sales' ids, read again at most every
//! [`KNOWN_FRESH`], and only when a name is not among them), each document is read from
//! PostgreSQL at most once per [`FRESH`] by each instance, and only the armed sales' documents
//! are kept. With PostgreSQL away, the last copy is served on.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use floodgate_platform::cache::{respond, Asset};
use floodgate_protocol::api::code;
use sqlx::PgPool;
use tokio::time::Instant;

use crate::error::ApiError;
use crate::publish_static::{catalog, sales_index};
use crate::AppState;

/// How long a document is served before PostgreSQL is asked again.
pub const FRESH: Duration = Duration::from_secs(10);
/// How long the armed sales' ids are trusted for a name not among them.
pub const KNOWN_FRESH: Duration = Duration::from_secs(5);
/// As the gateways' static folder serves catalog files (docs/protocol.md, 1.9).
const CACHE_CONTROL: &str = "public, max-age=60, stale-while-revalidate=600";
/// The sales list's own name in the folder (no sale may be called `index`).
const INDEX: &str = "index";

/// The documents this instance has made, and the armed sales' ids. One lock: a read of
/// PostgreSQL happens while it is held, so a burst of misses costs one read.
#[derive(Default)]
pub struct Shelf {
    inner: tokio::sync::Mutex<Inner>,
    /// Reads of PostgreSQL so far (what a stranger's names may cost, counted for the tests).
    reads: std::sync::atomic::AtomicU64,
}

#[derive(Default)]
struct Inner {
    known: Option<(Instant, HashSet<String>)>,
    documents: HashMap<String, (Instant, Arc<Asset>)>,
}

impl Shelf {
    /// The document named `name` (`index`, or a sale's id), made or kept.
    pub async fn document(&self, db: &PgPool, name: &str) -> Result<Arc<Asset>, ApiError> {
        let now = Instant::now();
        let mut inner = self.inner.lock().await;
        if name != INDEX {
            floodgate_protocol::ids::check_sale_id(name).map_err(|_| ApiError::unknown_sale())?;
            let listed = |inner: &Inner| {
                inner
                    .known
                    .as_ref()
                    .is_some_and(|(_, ids)| ids.contains(name))
            };
            if !listed(&inner) {
                let due = inner
                    .known
                    .as_ref()
                    .is_none_or(|(at, _)| now.duration_since(*at) >= KNOWN_FRESH);
                if due {
                    self.read();
                    let ids = armed_sales(db).await.map_err(unavailable)?;
                    // A sale no longer armed (deleted from the catalog) is no longer kept.
                    inner
                        .documents
                        .retain(|kept, _| kept == INDEX || ids.contains(kept));
                    inner.known = Some((now, ids));
                }
                if !listed(&inner) {
                    return Err(ApiError::unknown_sale());
                }
            }
        }
        if let Some((made, asset)) = inner.documents.get(name) {
            if now.duration_since(*made) < FRESH {
                return Ok(asset.clone());
            }
        }
        self.read();
        let made = match name {
            INDEX => sales_index(db).await,
            sale => catalog(db, sale).await,
        };
        match made.and_then(|value| Ok(serde_json::to_vec(&value)?)) {
            Ok(body) => {
                let asset = Arc::new(Asset::new("application/json", body));
                inner
                    .documents
                    .insert(name.to_owned(), (now, asset.clone()));
                Ok(asset)
            }
            Err(e) => match inner.documents.get(name) {
                Some((_, last)) => {
                    tracing::warn!(error = %e, document = name, "catalog: serving the last copy");
                    Ok(last.clone())
                }
                None => Err(unavailable(e)),
            },
        }
    }

    /// How many documents are kept.
    pub async fn kept(&self) -> usize {
        self.inner.lock().await.documents.len()
    }

    /// How many times PostgreSQL was read.
    pub fn reads(&self) -> u64 {
        self.reads.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn read(&self) {
        self.reads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// The ids of the armed sales: the only ones with a catalog to show.
async fn armed_sales(db: &PgPool) -> anyhow::Result<HashSet<String>> {
    let ids: Vec<(String,)> = sqlx::query_as("select id from sales where armed_at is not null")
        .fetch_all(db)
        .await?;
    Ok(ids.into_iter().map(|(id,)| id).collect())
}

fn unavailable(e: impl std::fmt::Display) -> ApiError {
    tracing::warn!(error = %e, "catalog: PostgreSQL did not answer");
    ApiError::new(
        code::CATALOG_UNAVAILABLE,
        "the catalog cannot be read just now; try again in a few seconds".into(),
    )
}

/// `GET /data/sales/{file}`: a sale's catalog, or the list of sales.
#[utoipa::path(
    get,
    path = "/data/sales/{file}",
    tag = "catalog",
    params(("file" = String, Path, description = "`<sale id>.json` for a sale's catalog, `index.json` for the list of sales")),
    responses(
        (status = 200, description = "The document (docs/protocol.md 1.9), brotli or gzip by `Accept-Encoding`, with a strong `ETag` and `Cache-Control: public, max-age=60, stale-while-revalidate=600`.", content_type = "application/json"),
        (status = 304, description = "`If-None-Match` named the current ETag."),
        crate::openapi::CatalogRefusals,
    ),
)]
#[tracing::instrument(skip_all)]
pub async fn catalog_document(
    State(state): State<AppState>,
    Path(file): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let name = file
        .strip_suffix(".json")
        .ok_or_else(|| ApiError::new(code::NOT_FOUND, "no such document".into()))?;
    let asset = state.shelf.document(&state.db, name).await?;
    Ok(respond(&asset, &headers, CACHE_CONTROL))
}
