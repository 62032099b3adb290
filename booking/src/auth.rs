//! The `Authorization: Bearer <credential>` header, as every endpoint of this service reads it
//! (admission tokens, reservation secrets, the ops token). Secrets are compared with
//! `floodgate_protocol::same_secret`, in constant time.

use axum::http::{header, HeaderMap};
use floodgate_protocol::identity::{BuyerId, IdentityError, IDENTITY_HEADER};

use crate::error::ApiError;
use crate::AppState;

/// Why no bearer credential could be read.
#[derive(Debug, PartialEq, Eq)]
pub enum BearerError {
    /// No `Authorization` header at all.
    Missing,
    /// A header that is not `Bearer <credential>`.
    Malformed,
}

/// The credential of an `Authorization: Bearer <credential>` header (scheme case-insensitive;
/// spaces or tabs after it, as the edge reads it: deploy/nginx/cdn.conf's `Bearer\s+`, so a
/// credential the edge counted as sealed is the one checked here).
pub fn bearer(headers: &HeaderMap) -> Result<&str, BearerError> {
    let value = headers
        .get(header::AUTHORIZATION)
        .ok_or(BearerError::Missing)?;
    value
        .to_str()
        .ok()
        .and_then(|v| v.split_once([' ', '\t']))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, credential)| credential.trim())
        .filter(|credential| !credential.is_empty())
        .ok_or(BearerError::Malformed)
}

/// The buyer a request's `Floodgate-Identity` header names, verified against the operator's
/// sign-in (`None`: no header).
pub async fn identify(state: &AppState, headers: &HeaderMap) -> Result<Option<BuyerId>, ApiError> {
    let Some(value) = headers.get(IDENTITY_HEADER) else {
        return Ok(None);
    };
    let token = value
        .to_str()
        .map_err(|_| ApiError::from(IdentityError::Malformed))?;
    let Some(verifier) = &state.identity else {
        tracing::error!("a request presents an identity, and no issuer is configured (FLOODGATE_IDENTITY_ISSUER)");
        return Err(ApiError::from(IdentityError::Unavailable));
    };
    verifier
        .verify(token.trim())
        .await
        .map(Some)
        .map_err(ApiError::from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn with(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::AUTHORIZATION, HeaderValue::from_str(value).unwrap());
        headers
    }

    #[test]
    fn bearer_credentials_are_read_and_anything_else_is_told_apart() {
        assert_eq!(bearer(&with("Bearer abc")), Ok("abc"));
        assert_eq!(bearer(&with("bearer  abc ")), Ok("abc"));
        assert_eq!(
            bearer(&with("Bearer\tabc")),
            Ok("abc"),
            "a tab, as the edge reads it"
        );
        assert_eq!(bearer(&HeaderMap::new()), Err(BearerError::Missing));
        assert_eq!(
            bearer(&with("Basic dXNlcjpwYXNz")),
            Err(BearerError::Malformed)
        );
        assert_eq!(bearer(&with("Bearer")), Err(BearerError::Malformed));
        assert_eq!(bearer(&with("Bearer ")), Err(BearerError::Malformed));
    }
}
