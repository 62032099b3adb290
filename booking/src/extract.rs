//! What the booking API's handlers take from a request, each refused with its own code before
//! the handler runs: the admission token (and, for a pass bound to a buyer, the buyer's own
//! identity token), the `Idempotency-Key`, a reservation's secret and path, the signed-in buyer,
//! a payment provider's signed event. Axum
//! runs a handler's extractors in the order of its arguments, which is the order the checks are
//! documented in (docs/protocol.md 3).

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Path, Request};
use axum::http::request::Parts;
use axum::http::StatusCode;
use floodgate_platform::clients::{unsealed, ClientAddress};
use floodgate_platform::http::SaleId;
use floodgate_protocol::api::code;
use floodgate_protocol::identity::BuyerId;
use floodgate_protocol::ids::{check_sale_id, reservation_pool};
use floodgate_protocol::now_millis;
use floodgate_protocol::payments::{verify, SignatureError, WebhookEvent, SIGNATURE_HEADER};
use floodgate_protocol::token::AdmissionClaims;
use secrecy::ExposeSecret;

use crate::auth::{bearer, identify, BearerError};
use crate::error::ApiError;
use crate::AppState;

/// The longest `Idempotency-Key` taken (a UUID is 36 characters).
pub const MAX_IDEMPOTENCY_KEY_LEN: usize = 128;

/// A verified admission token for the sale of the path (for a pass bound to a buyer, whether
/// the buyer is the one presenting it is [`Admitted::presented_by_its_buyer`]).
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
        Ok(Self { sale, claims })
    }
}

impl Admitted {
    /// For a pass bound to a buyer, that the buyer is the one presenting it (their identity
    /// token checks and names them). A signature check: made after the pass's own allowance
    /// (crate::limits::AllowedPass), so a genuine pass sent with junk identities costs one at
    /// its pass's rate.
    pub async fn presented_by_its_buyer(
        &self,
        state: &AppState,
        headers: &axum::http::HeaderMap,
    ) -> Result<(), ApiError> {
        if let Some(bound) = &self.claims.buyer {
            let buyer = identify(state, headers).await?.ok_or_else(|| {
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
        Ok(())
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
        Ok(Self(unsealed(secret).to_owned()))
    }
}

/// The reservation a path names (`/v1/sales/{sale}/reservations/{id}`): a well-formed sale id
/// and reservation id, and the pool the id names. Anything else is 404 `unknown_reservation`,
/// the answer a wrong secret gets too, so a prober learns nothing from the shape of its guess.
pub struct ReservationRef {
    pub sale: String,
    pub id: String,
    pub pool: String,
}

impl ReservationRef {
    /// The one answer for a reservation that is not there, or not the caller's to see.
    pub fn not_found() -> ApiError {
        ApiError::new(code::UNKNOWN_RESERVATION, "no such reservation".into())
    }
}

impl<S: Send + Sync> FromRequestParts<S> for ReservationRef {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Path((sale, id)) = Path::<(String, String)>::from_request_parts(parts, state)
            .await
            .map_err(|_| Self::not_found())?;
        check_sale_id(&sale).map_err(|_| Self::not_found())?;
        let pool = reservation_pool(&id)
            .ok_or_else(Self::not_found)?
            .to_owned();
        Ok(Self { sale, id, pool })
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

/// A payment provider's event (`POST /v1/payments/webhook`): its body read whole (413
/// `body_too_large` over the listener's limit), its signature over those raw bytes checked
/// before anything of it is parsed, then parsed (400 `bad_json`) and its id checked (422
/// `invalid_event`: it names a Redis key).
pub struct SignedEvent(pub WebhookEvent);

impl FromRequest<AppState> for SignedEvent {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &AppState) -> Result<Self, ApiError> {
        let (mut parts, body) = request.into_parts();
        let ClientAddress(client) = ClientAddress::from_request_parts(&mut parts, state).await?;
        let request = Request::from_parts(parts, body);
        let signature = request
            .headers()
            .get(SIGNATURE_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let body = Bytes::from_request(request, state).await.map_err(|e| {
            if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::new(code::BODY_TOO_LARGE, "the webhook body is too large".into())
            } else {
                ApiError::new(code::BAD_BODY, "the webhook body could not be read".into())
            }
        })?;
        verify(
            state.webhook_secret.expose_secret().as_bytes(),
            signature.as_deref(),
            &body,
            now_millis() / 1000,
            state.webhook_tolerance.as_secs(),
        )
        .map_err(|e| {
            // Only a delivery that fails counts against its address: a valid one is never
            // refused for its rate (crate::limits).
            if let Err(limited) = state.limits.webhook_failed(client) {
                return limited;
            }
            match e {
                SignatureError::Missing => ApiError::new(code::SIGNATURE_MISSING, e.to_string()),
                SignatureError::Malformed => {
                    ApiError::new(code::SIGNATURE_MALFORMED, e.to_string())
                }
                SignatureError::Stale => {
                    ApiError::new(code::TIMESTAMP_OUTSIDE_TOLERANCE, e.to_string())
                }
                SignatureError::Invalid => ApiError::new(code::SIGNATURE_INVALID, e.to_string()),
            }
        })?;
        let event: WebhookEvent = serde_json::from_slice(&body).map_err(|_| {
            ApiError::new(
                code::BAD_JSON,
                "the webhook body is not a payment event".into(),
            )
        })?;
        let id_ok = !event.id.is_empty()
            && event.id.len() <= 128
            && event
                .id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !id_ok {
            return Err(ApiError::new(
                code::INVALID_EVENT,
                "the event id must be 1 to 128 letters, digits, '_' or '-'".into(),
            ));
        }
        Ok(Self(event))
    }
}
