//! HTTP handlers of the booking API.

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::Json;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine as _;
use floodgate_contract::ids::{check_pool_id, check_sale_id, reservation_id, reservation_pool};
use floodgate_contract::now_millis;
use floodgate_contract::token::AdmissionClaims;
use rand::RngCore;
use serde::{Deserialize, Serialize};

use crate::auth::{bearer, BearerError};
use crate::error::ApiError;
use crate::gatekeeper::{PaymentStart, ReserveError, ReserveRequest, StoredReservation};
use crate::payments::CreatePayment;
use crate::reservations::{reserve_durably, NotReserved};
use crate::AppState;
use floodgate_contract::secrets::same_secret;

/// The longest `Idempotency-Key` accepted. A UUID is 36 characters; 128 leaves room for any
/// client's scheme without letting one bloat Redis.
pub const MAX_IDEMPOTENCY_KEY_LEN: usize = 128;

/// Body of `POST /v1/sales/{sale}/reservations` (read field by field: [`parse_body`]).
#[derive(Debug)]
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

    let new_id = reservation_id(&request.pool, &uuid::Uuid::now_v7().simple().to_string());
    let reserved = reserve_durably(
        &state.gatekeeper,
        &state.publisher,
        state.delivery_timeout,
        &ReserveRequest {
            claims: &claims,
            pool: &request.pool,
            seats: request.seats,
            idempotency_key,
        },
        &new_id,
        &new_secret(),
    )
    .await;
    let hold = match reserved {
        Ok(hold) => hold,
        Err(NotReserved::Refused(ReserveError::UnknownSale)) => {
            return Err(unknown_or_lost_sale(&state, &sale).await)
        }
        Err(e) => return Err(e.into()),
    };
    let outcome = if hold.replayed {
        "replayed"
    } else {
        "reserved"
    };
    metrics::counter!("floodgate_reservations_total", "outcome" => outcome).increment(1);
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

/// The sale is unknown to Redis. If the catalog says it was armed, Redis lost it: that is an
/// outage (503), not a client error.
async fn unknown_or_lost_sale(state: &AppState, sale: &str) -> ApiError {
    let armed: Result<Option<bool>, _> =
        sqlx::query_scalar("select armed_at is not null from sales where id = $1")
            .bind(sale)
            .fetch_optional(&state.db)
            .await;
    match armed {
        Ok(Some(true)) => {
            tracing::error!(%sale, "armed sale missing from Redis: its state was lost");
            ApiError::Unavailable(
                "sale_unavailable",
                "this sale is temporarily unavailable; retry shortly".into(),
            )
        }
        Ok(_) => not_found_sale(),
        Err(e) => {
            tracing::warn!(error = %e, "catalog unreachable");
            ApiError::Unavailable("catalog_unavailable", "retry shortly".into())
        }
    }
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
    let token = bearer(headers).map_err(|e| match e {
        BearerError::Missing => ApiError::Unauthorized(
            "token_missing",
            "an admission token is required: Authorization: Bearer <token>".into(),
        ),
        BearerError::Malformed => ApiError::Unauthorized(
            "token_malformed",
            "expected Authorization: Bearer <token>".into(),
        ),
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

/// Reads the body field by field, so that each mistake gets its field's code and a sentence a
/// person can act on, never the JSON parser's wording.
fn parse_body(body: Result<Bytes, BytesRejection>) -> Result<ReservationRequest, ApiError> {
    let body = body.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::PayloadTooLarge("body_too_large", "the request body is too large".into())
        } else {
            ApiError::BadRequest("bad_body", "the request body could not be read".into())
        }
    })?;
    let value: serde_json::Value = serde_json::from_slice(&body).map_err(|_| {
        ApiError::BadRequest(
            "bad_json",
            "the body is not valid JSON; send {\"pool\": \"<pool id>\", \"seats\": <number>}"
                .into(),
        )
    })?;
    let serde_json::Value::Object(fields) = value else {
        return Err(ApiError::Unprocessable(
            "invalid_request",
            "the body must be a JSON object: {\"pool\": \"<pool id>\", \"seats\": <number>}".into(),
        ));
    };
    if let Some(unknown) = fields
        .keys()
        .find(|k| !matches!(k.as_str(), "pool" | "seats"))
    {
        return Err(ApiError::Unprocessable(
            "invalid_request",
            format!("unknown field {unknown:?}: a reservation takes only pool and seats"),
        ));
    }
    let pool = match fields.get("pool") {
        Some(serde_json::Value::String(pool)) => pool.clone(),
        _ => {
            return Err(ApiError::Unprocessable(
                "invalid_pool",
                "pool must be the id of one of the sale's pools, as a string".into(),
            ))
        }
    };
    // Anything but a whole number (a string, a fraction, a negative or huge number, null) is a
    // wrong seat count; the range is checked against the token's maximum afterwards.
    let seats = fields
        .get("seats")
        .and_then(serde_json::Value::as_u64)
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| {
            ApiError::Unprocessable(
                "invalid_seats",
                "seats must be a whole number of seats, at least 1".into(),
            )
        })?;
    Ok(ReservationRequest { pool, seats })
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

/// `GET /v1/sales/{sale}/reservations/{id}`: a reservation's state, for whoever holds its secret.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct ReservationView {
    pub reservation_id: String,
    pub sale: String,
    pub pool: String,
    pub seats: u32,
    /// `held`, `confirmed`, `cancelled` (payment failed), `expired`, or `aborted`.
    pub status: String,
    pub reserved_at_ms: i64,
    pub hold_expires_at_ms: i64,
    /// Price of the whole reservation, in the currency's minor unit.
    pub amount_minor: i64,
    pub currency: String,
    /// The payment that bought the seats, once confirmed.
    pub payment_id: Option<String>,
    /// Refunds of payments that arrived when the hold was no longer live.
    pub refunds: Vec<RefundView>,
}

#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct RefundView {
    pub payment_id: String,
    /// `pending`, `succeeded` or `failed`.
    pub status: String,
}

impl ReservationView {
    fn new(sale: &str, pool: &str, r: StoredReservation) -> Self {
        let status = match r.state.as_str() {
            "sold" => "confirmed",
            "released" => "cancelled",
            other => other,
        };
        Self {
            status: status.to_owned(),
            reservation_id: r.id,
            sale: sale.to_owned(),
            pool: pool.to_owned(),
            seats: r.seats,
            reserved_at_ms: r.reserved_at_ms,
            hold_expires_at_ms: r.hold_expires_at_ms,
            amount_minor: r.fare_minor * i64::from(r.seats),
            currency: r.currency,
            payment_id: r.payment_id,
            refunds: r
                .refunds
                .into_iter()
                .map(|(payment_id, status)| RefundView { payment_id, status })
                .collect(),
        }
    }
}

/// Finds a reservation and checks its secret. Unknown ids and wrong secrets get the same 404,
/// so the API never confirms that someone else's reservation exists.
async fn authorized_reservation(
    state: &AppState,
    sale: &str,
    id: &str,
    headers: &HeaderMap,
) -> Result<(String, StoredReservation), ApiError> {
    let presented = bearer(headers).map_err(|_| {
        ApiError::Unauthorized(
            "secret_missing",
            "present the reservation's secret: Authorization: Bearer <secret>".into(),
        )
    })?;
    let not_found = || ApiError::NotFound("unknown_reservation", "no such reservation".into());
    check_sale_id(sale).map_err(|_| not_found())?;
    let pool = reservation_pool(id).ok_or_else(not_found)?.to_owned();
    let stored = state
        .gatekeeper
        .reservation(sale, &pool, id)
        .await
        .map_err(ReserveError::from)?
        .ok_or_else(not_found)?;
    if !same_secret(presented.as_bytes(), stored.secret.as_bytes()) {
        return Err(not_found());
    }
    Ok((pool, stored))
}

/// `GET /v1/sales/{sale}/reservations/{id}` with `Authorization: Bearer <secret>`.
#[tracing::instrument(skip_all, fields(%sale, %id))]
pub async fn get_reservation(
    State(state): State<AppState>,
    Path((sale, id)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Json<ReservationView>, ApiError> {
    let (pool, stored) = authorized_reservation(&state, &sale, &id, &headers).await?;
    Ok(Json(ReservationView::new(&sale, &pool, stored)))
}

/// `POST /v1/sales/{sale}/reservations/{id}/payment` with `Authorization: Bearer <secret>`:
/// starts paying for a held reservation. Answers 202 with the provider's checkout URL; the
/// outcome arrives later by webhook, and `GET` on the reservation shows it.
#[tracing::instrument(skip_all, fields(%sale, %id))]
pub async fn start_payment(
    State(state): State<AppState>,
    Path((sale, id)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<(StatusCode, Json<serde_json::Value>), ApiError> {
    let (pool, stored) = authorized_reservation(&state, &sale, &id, &headers).await?;
    if stored.state != "held" {
        let view = ReservationView::new(&sale, &pool, stored);
        return Err(ApiError::Conflict(
            "not_payable",
            format!(
                "this reservation is {}; only a held reservation can be paid",
                view.status
            ),
        ));
    }
    let amount_minor = stored.fare_minor * i64::from(stored.seats);
    let created = state
        .provider
        .create_payment(&CreatePayment {
            reference: id.clone(),
            sale: sale.clone(),
            amount_minor,
            currency: stored.currency.clone(),
        })
        .await
        .map_err(|e| {
            tracing::warn!(error = %e, "payment provider call failed");
            ApiError::Unavailable(
                "payment_provider_unavailable",
                "the payment provider is unavailable; retry shortly".into(),
            )
        })?;
    // Only this payment, for exactly this amount, can buy the hold (confirm.lua).
    match state
        .gatekeeper
        .start_payment(&sale, &pool, &id, &created.payment_id)
        .await
        .map_err(ReserveError::from)?
    {
        PaymentStart::Pending => {}
        PaymentStart::NotHeld { state: now } => {
            return Err(ApiError::Conflict(
                "not_payable",
                format!("this reservation is {now} now; only a held reservation can be paid"),
            ))
        }
        PaymentStart::Unknown => {
            return Err(ApiError::NotFound(
                "unknown_reservation",
                "no such reservation".into(),
            ))
        }
        PaymentStart::PoolUnavailable => return Err(ReserveError::PoolUnavailable.into()),
    }
    Ok((
        StatusCode::ACCEPTED,
        Json(serde_json::json!({
            "reservation_id": id,
            "payment_id": created.payment_id,
            "status": created.status,
            "checkout_url": created.checkout_url,
            "amount_minor": amount_minor,
            "currency": stored.currency,
            "hold_expires_at_ms": stored.hold_expires_at_ms,
        })),
    ))
}
