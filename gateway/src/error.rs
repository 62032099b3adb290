//! HTTP errors of the gateway (before a WebSocket upgrade, and its small JSON endpoints).

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use floodgate_protocol::api::{code, ErrorBody, UNKNOWN_SALE_MESSAGE};

#[derive(Clone, Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{1}")]
    BadRequest(&'static str, String),
    #[error("{1}")]
    Unauthorized(&'static str, String),
    #[error("{1}")]
    Forbidden(&'static str, String),
    #[error("{1}")]
    NotFound(&'static str, String),
    /// The resource existed and is gone for good (a ticket past its grace).
    #[error("{1}")]
    Gone(&'static str, String),
    /// The gateway is over its connection budget: answered with a jittered `Retry-After`.
    #[error("{1}")]
    Busy(&'static str, String),
    #[error("{1}")]
    MethodNotAllowed(&'static str, String),
    #[error("{1}")]
    UpgradeRequired(&'static str, String),
    /// A per-IP limit: answered with `Retry-After`.
    #[error("{1}")]
    TooManyRequests(&'static str, String),
    /// Redis is unreachable: no ticket was handed out. Answered with `Retry-After`.
    #[error("{1}")]
    Unavailable(&'static str, String),
}

impl ApiError {
    /// What the gateway answers when a script's reply is not the shape it documents: logged
    /// with the reply, and a retryable 503 for the client.
    pub fn odd_reply(script: &str, reply: &str) -> Self {
        tracing::error!(script, %reply, "a waiting-room script answered oddly");
        ApiError::Unavailable(
            code::REDIS_UNAVAILABLE,
            "the waiting room answered oddly; retry in a second".into(),
        )
    }

    /// A sale id that is not armed (or not an id at all), as every endpoint answers it.
    pub fn unknown_sale() -> Self {
        ApiError::NotFound(code::UNKNOWN_SALE, UNKNOWN_SALE_MESSAGE.into())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code, message) = match self {
            ApiError::BadRequest(c, m) => (StatusCode::BAD_REQUEST, c, m),
            ApiError::Unauthorized(c, m) => (StatusCode::UNAUTHORIZED, c, m),
            ApiError::Forbidden(c, m) => (StatusCode::FORBIDDEN, c, m),
            ApiError::NotFound(c, m) => (StatusCode::NOT_FOUND, c, m),
            ApiError::Gone(c, m) => (StatusCode::GONE, c, m),
            ApiError::MethodNotAllowed(c, m) => (StatusCode::METHOD_NOT_ALLOWED, c, m),
            ApiError::UpgradeRequired(c, m) => (StatusCode::UPGRADE_REQUIRED, c, m),
            ApiError::TooManyRequests(c, m) => (StatusCode::TOO_MANY_REQUESTS, c, m),
            ApiError::Unavailable(c, m) => (StatusCode::SERVICE_UNAVAILABLE, c, m),
            ApiError::Busy(c, m) => {
                let mut response = (
                    StatusCode::SERVICE_UNAVAILABLE,
                    Json(ErrorBody {
                        error: c.to_owned(),
                        message: m,
                    }),
                )
                    .into_response();
                // Spread the retries of a shed crowd over 2-10 s, so they do not come back
                // as one wave.
                let secs = rand::random::<u64>() % 9 + 2;
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(secs));
                return response;
            }
        };
        let mut response = (
            status,
            Json(ErrorBody {
                error: code.to_owned(),
                message,
            }),
        )
            .into_response();
        if status == StatusCode::SERVICE_UNAVAILABLE || status == StatusCode::TOO_MANY_REQUESTS {
            // One second: long enough for Redis to reconnect, short enough not to lose the crowd.
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        response
    }
}

impl From<floodgate_platform::script::ScriptError> for ApiError {
    fn from(e: floodgate_platform::script::ScriptError) -> Self {
        match e {
            floodgate_platform::script::ScriptError::Redis(e) => e.into(),
            floodgate_platform::script::ScriptError::Odd(odd) => {
                ApiError::odd_reply(odd.script, &odd.reply)
            }
        }
    }
}

impl From<redis::RedisError> for ApiError {
    fn from(e: redis::RedisError) -> Self {
        tracing::warn!(error = %e, "redis unavailable");
        ApiError::Unavailable(
            code::REDIS_UNAVAILABLE,
            "the waiting room is briefly unavailable; retry in a second".into(),
        )
    }
}
