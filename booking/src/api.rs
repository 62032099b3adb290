//! HTTP handlers of the booking API.

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::Json;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine as _;
use floodgate_contract::events::{Envelope, Event, SeatReserved};
use floodgate_contract::ids::{check_pool_id, check_sale_id};
use floodgate_contract::now_millis;
use floodgate_contract::token::AdmissionClaims;
use rand::RngCore;
use serde::{Deserialize, Serialize};

use crate::error::ApiError;
use crate::gatekeeper::{Hold, ReserveRequest};
use crate::AppState;

/// The longest `Idempotency-Key` accepted. A UUID is 36 characters; 128 leaves room for any
/// client's scheme without letting one bloat Redis.
pub const MAX_IDEMPOTENCY_KEY_LEN: usize = 128;

/// Body of `POST /v1/sales/{sale}/reservations`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReservationRequest {
    pub pool: String,
    pub seats: u32,
}

/// The 201 body. A retry with the same `Idempotency-Key` gets these exact bytes again.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct ReservationCreated {
    pub reservation_id: String,
    pub sale: String,
    pub pool: String,
    pub seats: u32,
    /// Always `held` in a 201: the seats are reserved until `hold_expires_at_ms` unless paid.
    pub status: String,
    pub reserved_at_ms: i64,
    pub hold_expires_at_ms: i64,
    /// Authorizes reading and paying for this reservation; shown once, keep it private.
    pub secret: String,
}

/// `POST /v1/sales/{sale}/reservations`: reserve seats with an admission token.
///
/// Answers 201 only after the `SeatReserved` event was acknowledged by the broker, so a 2xx is
/// always durable. Extractor rejections are taken as values so that every malformed request gets
/// the API's JSON error body rather than axum's plain-text one.
#[tracing::instrument(skip_all, fields(sale))]
pub async fn create_reservation(
    State(state): State<AppState>,
    sale: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<(StatusCode, Json<ReservationCreated>), ApiError> {
    let Path(sale) = sale.map_err(|_| not_found_sale())?;
    tracing::Span::current().record("sale", sale.as_str());
    check_sale_id(&sale).map_err(|_| not_found_sale())?;

    let claims = authenticate(&state, &headers, &sale)?;
    let idempotency_key = idempotency_key(&headers)?;
    let request = parse_body(body)?;
    check_pool_id(&request.pool).map_err(|e| ApiError::NotFound("unknown_pool", e.to_string()))?;
    if request.seats == 0 || request.seats > claims.max_seats {
        return Err(ApiError::Unprocessable(
            "invalid_seats",
            format!("seats must be between 1 and {}", claims.max_seats),
        ));
    }

    let hold = state
        .gatekeeper
        .reserve(
            &ReserveRequest {
                claims: &claims,
                pool: &request.pool,
                seats: request.seats,
                idempotency_key,
            },
            &new_reservation_id(),
            &new_secret(),
        )
        .await?;

    // Published on the first answer and again on every replay: the earlier attempt may have
    // failed to reach the broker, and a 2xx must never stand on an unacknowledged event. The
    // event id is derived from the reservation, so the consumer sees one decision, not two.
    state
        .publisher
        .publish(&seat_reserved(&claims, &request.pool, &hold))
        .await?;

    Ok((
        StatusCode::CREATED,
        Json(ReservationCreated {
            reservation_id: hold.reservation_id,
            sale,
            pool: request.pool,
            seats: hold.seats,
            status: "held".into(),
            reserved_at_ms: hold.reserved_at_ms,
            hold_expires_at_ms: hold.hold_expires_at_ms,
            secret: hold.secret,
        }),
    ))
}

fn seat_reserved(claims: &AdmissionClaims, pool: &str, hold: &Hold) -> Envelope {
    Envelope::new(
        format!("{}.reserved", hold.reservation_id),
        hold.reserved_at_ms,
        &claims.sale,
        pool,
        Event::SeatReserved(SeatReserved {
            reservation_id: hold.reservation_id.clone(),
            token_id: claims.jti.clone(),
            ticket: claims.ticket,
            seats: hold.seats,
            hold_expires_at_ms: hold.hold_expires_at_ms,
        }),
    )
}

fn not_found_sale() -> ApiError {
    ApiError::NotFound("unknown_sale", "no such sale".into())
}

/// Verifies the bearer admission token and that it was issued for this sale.
fn authenticate(
    state: &AppState,
    headers: &HeaderMap,
    sale: &str,
) -> Result<AdmissionClaims, ApiError> {
    let value = headers.get(header::AUTHORIZATION).ok_or_else(|| {
        ApiError::Unauthorized(
            "token_missing",
            "an admission token is required: Authorization: Bearer <token>".into(),
        )
    })?;
    let token = value
        .to_str()
        .ok()
        .and_then(|v| {
            let (scheme, token) = v.split_once(' ')?;
            scheme
                .eq_ignore_ascii_case("bearer")
                .then_some(token.trim())
        })
        .ok_or_else(|| {
            ApiError::Unauthorized(
                "token_malformed",
                "expected Authorization: Bearer <token>".into(),
            )
        })?;
    let claims = state.verifier.verify(token, now_millis())?;
    if claims.sale != sale {
        return Err(ApiError::Forbidden(
            "token_wrong_sale",
            "this admission token was issued for another sale".into(),
        ));
    }
    Ok(claims)
}

fn idempotency_key(headers: &HeaderMap) -> Result<&str, ApiError> {
    let value = headers.get("idempotency-key").ok_or_else(|| {
        ApiError::BadRequest(
            "idempotency_key_missing",
            "an Idempotency-Key header is required (a fresh UUID per reservation attempt)".into(),
        )
    })?;
    let key = value.to_str().unwrap_or_default();
    let valid = !key.is_empty()
        && key.len() <= MAX_IDEMPOTENCY_KEY_LEN
        && key.bytes().all(|b| b.is_ascii_graphic());
    if !valid {
        return Err(ApiError::BadRequest(
            "idempotency_key_invalid",
            format!(
                "Idempotency-Key must be 1 to {MAX_IDEMPOTENCY_KEY_LEN} visible ASCII characters"
            ),
        ));
    }
    Ok(key)
}

fn parse_body(body: Result<Bytes, BytesRejection>) -> Result<ReservationRequest, ApiError> {
    let body = body.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::PayloadTooLarge("body_too_large", "the request body is too large".into())
        } else {
            ApiError::BadRequest("bad_body", e.body_text())
        }
    })?;
    serde_json::from_slice(&body).map_err(|e| {
        if e.is_syntax() || e.is_eof() {
            ApiError::BadRequest("bad_json", format!("the body is not valid JSON: {e}"))
        } else {
            ApiError::Unprocessable(
                "invalid_request",
                format!("expected {{\"pool\": string, \"seats\": integer}}: {e}"),
            )
        }
    })
}

fn new_reservation_id() -> String {
    format!("r_{}", uuid::Uuid::now_v7().simple())
}

/// 256 random bits: guessing a reservation's secret is not a practical attack.
fn new_secret() -> String {
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    B64.encode(bytes)
}

/// `GET /healthz`: the process is up (not whether its dependencies are).
pub async fn health() -> Json<serde_json::Value> {
    Json(serde_json::json!({ "status": "ok" }))
}

/// Any route not defined: a JSON 404 like every other error.
pub async fn not_found() -> ApiError {
    ApiError::NotFound("not_found", "no such endpoint".into())
}
