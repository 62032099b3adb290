//! The booking API's error type: every failure a client can see, with its status and code.
//!
//! Handlers return `Result<_, ApiError>`; domain errors convert into it here and nowhere else, so
//! the mapping from "what went wrong" to "what the client is told" can be read in one place.
//! Internal errors are logged with their cause and answered as a bare 500 that reveals nothing.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use floodgate_protocol::api::ErrorBody;
use floodgate_protocol::api::{code, UNKNOWN_SALE_MESSAGE};
use floodgate_protocol::token::TokenError;

use crate::gatekeeper::ReserveError;
use crate::publish::PublishError;
use crate::reservations::NotReserved;

/// Seconds a client should wait before retrying after a 503: long enough for a Redis or broker
/// reconnect, short enough that an admitted user's token is still valid.
const RETRY_AFTER_SECS: u32 = 1;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{1}")]
    BadRequest(&'static str, String),
    #[error("{1}")]
    Unauthorized(&'static str, String),
    #[error("{1}")]
    Forbidden(&'static str, String),
    #[error("{1}")]
    NotFound(&'static str, String),
    #[error("{1}")]
    Conflict(&'static str, String),
    #[error("{1}")]
    PayloadTooLarge(&'static str, String),
    #[error("{1}")]
    Unprocessable(&'static str, String),
    /// A dependency is down; nothing was decided. Answered with `Retry-After`.
    #[error("{1}")]
    Unavailable(&'static str, String),
    /// A bug or an unexpected state; the cause is logged, never sent.
    #[error("internal error: {0}")]
    Internal(String),
}

impl ApiError {
    /// A sale id that is not armed (or not an id at all), as every endpoint answers it.
    pub fn unknown_sale() -> Self {
        ApiError::NotFound(code::UNKNOWN_SALE, UNKNOWN_SALE_MESSAGE.into())
    }

    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(..) => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized(..) => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(..) => StatusCode::FORBIDDEN,
            ApiError::NotFound(..) => StatusCode::NOT_FOUND,
            ApiError::Conflict(..) => StatusCode::CONFLICT,
            ApiError::PayloadTooLarge(..) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::Unprocessable(..) => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::Unavailable(..) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn body(&self) -> ErrorBody {
        let (code, message) = match self {
            ApiError::BadRequest(c, m)
            | ApiError::Unauthorized(c, m)
            | ApiError::Forbidden(c, m)
            | ApiError::NotFound(c, m)
            | ApiError::Conflict(c, m)
            | ApiError::PayloadTooLarge(c, m)
            | ApiError::Unprocessable(c, m)
            | ApiError::Unavailable(c, m) => (*c, m.clone()),
            ApiError::Internal(_) => (code::INTERNAL, "an internal error occurred".to_owned()),
        };
        ErrorBody {
            error: code.to_owned(),
            message,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        // Every refusal and failure, by the code the client sees.
        let code = self.body().error;
        metrics::counter!("floodgate_api_errors_total", "code" => code).increment(1);
        if let ApiError::Internal(cause) = &self {
            tracing::error!(%cause, "internal error");
        }
        let mut response = (self.status(), Json(self.body())).into_response();
        if matches!(self, ApiError::Unavailable(..)) {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECS));
        }
        response
    }
}

impl From<TokenError> for ApiError {
    fn from(e: TokenError) -> Self {
        let code = match e {
            TokenError::Malformed => code::TOKEN_MALFORMED,
            TokenError::UnknownKey | TokenError::BadSignature => code::TOKEN_INVALID,
            TokenError::Expired => code::TOKEN_EXPIRED,
        };
        ApiError::Unauthorized(code, e.to_string())
    }
}

impl From<ReserveError> for ApiError {
    fn from(e: ReserveError) -> Self {
        let message = e.to_string();
        match e {
            ReserveError::UnknownSale => ApiError::unknown_sale(),
            ReserveError::UnknownPool => ApiError::NotFound(code::UNKNOWN_POOL, message),
            ReserveError::PoolUnavailable => {
                tracing::error!("a pool's Redis state is missing: refused until rebuilt");
                ApiError::Unavailable(code::POOL_UNAVAILABLE, message)
            }
            ReserveError::Late => ApiError::Unavailable(code::RESERVATION_LATE, message),
            ReserveError::SoldOut { .. } => ApiError::Conflict(code::SOLD_OUT, message),
            ReserveError::SaleEnded => ApiError::Conflict(code::SALE_ENDED, message),
            ReserveError::TokenSpent => ApiError::Conflict(code::TOKEN_SPENT, message),
            ReserveError::Unsettled => ApiError::Unavailable(code::RESERVATION_UNSETTLED, message),
            ReserveError::NotReplicated => {
                ApiError::Unavailable(code::REPLICA_UNAVAILABLE, message)
            }
            ReserveError::BuyerLimit { .. } => ApiError::Conflict(code::BUYER_LIMIT, message),
            ReserveError::KeyReused => {
                ApiError::Unprocessable(code::IDEMPOTENCY_KEY_REUSED, message)
            }
            ReserveError::Redis(e) => e.into(),
            ReserveError::Protocol(_) => ApiError::Internal(message),
        }
    }
}

/// Redis unreachable or failing: nothing was decided, the client may retry.
impl From<redis::RedisError> for ApiError {
    fn from(e: redis::RedisError) -> Self {
        tracing::warn!(error = %e, "redis call failed");
        ApiError::Unavailable(
            code::REDIS_UNAVAILABLE,
            "the seat store is unavailable; nothing was changed, retry shortly".into(),
        )
    }
}

impl From<NotReserved> for ApiError {
    fn from(e: NotReserved) -> Self {
        match e {
            NotReserved::Refused(e) => e.into(),
            NotReserved::NotDurable(_) => ApiError::Unavailable(
                code::BROKER_UNAVAILABLE,
                "the reservation could not be made durable and was not kept; retry with the same Idempotency-Key".into(),
            ),
            NotReserved::NotReplicated(_) => ApiError::Unavailable(
                code::REPLICA_UNAVAILABLE,
                "the reservation could not be copied to a Redis replica in time; retry with the same Idempotency-Key".into(),
            ),
            NotReserved::Ended { state } => ApiError::Conflict(
                code::RESERVATION_ENDED,
                format!("the hold ended ({state}) before it could be confirmed; it is not yours any more"),
            ),
        }
    }
}

impl From<PublishError> for ApiError {
    fn from(e: PublishError) -> Self {
        tracing::warn!(error = %e, "reservation not acknowledged by the broker");
        ApiError::Unavailable(
            code::BROKER_UNAVAILABLE,
            "the reservation could not be made durable; retry with the same Idempotency-Key".into(),
        )
    }
}
