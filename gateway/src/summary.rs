//! `GET /v1/sales/{sale}`: a sale's public figures, as the waiting room knows them.

use axum::extract::State;
use axum::Json;
use floodgate_platform::http::SaleId;
use floodgate_protocol::api::room::SaleSummary;

use crate::error::ApiError;
use crate::room::read_view;
use crate::AppState;

/// `GET /v1/sales/{sale}`: the waiting room's public figures (opening, rate, queue, pools).
#[utoipa::path(get, path = "/v1/sales/{sale}", tag = "waiting room", params(floodgate_platform::openapi::SalePath),
    responses((status = 200, description = "The sale's public figures.", body = SaleSummary), crate::openapi::SaleRefusals))]
pub async fn sale_summary(
    State(state): State<AppState>,
    SaleId(sale): SaleId,
) -> Result<Json<SaleSummary>, ApiError> {
    let keys = state.keys.sale(&sale);
    let view = read_view(&mut state.redis.clone(), &keys)
        .await?
        .ok_or_else(ApiError::unknown_sale)?;
    Ok(Json(SaleSummary {
        sale,
        opens_at_ms: view.opens_at_ms,
        admission_rate: view.rate,
        max_seats: view.max_seats,
        tickets_issued: view.issued,
        frontier: view.frontier,
        paused: view.paused,
        sold_out: view.sold_out,
        lottery_commitment: view.commitment,
        pools: view.pools,
        door: view.door,
    }))
}
