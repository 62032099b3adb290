//! `GET /v1/sales/{sale}`: a sale's public figures, as the waiting room knows them.

use axum::extract::State;
use axum::Json;
use floodgate_platform::clients::ClientAddress;
use floodgate_platform::http::SaleId;
use floodgate_protocol::api::room::SaleSummary;

use crate::error::ApiError;
use crate::room::{read_view, RoomView};
use crate::AppState;

/// `GET /v1/sales/{sale}`: the waiting room's public figures (opening, rate, queue, pools). A
/// sale open on this gateway is answered from its room's view (read every tick), at no cost to
/// Redis; any other (a sale nobody has joined here yet, or a made-up id) reads the sale's slot,
/// and is held to its address's allowance of such lookups (crate::guards::lookups).
#[utoipa::path(get, path = "/v1/sales/{sale}", tag = "waiting room", params(floodgate_platform::openapi::SalePath),
    responses((status = 200, description = "The sale's public figures.", body = SaleSummary), crate::openapi::LookupRefusals))]
pub async fn sale_summary(
    State(state): State<AppState>,
    ClientAddress(client): ClientAddress,
    SaleId(sale): SaleId,
) -> Result<Json<SaleSummary>, ApiError> {
    let live = state.live_room(&sale).and_then(|ctx| {
        let view = ctx.room.view();
        view.loaded.then(|| summary(&sale, &view))
    });
    if let Some(live) = live {
        return Ok(Json(live));
    }
    state.lookups.admit(client)?;
    let keys = state.keys.sale(&sale);
    let view = read_view(&mut state.redis.clone(), &keys)
        .await?
        .ok_or_else(ApiError::unknown_sale)?;
    Ok(Json(summary(&sale, &view)))
}

/// The public figures of `sale` in `view`.
fn summary(sale: &str, view: &RoomView) -> SaleSummary {
    SaleSummary {
        sale: sale.to_owned(),
        opens_at_ms: view.opens_at_ms,
        admission_rate: view.rate,
        max_seats: view.max_seats,
        tickets_issued: view.issued,
        frontier: view.frontier,
        paused: view.paused,
        sold_out: view.sold_out,
        lottery_commitment: view.commitment.clone(),
        pools: view.pools.clone(),
        door: view.door,
    }
}
