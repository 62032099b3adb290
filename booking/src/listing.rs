//! `GET /v1/sales/{sale}/reservations`: a signed-in buyer's own reservations in a sale.

use crate::limits::AllowedRead;
use axum::extract::State;
use axum::Json;
use floodgate_platform::http::SaleId;
use floodgate_platform::origins::SameSite;
use floodgate_protocol::api::booking::{BuyerReservation, BuyerReservations};
use floodgate_protocol::api::code;
use floodgate_protocol::reservation::ReservationState;

use crate::error::ApiError;
use crate::extract::SignedIn;
use crate::AppState;

/// `GET /v1/sales/{sale}/reservations` with `Floodgate-Identity`: the buyer's own reservations in
/// the sale, newest first (at most [`MAX_LISTED`]), from the durable record.
#[utoipa::path(
    get,
    path = "/v1/sales/{sale}/reservations",
    tag = "reservations",
    params(crate::openapi::SalePath),
    responses(
        (status = 200, description = "The buyer's reservations in the sale, newest first (at most 100).", body = BuyerReservations),
        crate::openapi::ListRefusals,
    ),
    security(("buyer_identity" = [])),
)]
#[tracing::instrument(skip_all)]
pub async fn buyer_reservations(
    State(state): State<AppState>,
    _: SameSite,
    _: AllowedRead,
    SaleId(sale): SaleId,
    SignedIn(buyer): SignedIn,
) -> Result<Json<BuyerReservations>, ApiError> {
    // Each listing is a query of PostgreSQL: held to the buyer's own allowance, whatever
    // address it comes from and whatever sale it names (crate::limits). A sale is not looked
    // up first: an ended sale's state leaves Redis, and its bookings are still the buyer's.
    state.limits.buyer(buyer.as_str())?;
    type Row = (
        String,
        String,
        i32,
        String,
        time::OffsetDateTime,
        time::OffsetDateTime,
        Option<String>,
    );
    let rows: Vec<Row> = sqlx::query_as(
        "select reservation_id, pool_id, seats, status, reserved_at, hold_expires_at, payment_id
           from bookings where buyer = $1 and sale_id = $2
           order by reserved_at desc limit $3",
    )
    .bind(buyer.as_str())
    .bind(&sale)
    .bind(MAX_LISTED)
    .fetch_all(&state.db)
    .await
    .map_err(|e| {
        tracing::warn!(error = %e, "bookings unreadable");
        ApiError::new(code::CATALOG_UNAVAILABLE, "retry shortly".into())
    })?;
    let ms = |t: time::OffsetDateTime| (t.unix_timestamp_nanos() / 1_000_000) as i64;
    let reservations = rows
        .into_iter()
        .filter_map(|(id, pool, seats, status, at, expires, payment_id)| {
            Some(BuyerReservation {
                reservation_id: id,
                pool,
                seats: u32::try_from(seats).ok()?,
                status: ReservationState::from_db(&status)?,
                reserved_at_ms: ms(at),
                hold_expires_at_ms: ms(expires),
                payment_id,
            })
        })
        .collect();
    Ok(Json(BuyerReservations { sale, reservations }))
}

/// The most reservations one listing returns (a buyer has at most a handful per sale).
const MAX_LISTED: i64 = 100;
