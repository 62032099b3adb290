//! The browser client's scripts and styles under content-hashed names (`/assets/app.<hash>.js`),
//! cacheable forever (`immutable`): a new release has new names, so no browser or CDN ever
//! serves a stale script. The page itself (`/`, `/index.html`) names them and is revalidated on
//! every load. Everything is read, hashed and compressed once, at start.

use std::collections::HashMap;
use std::path::Path;

use axum::extract::{Path as UrlPath, State};
use axum::http::HeaderMap;
use axum::response::Response;

use floodgate_contract::api::code;

use crate::cache::{respond, Asset};
use crate::error::ApiError;
use crate::AppState;

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
    /// origins it may send a payer to for checkout into its `floodgate-checkout-origins` meta,
    /// and the operator's sign-in page into its `floodgate-signin` meta.
    pub fn load(
        dir: &Path,
        checkout_origins: &[String],
        signin_url: Option<&str>,
    ) -> std::io::Result<Self> {
        let origins = checkout_origins
            .iter()
            .map(|o| check_origin(o))
            .collect::<Result<Vec<_>, _>>()?
            .join(" ");
        let signin = signin_url
            .map(check_page_url)
            .transpose()?
            .unwrap_or_default();
        let mut assets = Assets::default();
        let mut renames: Vec<(String, String)> = Vec::new();
        let mut files = Vec::new();
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
            files.push((name, content_type, std::fs::read(&path)?));
        }
        // Modules that import nothing are named first; then the ones that import them (the
        // page imports the client module) have their `from "./x.js"` pointed at the hashed
        // name, so their own hash changes with what they import. One level of imports.
        files.sort_by_key(|(_, _, body)| imports(body));
        for (name, content_type, mut body) in files {
            for (plain, hashed) in &renames {
                body = rewrite_import(body, plain, hashed);
            }
            let asset = Asset::new(content_type, body);
            let (stem, extension) = name.rsplit_once('.').unwrap_or((&name, ""));
            let hashed = format!("{stem}.{}.{extension}", asset.digest());
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
            page = page.replace(
                r#"<meta name="floodgate-signin" content="">"#,
                &format!(r#"<meta name="floodgate-signin" content="{signin}">"#),
            );
            assets.index = Some(Asset::new("text/html; charset=utf-8", page.into_bytes()));
        }
        Ok(assets)
    }
}

/// Whether a script imports a module of its folder (`from "./x.js"`).
fn imports(body: &[u8]) -> bool {
    body.windows(8).any(|w| w == b"from \"./")
}

/// `body` with `from "./<plain>"` pointed at `/assets/<hashed>`.
fn rewrite_import(body: Vec<u8>, plain: &str, hashed: &str) -> Vec<u8> {
    let text = match String::from_utf8(body) {
        Ok(text) => text,
        // Not text: nothing to point anywhere.
        Err(not_text) => return not_text.into_bytes(),
    };
    text.replace(
        &format!("from \"./{plain}\""),
        &format!("from \"/assets/{hashed}\""),
    )
    .into_bytes()
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

/// The sign-in page's URL as the page is given it: an http(s) URL of characters that need no
/// escaping inside the page's markup.
fn check_page_url(url: &str) -> std::io::Result<String> {
    let url = url.trim();
    let valid = (url.starts_with("https://") || url.starts_with("http://"))
        && url.bytes().all(|b| {
            b.is_ascii_alphanumeric()
                || matches!(b, b'.' | b'-' | b':' | b'/' | b'_' | b'~' | b'[' | b']')
        });
    if valid {
        Ok(url.to_owned())
    } else {
        Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "FLOODGATE_SIGNIN_URL: {url:?} is not a URL like https://login.example.com/signin"
            ),
        ))
    }
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
        .ok_or_else(|| ApiError::NotFound(code::NOT_FOUND, "no such asset".into()))?;
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
        .ok_or_else(|| ApiError::NotFound(code::NOT_FOUND, "no page is served here".into()))?;
    Ok(respond(page, &headers, "no-cache"))
}

/// The page keeps a buyer's identity and resume tokens in its storage, so every answer of the
/// public listener says: run only this origin's scripts and styles, talk only to this origin
/// (its WebSocket included), never be framed, and send no Referer to the places it links to (a
/// checkout or sign-in page would otherwise learn the page's URL). The page has no inline script
/// or style to allow.
const PAGE_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    img-src 'self' data:; font-src 'self'; connect-src 'self'; manifest-src 'self'; \
    base-uri 'none'; form-action 'self'; frame-ancestors 'none'; object-src 'none'";

pub fn with_page_headers(router: axum::Router) -> axum::Router {
    use axum::http::{header, HeaderValue};
    use tower_http::set_header::SetResponseHeaderLayer;
    let set =
        |name, value| SetResponseHeaderLayer::if_not_present(name, HeaderValue::from_static(value));
    router
        .layer(set(header::CONTENT_SECURITY_POLICY, PAGE_POLICY))
        .layer(set(header::REFERRER_POLICY, "no-referrer"))
        .layer(set(header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .layer(set(header::X_FRAME_OPTIONS, "DENY"))
}
