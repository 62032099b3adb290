//! `GET /data/sales/{file}`: the catalog documents the page reads (`<sale>.json`: a sale's
//! trains, classes, pools and fares; `index.json`: the sales a visitor picks from), made from
//! PostgreSQL exactly as `sale publish` writes them (`crate::publish_static`), for the edge to
//! cache. Behind the shipped edge nothing needs publishing: it routes `/data/sales/` here, so a
//! sale armed in a cluster (whose gateways' static folders are read-only and hold the page
//! only) shows its trains and fares at once, and a change to the sale shows within a minute.
//! `sale publish` remains for a CDN that serves files from a bucket.
//!
//! A crowd reaches this only through the edge's cache: about a request a minute per edge and
//! document. Whatever a stranger asks directly costs bounded work and memory, and nobody ever
//! waits on PostgreSQL behind somebody else: no lock is held across a read. A name that is no
//! live sale's (armed, not ended) is refused from memory (the live sales' ids, read again at
//! most every [`KNOWN_FRESH`], and only when a name is not among them); each document is read
//! at most once per [`FRESH`] by each instance, one read at a time per document, in the
//! background while its last copy is served; only the live sales' documents are kept. A read
//! that fails or takes over [`READ_TIMEOUT`] counts as made all the same (the next is a
//! period later): with PostgreSQL away the last copy is served on, and a document never made
//! is refused at once with 503 `catalog_unavailable`.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
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
/// How long the live sales' ids are trusted for a name not among them.
pub const KNOWN_FRESH: Duration = Duration::from_secs(5);
/// How long they are trusted for a name among them (a sale that ended leaves within this).
pub const KNOWN_LONGEST: Duration = Duration::from_secs(60);
/// The longest a read of PostgreSQL is waited for.
pub const READ_TIMEOUT: Duration = Duration::from_secs(2);
/// As the gateways' static folder serves catalog files (docs/protocol.md, 1.9).
const CACHE_CONTROL: &str = "public, max-age=60, stale-while-revalidate=600";
/// The sales list's own name in the folder (no sale may be called `index`).
const INDEX: &str = "index";

/// The documents this instance has made, and the live sales' ids.
#[derive(Default)]
pub struct Shelf {
    inner: Mutex<Inner>,
    /// Reads of PostgreSQL so far (what a stranger's names may cost, counted for the tests).
    reads: AtomicU64,
}

#[derive(Default)]
struct Inner {
    /// The live sales' ids, and when they were last asked for (whatever the answer).
    known: Option<(Instant, HashSet<String>)>,
    /// A read of the ids under way.
    knowing: bool,
    documents: HashMap<String, Shelved>,
}

#[derive(Default)]
struct Shelved {
    /// When it was last asked for (whatever the answer).
    asked: Option<Instant>,
    /// A read under way.
    reading: bool,
    last: Option<Arc<Asset>>,
}

/// What a request does about a document, decided under the lock, done outside it.
enum Next {
    Serve(Arc<Asset>),
    /// Serve this copy, and make the next in the background.
    ServeAndRefresh(Arc<Asset>),
    /// No copy: make one and wait for it.
    Make,
    Unavailable,
}

impl Shelf {
    /// The document named `name` (`index`, or a sale's id), made or kept.
    pub async fn document(
        self: &Arc<Self>,
        db: &PgPool,
        name: &str,
    ) -> Result<Arc<Asset>, ApiError> {
        if name != INDEX {
            floodgate_protocol::ids::check_sale_id(name).map_err(|_| ApiError::unknown_sale())?;
            if !self.is_live(db, name).await {
                return Err(ApiError::unknown_sale());
            }
        }
        let next = {
            let mut inner = self.inner.lock().expect("the shelf's lock");
            let now = Instant::now();
            let shelved = inner.documents.entry(name.to_owned()).or_default();
            let due = shelved
                .asked
                .is_none_or(|at| now.duration_since(at) >= FRESH);
            let start = due && !shelved.reading;
            if start {
                shelved.reading = true;
                shelved.asked = Some(now);
            }
            match (shelved.last.clone(), start) {
                (Some(last), true) => Next::ServeAndRefresh(last),
                (Some(last), false) => Next::Serve(last),
                (None, true) => Next::Make,
                (None, false) => Next::Unavailable,
            }
        };
        match next {
            Next::Serve(last) => Ok(last),
            Next::ServeAndRefresh(last) => {
                let (shelf, db, name) = (self.clone(), db.clone(), name.to_owned());
                tokio::spawn(async move { shelf.make(&db, &name).await });
                Ok(last)
            }
            Next::Make => self.make(db, name).await.ok_or_else(unavailable),
            Next::Unavailable => Err(unavailable()),
        }
    }

    /// Reads `name`'s document from PostgreSQL and shelves it; `None` if the read failed or
    /// took too long (the last copy, if any, stays).
    async fn make(&self, db: &PgPool, name: &str) -> Option<Arc<Asset>> {
        let read = async {
            let value = match name {
                INDEX => sales_index(db).await?,
                sale => catalog(db, sale).await?,
            };
            anyhow::Ok(serde_json::to_vec(&value)?)
        };
        let made = match self.read_in_time(name, read).await {
            // Compressing a large catalog takes a few milliseconds: off the runtime's threads.
            Some(body) => {
                tokio::task::spawn_blocking(move || Arc::new(Asset::new("application/json", body)))
                    .await
                    .ok()
            }
            None => None,
        };
        let mut inner = self.inner.lock().expect("the shelf's lock");
        // Shelved only while the name is still live (its entry was not dropped meanwhile).
        if let Some(shelved) = inner.documents.get_mut(name) {
            shelved.reading = false;
            if let Some(asset) = &made {
                shelved.last = Some(asset.clone());
            }
        }
        made
    }

    /// Whether `sale` is live (armed, not ended), from the ids kept, read again if it is not
    /// among them and they are older than [`KNOWN_FRESH`] (if it is, older than
    /// [`KNOWN_LONGEST`]).
    async fn is_live(&self, db: &PgPool, sale: &str) -> bool {
        {
            let mut inner = self.inner.lock().expect("the shelf's lock");
            let (listed, age) = inner.known.as_ref().map_or((false, None), |(at, ids)| {
                (ids.contains(sale), Some(at.elapsed()))
            });
            let trusted_for = if listed { KNOWN_LONGEST } else { KNOWN_FRESH };
            let due = age.is_none_or(|age| age >= trusted_for);
            if !due || inner.knowing {
                return listed;
            }
            inner.knowing = true;
        };
        let ids = self.read_in_time("the live sales", live_sales(db)).await;
        let mut inner = self.inner.lock().expect("the shelf's lock");
        inner.knowing = false;
        let now = Instant::now();
        match ids {
            Some(ids) => {
                // A sale no longer live is no longer kept.
                inner
                    .documents
                    .retain(|kept, _| kept == INDEX || ids.contains(kept));
                let live = ids.contains(sale);
                inner.known = Some((now, ids));
                live
            }
            // Asked all the same: the next read is a period later, whoever asks; the ids known
            // stand meanwhile.
            None => {
                let ids = inner.known.take().map(|(_, ids)| ids).unwrap_or_default();
                let live = ids.contains(sale);
                inner.known = Some((now, ids));
                live
            }
        }
    }

    /// One read of PostgreSQL, counted, for at most [`READ_TIMEOUT`]: its answer, or `None`
    /// (said in the log) if it failed or took too long.
    async fn read_in_time<T>(
        &self,
        what: &str,
        read: impl std::future::Future<Output = anyhow::Result<T>>,
    ) -> Option<T> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        match tokio::time::timeout(READ_TIMEOUT, read).await {
            Ok(Ok(value)) => Some(value),
            Ok(Err(e)) => {
                tracing::warn!(error = %e, read = what, "catalog: PostgreSQL did not answer");
                None
            }
            Err(_) => {
                tracing::warn!(read = what, "catalog: PostgreSQL did not answer in time");
                None
            }
        }
    }

    /// How many documents are kept.
    pub fn kept(&self) -> usize {
        let inner = self.inner.lock().expect("the shelf's lock");
        inner
            .documents
            .values()
            .filter(|d| d.last.is_some())
            .count()
    }

    /// How many times PostgreSQL was read.
    pub fn reads(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }
}

/// The ids of the live sales (armed, not ended): the only ones with a catalog to show.
async fn live_sales(db: &PgPool) -> anyhow::Result<HashSet<String>> {
    let ids: Vec<(String,)> =
        sqlx::query_as("select id from sales where armed_at is not null and ended_at is null")
            .fetch_all(db)
            .await?;
    Ok(ids.into_iter().map(|(id,)| id).collect())
}

fn unavailable() -> ApiError {
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
