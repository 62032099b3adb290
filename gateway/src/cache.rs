//! The caching headers of the gateway's static folder; the bodies it keeps for crowds (the
//! page's assets in `assets.rs`, the seat counts in `seats.rs`) are `floodgate_platform::cache`'s
//! [`Asset`]s, served through its [`respond`].

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

pub(crate) use floodgate_platform::cache::{etag_matches, respond, Asset};
use floodgate_protocol::api::code;

use crate::error::ApiError;

/// Whether a static file's path is spelled the one way the edge keys its cache by: no empty,
/// `.` or `..` segment, nothing percent-encoded, no folder. The edge passes the path on as it
/// came, and keys its copy by the path made plain: `//`, `/./index.html` or `/%69ndex.html`
/// would otherwise reach the folder, which serves the page as it is stored (with nothing
/// configured filled in: no sign-in, no checkout), and the edge would keep that under the page's
/// own key for everyone. Files are named plainly; only a stranger spells them otherwise.
fn plainly_spelled(path: &str) -> bool {
    !path.contains('%')
        && path
            .split('/')
            .skip(1)
            .all(|segment| !matches!(segment, "" | "." | ".."))
}

/// Caching headers for the static files: the page is revalidated on every load (it names the
/// scripts), catalog JSON is fresh for a minute and servable stale for ten, scripts and styles
/// for five minutes. Every file gets an ETag (from its modification time, size and encoding, as
/// nginx does) and `If-None-Match` is answered 304.
pub(crate) async fn static_headers(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let path = request.uri().path().to_owned();
    if !plainly_spelled(&path) {
        return ApiError::new(code::NOT_FOUND, "no such file".into()).into_response();
    }
    let if_none_match = request.headers().get(header::IF_NONE_MATCH).cloned();
    let mut response = next.run(request).await;
    // The folder's own refusals (a missing file, a path that tries to leave the folder, a
    // method other than GET) get the JSON error body every endpoint promises, and never say
    // which it was: a traversal attempt looks like any missing file.
    match response.status() {
        StatusCode::OK => {}
        StatusCode::METHOD_NOT_ALLOWED => {
            return ApiError::new(
                code::METHOD_NOT_ALLOWED,
                "static files are read with GET or HEAD".into(),
            )
            .into_response()
        }
        status if status.is_client_error() => {
            return ApiError::new(code::NOT_FOUND, "no such file".into()).into_response()
        }
        _ => return response,
    }
    let cache_control = if path.starts_with("/data/") {
        "public, max-age=60, stale-while-revalidate=600"
    } else if path.ends_with(".js") || path.ends_with(".css") {
        "public, max-age=300"
    } else {
        "no-cache"
    };
    let identity = [
        header::LAST_MODIFIED,
        header::CONTENT_LENGTH,
        header::CONTENT_ENCODING,
    ]
    .map(|h| {
        response
            .headers()
            .get(h)
            .map(|v| v.as_bytes().to_vec())
            .unwrap_or_default()
    })
    .concat();
    let digest = <sha2::Sha256 as sha2::Digest>::digest(&identity);
    let etag = format!("\"{}\"", hex::encode(&digest[..10]));
    if etag_matches(if_none_match.as_ref(), &etag) {
        response = StatusCode::NOT_MODIFIED.into_response();
    }
    let headers = response.headers_mut();
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static(cache_control),
    );
    headers.insert(
        header::ETAG,
        HeaderValue::from_str(&etag).expect("hex and quotes are a valid header"),
    );
    headers.insert(header::VARY, HeaderValue::from_static("Accept-Encoding"));
    response
}
