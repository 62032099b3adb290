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
