//! The booking API's reservation: `POST /v1/sales/{sale}/reservations`, from the admission
//! token and the idempotency key to the durable 201 (a reservation's own routes, behind its
//! secret, are `paying`'s).

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use floodgate_platform::http::{JsonObject, Shape};
use floodgate_platform::origins::SameSite;
use floodgate_platform::trace::TraceContext;
use floodgate_protocol::api::booking::ReservationCreated;
use floodgate_protocol::api::code;
use floodgate_protocol::ids::{check_pool_id, reservation_id};
use floodgate_protocol::reservation::ReservationState;
use floodgate_protocol::token::AdmissionClaims;

use crate::error::ApiError;
use crate::extract::{Admitted, IdempotencyKey};
use crate::gatekeeper::{ReserveError, ReserveRequest};
use crate::limits::AllowedPass;
use crate::reservations::{reserve_durably, NotReserved};
use crate::AppState;

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
    // First: another site's page is refused before its token is read (platform::origins).
    _: SameSite,
    // Then the pass, before the key and the body are read: held to its own allowance, and only
    // a pass that fails counts against its address (crate::limits::AllowedPass).
    AllowedPass(Admitted { sale, claims }): AllowedPass,
    trace: TraceContext,
    IdempotencyKey(idempotency_key): IdempotencyKey,
    body: JsonObject<ReservationShape>,
) -> Result<(StatusCode, Json<ReservationCreated>), ApiError> {
    tracing::Span::current().record("sale", sale.as_str());
    // A trace begun by the caller (a `traceparent` header) goes on here.
    trace.continue_in(&tracing::Span::current());
    // What the client got wrong is refused before any Redis work, and is no measure of the
    // backend: only what reaches it goes into the sale's health (crate::health), each pass
    // once per half-window, a 503 or 5xx as the backend's failure.
    let request = checked(&body, &claims)?;
    let pass = floodgate_platform::autopilot::window::pass_key(&sale, &claims.jti);
    // A replay of what this instance already answered 201 costs nothing in Redis, and is the
    // client's own duplicate: not the backend's work either (crate::replays).
    let seats = request.seats;
    if let Some(answer) = state
        .answered
        .replay(pass, &idempotency_key, &request.pool, seats)
    {
        metrics::counter!("floodgate_reservations_total", "outcome" => "replayed_kept")
            .increment(1);
        return Ok((StatusCode::CREATED, Json(answer)));
    }
    let started = std::time::Instant::now();
    let answer = reserve(
        &state,
        sale.clone(),
        claims,
        idempotency_key.clone(),
        request,
    )
    .await;
    // `reservation_unsettled` is the client's own copies of one request racing (one still on its
    // way while another is refused), not the backend failing: answered, but not counted.
    let failed = answer
        .as_ref()
        .is_err_and(|e| e.status().is_server_error() && e.code() != code::RESERVATION_UNSETTLED);
    state.health.record(&sale, pass, started.elapsed(), failed);
    if let Ok((_, Json(created))) = &answer {
        state.answered.keep(pass, &idempotency_key, seats, created);
    }
    answer
}

/// The body's checks against the pass: a pool that can be one, and seats the pass may take.
fn checked(
    body: &JsonObject<ReservationShape>,
    claims: &AdmissionClaims,
) -> Result<ReservationRequest, ApiError> {
    let request = parse_body(body)?;
    check_pool_id(&request.pool).map_err(|e| ApiError::new(code::UNKNOWN_POOL, e.to_string()))?;
    if request.seats == 0 || request.seats > claims.max_seats {
        return Err(ApiError::new(
            code::INVALID_SEATS,
            format!("seats must be between 1 and {}", claims.max_seats),
        ));
    }
    Ok(request)
}

/// The reservation itself, from the body's checks to the durable 201.
async fn reserve(
    state: &AppState,
    sale: String,
    claims: AdmissionClaims,
    idempotency_key: String,
    request: ReservationRequest,
) -> Result<(StatusCode, Json<ReservationCreated>), ApiError> {
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
            idempotency_key: &idempotency_key,
        },
        &new_id,
        &state.reservation_key.secret(&sale, &new_id),
    )
    .await;
    let hold = match reserved {
        Ok(hold) => hold,
        Err(NotReserved::Refused(ReserveError::UnknownSale)) => {
            return Err(unknown_or_lost_sale(state, &sale).await)
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
            secret: state.clients.seal.seal(&hold.secret),
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

/// What a reservation's body looks like.
pub struct ReservationShape;

impl Shape for ReservationShape {
    const EXAMPLE: &'static str = r#"{"pool": "<pool id>", "seats": <number>}"#;
}

/// Reads the body field by field, so that each mistake gets its field's code and a sentence a
/// person can act on, never the JSON parser's wording.
fn parse_body(body: &JsonObject<ReservationShape>) -> Result<ReservationRequest, ApiError> {
    body.only(
        &["pool", "seats"],
        "a reservation takes only pool and seats",
    )?;
    let fields = &body.fields;
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

/// Any route not defined: a JSON 404 like every other error.
pub async fn not_found() -> ApiError {
    ApiError::new(code::NOT_FOUND, "no such endpoint".into())
}
