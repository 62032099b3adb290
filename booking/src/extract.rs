//! What the booking API's handlers take from a request, each refused with its own code before
//! the handler runs: the admission token (and, for a pass bound to a buyer, the buyer's own
//! identity token), the `Idempotency-Key`, a reservation's secret, the signed-in buyer. Axum
//! runs a handler's extractors in the order of its arguments, which is the order the checks are
//! documented in (docs/protocol.md 3).

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use floodgate_platform::http::SaleId;
use floodgate_protocol::api::code;
use floodgate_protocol::identity::BuyerId;
use floodgate_protocol::now_millis;
use floodgate_protocol::token::AdmissionClaims;

use crate::auth::{bearer, identify, BearerError};
use crate::error::ApiError;
use crate::AppState;

/// The longest `Idempotency-Key` taken (a UUID is 36 characters).
pub const MAX_IDEMPOTENCY_KEY_LEN: usize = 128;

/// A verified admission token for the sale of the path, and, for a pass bound to a buyer, proof
/// that the buyer is the one presenting it.
pub struct Admitted {
    pub sale: String,
    pub claims: AdmissionClaims,
}

impl FromRequestParts<AppState> for Admitted {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let SaleId(sale) = SaleId::from_request_parts(parts, state).await?;
        let token = bearer(&parts.headers).map_err(|e| match e {
            BearerError::Missing => ApiError::new(
                code::TOKEN_MISSING,
                "an admission token is required: Authorization: Bearer <token>".into(),
            ),
            BearerError::Malformed => ApiError::new(
                code::TOKEN_MALFORMED,
                "expected Authorization: Bearer <token>".into(),
            ),
        })?;
        let claims = state.verifier.verify(token, now_millis())?;
        if claims.sale != sale {
            return Err(ApiError::new(
                code::TOKEN_WRONG_SALE,
                "this admission token was issued for another sale".into(),
            ));
        }
        if let Some(bound) = &claims.buyer {
            let buyer = identify(state, &parts.headers).await?.ok_or_else(|| {
                ApiError::new(
                    code::IDENTITY_REQUIRED,
                    "this admission token belongs to a signed-in buyer: send their identity \
                     token in Floodgate-Identity"
                        .into(),
                )
            })?;
            if buyer.as_str() != bound {
                return Err(ApiError::new(
                    code::BUYER_MISMATCH,
                    "this admission token was issued to another buyer".into(),
                ));
            }
        }
        Ok(Self { sale, claims })
    }
}

/// The request's `Idempotency-Key`: 1 to 128 visible ASCII characters.
pub struct IdempotencyKey(pub String);

impl<S: Send + Sync> FromRequestParts<S> for IdempotencyKey {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let value = parts.headers.get("idempotency-key").ok_or_else(|| {
            ApiError::new(
                code::IDEMPOTENCY_KEY_MISSING,
                "an Idempotency-Key header is required (a fresh UUID per reservation attempt)"
                    .into(),
            )
        })?;
        let key = value.to_str().unwrap_or_default();
        let valid = !key.is_empty()
            && key.len() <= MAX_IDEMPOTENCY_KEY_LEN
            && key.bytes().all(|b| b.is_ascii_graphic());
        if !valid {
            return Err(ApiError::new(
                code::IDEMPOTENCY_KEY_INVALID,
                format!(
                    "Idempotency-Key must be 1 to {MAX_IDEMPOTENCY_KEY_LEN} visible ASCII characters"
                ),
            ));
        }
        Ok(Self(key.to_owned()))
    }
}

/// The secret a reservation's own routes are called with (`Authorization: Bearer <secret>`);
/// whether it is the reservation's is for the handler (the same 404 either way).
pub struct ReservationSecret(pub String);

impl<S: Send + Sync> FromRequestParts<S> for ReservationSecret {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let secret = bearer(&parts.headers).map_err(|_| {
            ApiError::new(
                code::SECRET_MISSING,
                "present the reservation's secret: Authorization: Bearer <secret>".into(),
            )
        })?;
        Ok(Self(secret.to_owned()))
    }
}

/// The signed-in buyer a request's identity token names (401 `identity_required` without one).
pub struct SignedIn(pub BuyerId);

impl FromRequestParts<AppState> for SignedIn {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let buyer = identify(state, &parts.headers).await?.ok_or_else(|| {
            ApiError::new(
                code::IDENTITY_REQUIRED,
                "sign in: send your identity token in Floodgate-Identity".into(),
            )
        })?;
        Ok(Self(buyer))
    }
}
