//! The ops API, on its own listener behind a bearer token: a sale's live figures, and the
//! controls an operator turns while the rush is on (admission rate, active cap, pause, resume,
//! open now). Every change is written to Redis, where every gateway's controller reads it on its
//! next tick, and back to the catalog, so a re-arm or a restart keeps it.

use floodgate_platform::http::{JsonObject, SaleId};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::IntoResponse as _;
use axum::response::Response;
use axum::{Extension, Json};
use floodgate_protocol::api::code;

use crate::audit::Operator;
use crate::auth::{bearer, BearerError};
use crate::error::ApiError;
use crate::figures::{self, OpsFigures};
pub use crate::sale_update::SaleUpdate;
use crate::AppState;
use floodgate_platform::secrets::{which_secret, NamedSecret};
use floodgate_protocol::settings::ChallengeRule;

/// The ops console's page and script, compiled in.
pub(crate) async fn console_page() -> axum::response::Response {
    console_file(
        "text/html; charset=utf-8",
        include_str!("../console/index.html"),
    )
}

pub(crate) async fn console_script() -> axum::response::Response {
    console_file(
        "text/javascript; charset=utf-8",
        include_str!("../console/console.js"),
    )
}

fn console_file(content_type: &'static str, body: &'static str) -> axum::response::Response {
    use axum::http::header;
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-store"),
            // Only this origin's script and API, never framed by another page.
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'self'; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'",
            ),
            (header::X_FRAME_OPTIONS, "DENY"),
        ],
        body,
    )
        .into_response()
}

pub(crate) async fn require_ops_token(
    State(tokens): State<Arc<Vec<NamedSecret>>>,
    mut request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    // A request without the header is refused as such, never compared with anything (an empty
    // token once matched an empty setting); the token itself is never empty (Config::validate).
    let presented = bearer(request.headers()).map_err(|e| match e {
        BearerError::Missing => ApiError::new(
            code::OPS_TOKEN_MISSING,
            "this API needs the ops token: Authorization: Bearer <ops token>".into(),
        ),
        BearerError::Malformed => ApiError::new(
            code::OPS_TOKEN_INVALID,
            "this API needs the ops token: Authorization: Bearer <ops token>".into(),
        ),
    })?;
    let Some(token) = which_secret(presented.as_bytes(), &tokens) else {
        return Err(ApiError::new(
            code::OPS_TOKEN_INVALID,
            "this API needs the ops token".into(),
        ));
    };
    // Who did it, for the audit trail: the token's name, never the token.
    let operator = Operator(token.name.clone());
    request.extensions_mut().insert(operator);
    Ok(next.run(request).await)
}

fn db_error(e: sqlx::Error) -> ApiError {
    tracing::warn!(error = %e, "catalog write failed");
    ApiError::new(
        code::CATALOG_UNAVAILABLE,
        "the catalog is unavailable; retry shortly".into(),
    )
}

/// `GET /admin/v1/sales/{sale}`: the live figures of a sale.
#[utoipa::path(
    get,
    path = "/admin/v1/sales/{sale}",
    tag = "ops",
    params(crate::openapi::SalePath),
    responses(
        (status = 200, description = "The sale's live figures.", body = OpsFigures),
        crate::openapi::OpsRefusals,
    ),
    security(("ops" = [])),
)]
pub async fn sale_figures(
    State(state): State<AppState>,
    SaleId(sale): SaleId,
) -> Result<Json<OpsFigures>, ApiError> {
    figures::read(&state, &sale).await.map(Json)
}

/// `PATCH /admin/v1/sales/{sale}`: change the admission rate, the active cap, the bot check or
/// its difficulty, or turn the admission autopilot on or off, live. A rate set by hand turns the
/// autopilot off.
#[utoipa::path(
    patch,
    path = "/admin/v1/sales/{sale}",
    tag = "ops",
    params(crate::openapi::SalePath),
    request_body(content = SaleUpdate, description = "The settings to change: at least one."),
    responses(
        (status = 200, description = "The figures after the change (recorded in the audit trail).", body = OpsFigures),
        crate::openapi::UpdateRefusals,
    ),
    security(("ops" = [])),
)]
pub async fn update_sale(
    State(state): State<AppState>,
    SaleId(sale): SaleId,
    Extension(operator): Extension<Operator>,
    body: JsonObject<SaleUpdate>,
) -> Result<Json<OpsFigures>, ApiError> {
    let update = SaleUpdate::read(&body)?;
    // A rate set by hand overrides the autopilot at once: it is turned off in the same change
    // (unless this request turns it on, from that rate).
    let autopilot = match (&update.autopilot, update.admission_rate) {
        (Some(asked), _) => Some(asked.settings()?),
        (None, Some(_)) => Some(None),
        (None, None) => None,
    };
    let asked = serde_json::Value::Object(body.fields);
    let change = async {
        state
            .gatekeeper
            .set_admission(
                &sale,
                (update.admission_rate, update.active_cap),
                autopilot.as_ref().map(Option::as_ref),
            )
            .await?;
        state
            .gatekeeper
            .set_challenge(&sale, update.challenge, update.pow_difficulty)
            .await?;
        sqlx::query(
            "update sales set admission_rate = coalesce($2, admission_rate),
               active_cap = coalesce($3, active_cap), challenge = coalesce($4, challenge),
               pow_difficulty = coalesce($5, pow_difficulty), updated_at = now() where id = $1",
        )
        .bind(&sale)
        .bind(update.admission_rate)
        .bind(update.active_cap.map(|c| c as i32))
        .bind(update.challenge.map(ChallengeRule::as_str))
        .bind(update.pow_difficulty.map(i32::from))
        .execute(&state.db)
        .await
        .map_err(db_error)?;
        tracing::info!(%sale, rate = ?update.admission_rate, cap = ?update.active_cap,
            challenge = ?update.challenge, difficulty = ?update.pow_difficulty,
            autopilot = ?autopilot, "sale settings changed");
        Ok(())
    };
    let after =
        crate::audit::audited_change(&state, &operator, (&sale, "update"), asked, change).await?;
    Ok(Json(after))
}

async fn set_paused(
    state: &AppState,
    operator: &Operator,
    sale: &str,
    paused: bool,
) -> Result<Json<OpsFigures>, ApiError> {
    let change = async {
        state.gatekeeper.set_paused(sale, paused).await?;
        sqlx::query("update sales set paused = $2, updated_at = now() where id = $1")
            .bind(sale)
            .bind(paused)
            .execute(&state.db)
            .await
            .map_err(db_error)?;
        tracing::info!(%sale, paused, "admission paused or resumed");
        Ok(())
    };
    let action = if paused { "pause" } else { "resume" };
    let after = crate::audit::audited_change(
        state,
        operator,
        (sale, action),
        serde_json::json!({}),
        change,
    )
    .await?;
    Ok(Json(after))
}

/// `POST /admin/v1/sales/{sale}/pause`: stop admitting (the queue keeps its order).
#[utoipa::path(
    post,
    path = "/admin/v1/sales/{sale}/pause",
    tag = "ops",
    params(crate::openapi::SalePath),
    responses(
        (status = 200, description = "Paused: the figures after (recorded in the audit trail).", body = OpsFigures),
        crate::openapi::OpsRefusals,
    ),
    security(("ops" = [])),
)]
pub async fn pause(
    State(state): State<AppState>,
    SaleId(sale): SaleId,
    Extension(operator): Extension<Operator>,
) -> Result<Json<OpsFigures>, ApiError> {
    set_paused(&state, &operator, &sale, true).await
}

/// `POST /admin/v1/sales/{sale}/resume`: admit again at the sale's rate.
#[utoipa::path(
    post,
    path = "/admin/v1/sales/{sale}/resume",
    tag = "ops",
    params(crate::openapi::SalePath),
    responses(
        (status = 200, description = "Admitting again: the figures after (recorded in the audit trail).", body = OpsFigures),
        crate::openapi::OpsRefusals,
    ),
    security(("ops" = [])),
)]
pub async fn resume(
    State(state): State<AppState>,
    SaleId(sale): SaleId,
    Extension(operator): Extension<Operator>,
) -> Result<Json<OpsFigures>, ApiError> {
    set_paused(&state, &operator, &sale, false).await
}

/// `POST /admin/v1/sales/{sale}/open-now`: open the sale at once instead of at `opens_at`.
///
/// The pools' armed opening moves first, then the sale's: from the moment admission can start,
/// every pool already refuses a re-arm, so no live counter can be reset.
#[utoipa::path(
    post,
    path = "/admin/v1/sales/{sale}/open-now",
    tag = "ops",
    params(crate::openapi::SalePath),
    responses(
        (status = 200, description = "Open: the figures after (an already open sale is answered as it is).", body = OpsFigures),
        crate::openapi::OpsRefusals,
    ),
    security(("ops" = [])),
)]
pub async fn open_now(
    State(state): State<AppState>,
    SaleId(sale): SaleId,
    Extension(operator): Extension<Operator>,
) -> Result<Json<OpsFigures>, ApiError> {
    let current = figures::read(&state, &sale).await?;
    if current.open {
        return Ok(Json(current));
    }
    let pools: Vec<String> = current.pools.iter().map(|p| p.pool.clone()).collect();
    let change = async {
        let now_ms = state.gatekeeper.open_now(&sale, &pools).await?;
        let opens_at =
            time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(now_ms) * 1_000_000)
                .map_err(|_| ApiError::internal("clock out of range"))?;
        sqlx::query("update sales set opens_at = $2, updated_at = now() where id = $1")
            .bind(&sale)
            .bind(opens_at)
            .execute(&state.db)
            .await
            .map_err(db_error)?;
        tracing::info!(%sale, "sale opened now by an operator");
        Ok(())
    };
    let after = crate::audit::audited_change(
        &state,
        &operator,
        (&sale, "open_now"),
        serde_json::json!({}),
        change,
    )
    .await?;
    Ok(Json(after))
}
