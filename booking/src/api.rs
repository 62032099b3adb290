//! The booking API's reservation: `POST /v1/sales/{sale}/reservations`, from the admission
//! token and the idempotency key to the durable 201 (a reservation's own routes, behind its
//! secret, are `paying`'s).

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::Json;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine as _;
use floodgate_protocol::api::booking::ReservationCreated;
use floodgate_protocol::api::code;
use floodgate_protocol::ids::{check_pool_id, check_sale_id, reservation_id};
use floodgate_protocol::now_millis;
use floodgate_protocol::reservation::ReservationState;
use floodgate_protocol::token::AdmissionClaims;
use rand::RngCore;

use crate::auth::{bearer, identify, BearerError};
use crate::error::ApiError;
use crate::gatekeeper::{ReserveError, ReserveRequest};
use crate::reservations::{reserve_durably, NotReserved};
use crate::AppState;

/// The longest `Idempotency-Key` accepted. A UUID is 36 characters; 128 leaves room for any
/// client's scheme without letting one bloat Redis.
pub const MAX_IDEMPOTENCY_KEY_LEN: usize = 128;

/// What to reserve: a pool and a number of seats.
// Read field by field (`parse_body`), so each mistake gets its own code; the derives document it.
#[derive(Debug, serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)] // documented as additionalProperties: false, as parse_body is
#[schema(example = json!({"pool": "floor", "seats": 2}))]
pub struct ReservationRequest {
    /// One of the sale's pool ids.
    #[schema(min_length = 1, max_length = 64, pattern = r"^[A-Za-z0-9._-]{1,64}$")]
    pub pool: String,
    /// At least 1, at most the admission token's `max_seats`.
    #[schema(minimum = 1)]
    pub seats: u32,
}

/// `POST /v1/sales/{sale}/reservations`: reserve seats with an admission token.
///
/// Answers 201 only after the `SeatReserved` event was acknowledged by the broker, so a 2xx is
/// always durable. Extractor rejections are taken as values so that every malformed request gets
/// the API's JSON error body rather than axum's plain-text one.
#[utoipa::path(
    post,
    path = "/v1/sales/{sale}/reservations",
    tag = "reservations",
    summary = "Reserve seats with an admission token",
    description = "Holds the seats until `hold_expires_at_ms`. A 201 is durable: it is answered only \
        once the reservation's event is on the broker. Retry with the same `Idempotency-Key` and \
        body after a timeout or a 503: the same reservation comes back. With a token bound to a \
        signed-in buyer, send the buyer's identity token in `Floodgate-Identity` too.",
    params(
        crate::openapi::SalePath,
        ("Idempotency-Key" = String, Header, min_length = 1, max_length = 128, pattern = r"^[!-~]{1,128}$",
            description = "A fresh value (a UUID) per reservation attempt; a retry with the same key and body gets the same answer."),
    ),
    request_body(content = ReservationRequest, description = "The pool and how many seats (at most the token's max_seats)."),
    responses(
        (status = 201, description = "Held: the seats are yours until hold_expires_at_ms unless paid.", body = ReservationCreated),
        crate::openapi::ReserveRefusals,
    ),
    security(("admission" = []), ("admission" = [], "buyer_identity" = [])),
)]
#[tracing::instrument(skip_all, fields(sale))]
pub async fn create_reservation(
    State(state): State<AppState>,
    sale: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<(StatusCode, Json<ReservationCreated>), ApiError> {
    let Path(sale) = sale.map_err(|_| ApiError::unknown_sale())?;
    tracing::Span::current().record("sale", sale.as_str());
    // A trace begun by the caller (a `traceparent` header) goes on here.
    floodgate_platform::trace::continue_from_http(&tracing::Span::current(), &headers);
    check_sale_id(&sale).map_err(|_| ApiError::unknown_sale())?;

    let claims = authenticate(&state, &headers, &sale).await?;
    let idempotency_key = idempotency_key(&headers)?;
    let request = parse_body(body)?;
    check_pool_id(&request.pool).map_err(|e| ApiError::new(code::UNKNOWN_POOL, e.to_string()))?;
    if request.seats == 0 || request.seats > claims.max_seats {
        return Err(ApiError::new(
            code::INVALID_SEATS,
            format!("seats must be between 1 and {}", claims.max_seats),
        ));
    }

    // A broker known to be down could not make a hold durable: say so at once, before the
    // pass is claimed or a seat taken (crate::broker_health).
    if !state.publisher.health().admit() {
        return Err(ApiError::new(
            code::BROKER_UNAVAILABLE,
            "reservations cannot be made durable now (the event broker is down); nothing was changed, retry shortly with the same Idempotency-Key".into(),
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
            status: ReservationState::Held,
            reserved_at_ms: hold.reserved_at_ms,
            hold_expires_at_ms: hold.hold_expires_at_ms,
            secret: hold.secret,
        }),
    ))
}

/// The sale is unknown to Redis. If the catalog says it ended, its Redis state was purged: it
/// is over (409 `sale_ended`). If it says it was armed, Redis lost it: that is an outage (503),
/// not a client error.
async fn unknown_or_lost_sale(state: &AppState, sale: &str) -> ApiError {
    let known: Result<Option<(bool, bool)>, _> = sqlx::query_as(
        "select armed_at is not null, ended_at is not null from sales where id = $1",
    )
    .bind(sale)
    .fetch_optional(&state.db)
    .await;
    match known {
        Ok(Some((_, true))) => ReserveError::SaleEnded.into(),
        Ok(Some((true, false))) => {
            tracing::error!(%sale, "armed sale missing from Redis: its state was lost");
            ApiError::new(
                code::SALE_UNAVAILABLE,
                "this sale is temporarily unavailable; retry shortly".into(),
            )
        }
        Ok(_) => ApiError::unknown_sale(),
        Err(e) => {
            tracing::warn!(error = %e, "catalog unreachable");
            ApiError::new(code::CATALOG_UNAVAILABLE, "retry shortly".into())
        }
    }
}

/// Verifies the bearer admission token, that it was issued for this sale, and, for a token
/// bound to a buyer, that the buyer's own identity token comes with it.
async fn authenticate(
    state: &AppState,
    headers: &HeaderMap,
    sale: &str,
) -> Result<AdmissionClaims, ApiError> {
    let token = bearer(headers).map_err(|e| match e {
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
        let buyer = identify(state, headers).await?.ok_or_else(|| {
            ApiError::new(
                code::IDENTITY_REQUIRED,
                "this admission token belongs to a signed-in buyer: send their identity token \
                 in Floodgate-Identity"
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
    Ok(claims)
}

fn idempotency_key(headers: &HeaderMap) -> Result<&str, ApiError> {
    let value = headers.get("idempotency-key").ok_or_else(|| {
        ApiError::new(
            code::IDEMPOTENCY_KEY_MISSING,
            "an Idempotency-Key header is required (a fresh UUID per reservation attempt)".into(),
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
    Ok(key)
}

/// Reads the body field by field, so that each mistake gets its field's code and a sentence a
/// person can act on, never the JSON parser's wording.
fn parse_body(body: Result<Bytes, BytesRejection>) -> Result<ReservationRequest, ApiError> {
    let body = body.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::new(code::BODY_TOO_LARGE, "the request body is too large".into())
        } else {
            ApiError::new(code::BAD_BODY, "the request body could not be read".into())
        }
    })?;
    let value: serde_json::Value = serde_json::from_slice(&body).map_err(|_| {
        ApiError::new(
            code::BAD_JSON,
            "the body is not valid JSON; send {\"pool\": \"<pool id>\", \"seats\": <number>}"
                .into(),
        )
    })?;
    let serde_json::Value::Object(fields) = value else {
        return Err(ApiError::new(
            code::INVALID_REQUEST,
            "the body must be a JSON object: {\"pool\": \"<pool id>\", \"seats\": <number>}".into(),
        ));
    };
    if let Some(unknown) = fields
        .keys()
        .find(|k| !matches!(k.as_str(), "pool" | "seats"))
    {
        return Err(ApiError::new(
            code::INVALID_REQUEST,
            format!("unknown field {unknown:?}: a reservation takes only pool and seats"),
        ));
    }
    let pool = match fields.get("pool") {
        Some(serde_json::Value::String(pool)) => pool.clone(),
        _ => {
            return Err(ApiError::new(
                code::INVALID_POOL,
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
            ApiError::new(
                code::INVALID_SEATS,
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

/// Any route not defined: a JSON 404 like every other error.
pub async fn not_found() -> ApiError {
    ApiError::new(code::NOT_FOUND, "no such endpoint".into())
}
