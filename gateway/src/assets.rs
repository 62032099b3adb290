//! The browser client's scripts and styles under content-hashed names (`/assets/app.<hash>.js`),
//! cacheable forever (`immutable`): a new release has new names, so no browser or CDN ever
//! serves a stale script. The page itself (`/`, `/index.html`) names them and is revalidated on
//! every load. Everything is read, hashed and compressed once, at start.

use std::collections::HashMap;
use std::path::Path;

use axum::extract::{Path as UrlPath, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use sha2::{Digest, Sha256};

use crate::error::ApiError;
use crate::seats::{brotli, gzip, negotiate, Encoding};
use crate::AppState;

/// One body in the three encodings a client may accept, with a strong ETag per encoding
/// (shared by the seat counts, `seats.rs`).
pub(crate) struct Asset {
    content_type: &'static str,
    identity: Bytes,
    gzip: Bytes,
    br: Bytes,
    digest: String,
}

impl Asset {
    pub(crate) fn new(content_type: &'static str, body: Vec<u8>) -> Self {
        Self {
            content_type,
            digest: hex::encode(&Sha256::digest(&body)[..8]),
            gzip: gzip(&body),
            br: brotli(&body),
            identity: Bytes::from(body),
        }
    }
}

/// The page and its hashed assets.
#[derive(Default)]
pub struct Assets {
    index: Option<Asset>,
    by_name: HashMap<String, Asset>,
}

const IMMUTABLE: &str = "public, max-age=31536000, immutable";

impl Assets {
    /// Loads `dir`'s top-level `.js` and `.css` files and its `index.html`, rewriting the page's
    /// references (`src="app.js"`, `href="style.css"`) to the hashed names, and writing the
    /// origins it may send a payer to for checkout into its `floodgate-checkout-origins` meta.
    pub fn load(dir: &Path, checkout_origins: &[String]) -> std::io::Result<Self> {
        let origins = checkout_origins
            .iter()
            .map(|o| check_origin(o))
            .collect::<Result<Vec<_>, _>>()?
            .join(" ");
        let mut assets = Assets::default();
        let mut renames = Vec::new();
        for entry in std::fs::read_dir(dir)? {
            let path = entry?.path();
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default()
                .to_owned();
            let content_type = match path.extension().and_then(|e| e.to_str()) {
                Some("js") => "text/javascript; charset=utf-8",
                Some("css") => "text/css; charset=utf-8",
                _ => continue,
            };
            let asset = Asset::new(content_type, std::fs::read(&path)?);
            let (stem, extension) = name.rsplit_once('.').unwrap_or((&name, ""));
            let hashed = format!("{stem}.{}.{extension}", asset.digest);
            renames.push((name.clone(), hashed.clone()));
            assets.by_name.insert(hashed, asset);
        }
        let index = dir.join("index.html");
        if index.exists() {
            let mut page = std::fs::read_to_string(index)?;
            for (name, hashed) in &renames {
                for attribute in ["src", "href"] {
                    page = page.replace(
                        &format!("{attribute}=\"{name}\""),
                        &format!("{attribute}=\"/assets/{hashed}\""),
                    );
                }
            }
            page = page.replace(
                r#"<meta name="floodgate-checkout-origins" content="">"#,
                &format!(r#"<meta name="floodgate-checkout-origins" content="{origins}">"#),
            );
            assets.index = Some(Asset::new("text/html; charset=utf-8", page.into_bytes()));
        }
        Ok(assets)
    }
}

/// An origin as the page compares them (`scheme://host[:port]`, lowercase, no path): only
/// characters an origin can have, so it is safe inside the page's markup.
fn check_origin(origin: &str) -> std::io::Result<String> {
    let origin = origin.trim().trim_end_matches('/').to_ascii_lowercase();
    let (scheme, host) = origin.split_once("://").unwrap_or(("", ""));
    let valid = matches!(scheme, "http" | "https")
        && !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']'));
    if valid {
        Ok(origin)
    } else {
        Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("FLOODGATE_CHECKOUT_ORIGINS: {origin:?} is not an origin like https://pay.example.com"),
        ))
    }
}

/// Whether the request's `If-None-Match` names `etag` (or `*`): then the answer is a 304.
pub(crate) fn etag_matches(if_none_match: Option<&HeaderValue>, etag: &str) -> bool {
    if_none_match
        .and_then(|v| v.to_str().ok())
        .is_some_and(|list| {
            list.split(',')
                .map(|t| t.trim().trim_start_matches("W/"))
                .any(|t| t == etag || t == "*")
        })
}

/// The representation `headers` accept (brotli, gzip or plain), or a 304 if `If-None-Match`
/// names its ETag, with `cache_control`.
pub(crate) fn respond(asset: &Asset, headers: &HeaderMap, cache_control: &'static str) -> Response {
    let encoding = negotiate(
        headers
            .get(header::ACCEPT_ENCODING)
            .and_then(|v| v.to_str().ok()),
    );
    let (body, suffix, coding) = match encoding {
        Encoding::Brotli => (asset.br.clone(), "-br", Some("br")),
        Encoding::Gzip => (asset.gzip.clone(), "-gz", Some("gzip")),
        Encoding::Identity => (asset.identity.clone(), "", None),
    };
    let etag = format!("\"{}{suffix}\"", asset.digest);
    let revalidated = etag_matches(headers.get(header::IF_NONE_MATCH), &etag);
    let mut response = if revalidated {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        let mut r = (StatusCode::OK, body).into_response();
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(asset.content_type),
        );
        if let Some(coding) = coding {
            r.headers_mut()
                .insert(header::CONTENT_ENCODING, HeaderValue::from_static(coding));
        }
        r
    };
    let h = response.headers_mut();
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static(cache_control),
    );
    h.insert(header::VARY, HeaderValue::from_static("Accept-Encoding"));
    h.insert(
        header::ETAG,
        HeaderValue::from_str(&etag).expect("hex and quotes are a valid header"),
    );
    response
}

/// `GET /assets/{name}`: a hashed script or style, immutable.
pub async fn asset(
    State(state): State<AppState>,
    UrlPath(name): UrlPath<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let asset = state
        .assets
        .by_name
        .get(&name)
        .ok_or_else(|| ApiError::NotFound("not_found", "no such asset".into()))?;
    Ok(respond(asset, &headers, IMMUTABLE))
}

/// `GET /` and `GET /index.html`: the page, revalidated on every load.
pub async fn index(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let page = state
        .assets
        .index
        .as_ref()
        .ok_or_else(|| ApiError::NotFound("not_found", "no page is served here".into()))?;
    Ok(respond(page, &headers, "no-cache"))
}
