//! How a part of the draw's record is answered: through the gateway's guard of it
//! (crate::draw_guard), as JSON with the caching its finality allows.

use std::future::Future;
use std::net::IpAddr;

use axum::body::Bytes;
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::error::ApiError;
use crate::AppState;

/// While the pre-queue is open its record changes with every join: a second's caching lets a
/// CDN absorb a crowd of verifiers without anyone seeing an old commitment (it never changes).
const OPEN_CACHE: &str = "public, max-age=1";
/// Once drawn, nothing in the record can change again.
const FINAL_CACHE: &str = "public, max-age=31536000, immutable";

fn with_cache_control(mut response: Response, closed: bool) -> Response {
    let cache_control = if closed { FINAL_CACHE } else { OPEN_CACHE };
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static(cache_control),
    );
    response
}

/// A part of the record as its JSON body, and whether it is final (the pre-queue has closed).
pub(super) type Part = (Bytes, bool);

pub(super) fn part(body: &impl Serialize, closed: bool) -> Result<Part, ApiError> {
    let json = serde_json::to_vec(body).map_err(|_| super::damaged())?;
    Ok((Bytes::from(json), closed))
}

/// A request for a page or a proof: who asks (their address, for the per-address rate) and
/// which answer (`key`, under which a final one is kept).
pub(super) struct Asked<'a> {
    pub(super) state: &'a AppState,
    pub(super) client: IpAddr,
    pub(super) key: String,
}

impl Asked<'_> {
    /// Answers through the gateway's guard (crate::draw_guard): the address's rate, then a
    /// final answer kept in memory, else one token of the read budget and `read`.
    pub(super) async fn answer<F: Future<Output = Result<Part, ApiError>>>(
        self,
        read: impl FnOnce() -> F,
    ) -> Result<Response, ApiError> {
        let guard = &self.state.draw;
        guard.admit(self.client)?;
        let (body, closed) = match guard.kept(&self.key) {
            Some(body) => (body, true),
            None => {
                guard.read(self.client)?;
                let (body, closed) = read().await?;
                if closed {
                    guard.keep(self.key, body.clone());
                }
                (body, closed)
            }
        };
        let json = [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )];
        Ok(with_cache_control((json, body).into_response(), closed))
    }
}
