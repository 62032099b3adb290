//! The booking API on the page's own origin. The page sends its admission token and its
//! reservation's secret only to the origin it was loaded from; a CDN routes the booking paths to
//! the booking service (`deploy/nginx/cdn.conf`), and where there is no CDN (the demo, a single
//! host) the gateway passes them on itself, to the one booking service it is configured with.
//! No request decides where a token or a secret goes.

use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{ConnectInfo, OriginalUri, State};
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};

use floodgate_protocol::api::code;

use crate::error::ApiError;
use crate::AppState;

/// Request headers the booking API reads; nothing else is passed on.
const FORWARDED_REQUEST: [HeaderName; 4] = [
    header::AUTHORIZATION,
    header::CONTENT_TYPE,
    HeaderName::from_static("idempotency-key"),
    HeaderName::from_static(floodgate_protocol::identity::IDENTITY_HEADER),
];
/// Response headers the page reads.
const FORWARDED_RESPONSE: [HeaderName; 3] = [
    header::CONTENT_TYPE,
    header::RETRY_AFTER,
    header::CACHE_CONTROL,
];

/// How long the gateway waits for the booking service: longer than a reservation can take
/// (the broker's ack is bounded by the delivery timeout, 5 s by default).
const TIMEOUT: Duration = Duration::from_secs(15);

/// The booking service the booking paths go to.
#[derive(Clone)]
pub struct BookingRoute {
    http: reqwest::Client,
    base: String,
}

impl BookingRoute {
    pub fn new(base: &str) -> anyhow::Result<Self> {
        anyhow::ensure!(
            base.starts_with("http://") || base.starts_with("https://"),
            "FLOODGATE_BOOKING_URL must be an http:// or https:// URL"
        );
        Ok(Self {
            http: floodgate_platform::outbound::client()
                .timeout(TIMEOUT)
                .build()?,
            base: base.trim_end_matches('/').to_owned(),
        })
    }
}

/// `POST /v1/sales/{sale}/reservations`, `GET /v1/sales/{sale}/reservations` (a buyer's own),
/// `GET /v1/sales/{sale}/reservations/{id}`,
/// `POST /v1/sales/{sale}/reservations/{id}/payment`: passed to the booking service, answers
/// returned as they are.
pub async fn forward(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<std::net::SocketAddr>,
    method: Method,
    OriginalUri(uri): OriginalUri,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    // Another site's page is refused here: the booking service sees only what is passed on,
    // which leaves the Origin out.
    state.origins.check(&headers)?;
    let Some(route) = &state.booking else {
        return Err(ApiError::new(
            code::NOT_FOUND,
            "bookings are not served by this gateway; the site's own origin routes them".into(),
        ));
    };
    let path = uri.path_and_query().map_or(uri.path(), |p| p.as_str());
    let mut request = route
        .http
        .request(method, format!("{}{path}", route.base))
        .body(body);
    for name in FORWARDED_REQUEST {
        if let Some(value) = headers.get(&name) {
            request = request.header(name, value);
        }
    }
    // The client as this gateway counts it (behind a trusted edge, the one it forwards for),
    // so the booking service's per-address limits see people, not this gateway.
    let (forwarded, word) = floodgate_platform::clients::forwarding(&headers);
    let client = state.clients.address(peer.ip(), &forwarded, word);
    request = request.header("x-forwarded-for", client.to_string());
    // This gateway vouches for that address as the edge would, with the same key: the booking
    // service then needs no range of gateways' addresses to trust.
    if let Some(word) = state.clients.seal.edge_word() {
        request = request.header(floodgate_platform::clients::EDGE_WORD_HEADER, word);
    }
    let answer = request.send().await.map_err(|e| {
        tracing::warn!(error = %e, "booking service unreachable");
        ApiError::new(
            code::BOOKING_UNAVAILABLE,
            "the booking service is briefly unavailable; retry with the same Idempotency-Key"
                .into(),
        )
    })?;
    let status =
        StatusCode::from_u16(answer.status().as_u16()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut kept = Vec::new();
    for name in FORWARDED_RESPONSE {
        if let Some(value) = answer.headers().get(name.as_str()) {
            if let Ok(value) = HeaderValue::from_bytes(value.as_bytes()) {
                kept.push((name, value));
            }
        }
    }
    let body = answer.bytes().await.map_err(|e| {
        tracing::warn!(error = %e, "booking service's answer cut short");
        ApiError::new(
            code::BOOKING_UNAVAILABLE,
            "the booking service's answer was lost; retry with the same Idempotency-Key".into(),
        )
    })?;
    let mut response = (status, body).into_response();
    for (name, value) in kept {
        response.headers_mut().insert(name, value);
    }
    Ok(response)
}
