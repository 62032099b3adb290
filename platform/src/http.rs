//! The services' one typed HTTP edge for refusals: every 4xx and 5xx a handler answers is an
//! [`ApiError`], a [`Refusal`] of `floodgate-protocol` (a code and a message; the code decides
//! the status, once, in `floodgate_protocol::api::code`) answered here the same way for every
//! service: the JSON error body, `Retry-After` on what a client should retry, and the count of
//! refusals by code (`floodgate_api_errors_total`). (A wire crate cannot implement axum's
//! `IntoResponse` for its own type; this newtype can.)

use std::fmt::Display;

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use floodgate_protocol::api::{code, Refusal, UNKNOWN_SALE_MESSAGE};

/// A refusal, as a handler returns it.
#[derive(Clone, Debug, thiserror::Error)]
#[error(transparent)]
pub struct ApiError(pub Refusal);

impl ApiError {
    /// Refuses with `code` (its status is the code's) and `message`, for a human.
    pub fn new(code: &'static str, message: String) -> Self {
        Self(Refusal::new(code, message))
    }

    /// A bug or an unexpected state: `cause` is logged, never sent (a bare 500 `internal`).
    pub fn internal(cause: impl Display) -> Self {
        tracing::error!(%cause, "internal error");
        Self::new(code::INTERNAL, "an internal error occurred".into())
    }

    /// A sale id that is not armed (or not an id at all), as every endpoint answers it.
    pub fn unknown_sale() -> Self {
        Self::new(code::UNKNOWN_SALE, UNKNOWN_SALE_MESSAGE.into())
    }

    pub fn code(&self) -> &'static str {
        self.0.code
    }

    pub fn status(&self) -> StatusCode {
        StatusCode::from_u16(self.0.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    /// How long a client should wait before it tries again, if it should.
    fn retry_after(&self) -> Option<u64> {
        match self.0.code {
            // A shed crowd comes back over 2-10 s, not as one wave.
            code::GATEWAY_FULL | code::GATEWAY_DRAINING => Some(rand::random::<u64>() % 9 + 2),
            // A place may be asked about once in 5 s (the gateway's FLOODGATE_PLACE_EVERY_MS).
            code::PLACE_RATE_LIMITED => Some(5),
            // Long enough for Redis or the broker to reconnect, short enough that an admitted
            // client's token is still good.
            _ if matches!(self.0.status(), 429 | 503) => Some(1),
            _ => None,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        metrics::counter!("floodgate_api_errors_total", "code" => self.0.code).increment(1);
        let retry_after = self.retry_after();
        let mut response = (self.status(), Json(self.0.body())).into_response();
        if let Some(secs) = retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

/// The sale a request's path names (its `{sale}`), checked: a path that does not parse, or an
/// id that is not an id, is 404 `unknown_sale` before anything is looked up for it (a
/// stranger's made-up sale costs no Redis work). Every route with a `{sale}` takes it this way.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SaleId(pub String);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for SaleId {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, ApiError> {
        let axum::extract::Path(params) = axum::extract::Path::<
            std::collections::HashMap<String, String>,
        >::from_request_parts(parts, state)
        .await
        .map_err(|_| ApiError::unknown_sale())?;
        let sale = params.get("sale").ok_or_else(ApiError::unknown_sale)?;
        floodgate_protocol::ids::check_sale_id(sale).map_err(|_| ApiError::unknown_sale())?;
        Ok(Self(sale.clone()))
    }
}

/// What a JSON body of an endpoint looks like, for the refusal of one that is not JSON.
pub trait Shape {
    /// The body as a person would write it (`{"pool": "<pool id>", "seats": <number>}`).
    const EXAMPLE: &'static str;
}

/// A request body that is a JSON object, its fields for the handler to read one by one (so each
/// mistake gets its field's code and a sentence a person can act on, never a parser's wording).
/// Refused: a body over the listener's limit (413 `body_too_large`), one that cannot be read
/// (400 `bad_body`), one that is not JSON (400 `bad_json`) or not an object (422
/// `invalid_request`), each naming the shape `S` expects.
#[derive(Debug)]
pub struct JsonObject<S> {
    pub fields: serde_json::Map<String, serde_json::Value>,
    shape: std::marker::PhantomData<S>,
}

impl<S> JsonObject<S> {
    /// The first field that is not one of `known`, refused with 422 `invalid_request`.
    pub fn only(&self, known: &[&str], takes: &str) -> Result<(), ApiError> {
        match self.fields.keys().find(|k| !known.contains(&k.as_str())) {
            None => Ok(()),
            Some(unknown) => Err(ApiError::new(
                code::INVALID_REQUEST,
                format!("unknown field {unknown:?}: {takes}"),
            )),
        }
    }
}

impl<S: Shape, St: Send + Sync> axum::extract::FromRequest<St> for JsonObject<S> {
    type Rejection = ApiError;

    async fn from_request(request: axum::extract::Request, state: &St) -> Result<Self, ApiError> {
        let body = axum::body::Bytes::from_request(request, state)
            .await
            .map_err(|e| {
                if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                    ApiError::new(code::BODY_TOO_LARGE, "the request body is too large".into())
                } else {
                    ApiError::new(code::BAD_BODY, "the request body could not be read".into())
                }
            })?;
        let value: serde_json::Value = serde_json::from_slice(&body).map_err(|_| {
            ApiError::new(
                code::BAD_JSON,
                format!("the body is not valid JSON; send {}", S::EXAMPLE),
            )
        })?;
        let serde_json::Value::Object(fields) = value else {
            return Err(ApiError::new(
                code::INVALID_REQUEST,
                format!("the body must be a JSON object: {}", S::EXAMPLE),
            ));
        };
        Ok(Self {
            fields,
            shape: std::marker::PhantomData,
        })
    }
}

/// Redis unreachable or failing: nothing was decided, the client may retry.
impl From<redis::RedisError> for ApiError {
    fn from(e: redis::RedisError) -> Self {
        tracing::warn!(error = %e, "redis call failed");
        Self::new(
            code::REDIS_UNAVAILABLE,
            "Redis is briefly unavailable; nothing was changed, retry in a second".into(),
        )
    }
}

/// A script's call failed, or its reply was not one it documents (logged: a bug between the
/// script and its declaration); either way nothing the client can fix, and retryable.
impl From<crate::script::ScriptError> for ApiError {
    fn from(e: crate::script::ScriptError) -> Self {
        match e {
            crate::script::ScriptError::Redis(e) => e.into(),
            crate::script::ScriptError::Odd(odd) => {
                tracing::error!(script = odd.script, reply = %odd.reply, "a script answered oddly");
                Self::new(
                    code::REDIS_UNAVAILABLE,
                    "Redis answered oddly; nothing was changed, retry in a second".into(),
                )
            }
        }
    }
}

/// An identity token refused (401, its code saying why), or the issuer's keys out of reach
/// (503): for joins and booking requests alike.
impl From<floodgate_protocol::identity::IdentityError> for ApiError {
    fn from(e: floodgate_protocol::identity::IdentityError) -> Self {
        Self::new(e.code(), e.to_string())
    }
}

/// An admission token refused.
impl From<floodgate_protocol::token::TokenError> for ApiError {
    fn from(e: floodgate_protocol::token::TokenError) -> Self {
        use floodgate_protocol::token::TokenError;
        let code = match e {
            TokenError::Malformed => code::TOKEN_MALFORMED,
            TokenError::UnknownKey | TokenError::BadSignature => code::TOKEN_INVALID,
            TokenError::Expired => code::TOKEN_EXPIRED,
        };
        Self::new(code, e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use floodgate_protocol::identity::IdentityError;

    use super::*;

    fn answered(e: ApiError) -> (u16, Option<u64>) {
        let response = e.into_response();
        let retry = response
            .headers()
            .get(header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok()?.parse().ok());
        (response.status().as_u16(), retry)
    }

    #[tokio::test]
    async fn a_sale_path_that_is_not_an_id_is_an_unknown_sale() {
        use tower::ServiceExt as _;
        let app = axum::Router::new().route(
            "/v1/sales/{sale}/things/{id}",
            axum::routing::get(|SaleId(sale): SaleId| async move { sale }),
        );
        let ask = |path: &str| {
            let app = app.clone();
            let request = axum::http::Request::get(path)
                .body(axum::body::Body::empty())
                .unwrap();
            async move { app.oneshot(request).await.unwrap() }
        };
        let ok = ask("/v1/sales/spring-rush/things/1").await;
        assert_eq!(ok.status(), 200);
        let body = axum::body::to_bytes(ok.into_body(), 1024).await.unwrap();
        assert_eq!(&body[..], b"spring-rush");
        for bad in ["/v1/sales/no%20such/things/1", "/v1/sales/%FF/things/1"] {
            let refused = ask(bad).await;
            assert_eq!(refused.status(), 404, "{bad}");
            let body = axum::body::to_bytes(refused.into_body(), 1024)
                .await
                .unwrap();
            let body: floodgate_protocol::api::ErrorBody = serde_json::from_slice(&body).unwrap();
            assert_eq!(body.error, code::UNKNOWN_SALE, "{bad}");
        }
    }

    #[test]
    fn the_code_decides_the_status_and_the_retry() {
        assert_eq!(
            answered(ApiError::new(code::SOLD_OUT, "x".into())),
            (409, None)
        );
        assert_eq!(
            answered(ApiError::new(code::REDIS_UNAVAILABLE, "x".into())),
            (503, Some(1))
        );
        assert_eq!(
            answered(ApiError::new(code::JOIN_RATE_LIMITED, "x".into())),
            (429, Some(1))
        );
        let (status, retry) = answered(ApiError::new(code::GATEWAY_FULL, "x".into()));
        assert_eq!(status, 503);
        assert!(retry.is_some_and(|s| (2..=10).contains(&s)), "{retry:?}");
        assert_eq!(answered(ApiError::internal("a bug")), (500, None));
    }

    /// Every identity refusal is a 401 the client can fix, but the issuer out of reach: a 503.
    #[test]
    fn identity_refusals_answer_by_their_codes() {
        use IdentityError::*;
        for e in [
            Malformed,
            Algorithm,
            UnknownKey,
            BadSignature,
            Expired,
            NotYetValid,
            WrongIssuer,
            WrongAudience,
            NoSubject,
            Unavailable,
        ] {
            let expected = if e.is_client_error() { 401 } else { 503 };
            assert_eq!(ApiError::from(e).status().as_u16(), expected, "{e:?}");
        }
    }
}
