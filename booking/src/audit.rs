//! The audit of operator actions: each change made through the ops API is recorded in
//! PostgreSQL (`ops_audit`) with the ops token's name (never the token), the time, and the
//! sale's settings before and after; `GET /admin/v1/sales/{sale}/audit` and the console show
//! them.

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::Json;
use floodgate_contract::api::code;
use floodgate_contract::ids::check_sale_id;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::admin::OpsFigures;
use crate::error::ApiError;
use crate::AppState;

/// The operator a request of the ops API came from: its token's name, put into the request by
/// the token check.
#[derive(Clone, Debug)]
pub struct Operator(pub String);

/// The settings an operator can change, as an audit record keeps them.
fn settings(figures: &OpsFigures) -> Value {
    json!({
        "admission_rate": figures.admission_rate,
        "active_cap": figures.active_cap,
        "paused": figures.paused,
        "opens_at_ms": figures.opens_at_ms,
        "challenge": figures.door.challenge.as_str(),
        "pow_difficulty": figures.door.pow_difficulty,
    })
}

/// Records that `operator` did `action` to `sale`, which changed it from `before` to `after`.
/// A record that cannot be written fails the request (503), as the catalog's own write does:
/// no change goes unrecorded silently.
pub async fn record(
    state: &AppState,
    operator: &Operator,
    sale: &str,
    action: &str,
    before: &OpsFigures,
    after: &OpsFigures,
) -> Result<(), ApiError> {
    sqlx::query(
        "insert into ops_audit (sale, action, actor, before, after) values ($1, $2, $3, $4, $5)",
    )
    .bind(sale)
    .bind(action)
    .bind(&operator.0)
    .bind(settings(before))
    .bind(settings(after))
    .execute(&state.db)
    .await
    .map_err(|e| unavailable(e, "the change was made, retry to record it"))?;
    tracing::info!(%sale, action, actor = %operator.0, "operator action recorded");
    Ok(())
}

/// The audit trail's table could not be used: 503, with what to do.
fn unavailable(e: sqlx::Error, then: &str) -> ApiError {
    tracing::warn!(error = %e, "the audit trail is unavailable");
    ApiError::Unavailable(
        code::CATALOG_UNAVAILABLE,
        format!("the audit trail is unavailable; {then}"),
    )
}

/// One audit record, as `GET /admin/v1/sales/{sale}/audit` lists it.
#[derive(Debug, Serialize, Deserialize, sqlx::FromRow, utoipa::ToSchema)]
pub struct AuditEntry {
    pub id: i64,
    /// When, RFC 3339.
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub at: time::OffsetDateTime,
    /// `update`, `pause`, `resume` or `open_now`.
    pub action: String,
    /// The ops token's name (`name:token` in FLOODGATE_OPS_TOKEN), or `sha256:` and 8 hex digits
    /// of an unnamed token; never the token.
    pub actor: String,
    /// The sale's figures before and after (as `GET /admin/v1/sales/{sale}` showed them).
    #[schema(value_type = Object)]
    pub before: Value,
    #[schema(value_type = Object)]
    pub after: Value,
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AuditQuery {
    /// Most records, newest first (default and most: 100).
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<i64>,
}

/// `GET /admin/v1/sales/{sale}/audit`: the sale's operator actions, newest first.
#[utoipa::path(
    get,
    path = "/admin/v1/sales/{sale}/audit",
    tag = "ops",
    params(crate::openapi::SalePath, AuditQuery),
    responses(
        (status = 200, description = "The sale's operator actions, newest first.", body = Vec<AuditEntry>),
        crate::openapi::AuditRefusals,
    ),
    security(("ops" = [])),
)]
pub async fn list(
    State(state): State<AppState>,
    Path(sale): Path<String>,
    query: Result<Query<AuditQuery>, QueryRejection>,
) -> Result<Json<Vec<AuditEntry>>, ApiError> {
    check_sale_id(&sale).map_err(|_| ApiError::unknown_sale())?;
    // A limit out of its range is refused, not quietly clamped: the caller learns its mistake.
    let limit = match query {
        Ok(Query(AuditQuery { limit: None })) => 100,
        Ok(Query(AuditQuery { limit: Some(n) })) if (1..=100).contains(&n) => n,
        _ => {
            return Err(ApiError::BadRequest(
                code::BAD_PAGE,
                "limit must be a whole number from 1 to 100".into(),
            ))
        }
    };
    let entries = sqlx::query_as::<_, AuditEntry>(
        "select id, at, action, actor, before, after from ops_audit
         where sale = $1 order by id desc limit $2",
    )
    .bind(&sale)
    .bind(limit)
    .fetch_all(&state.db)
    .await
    .map_err(|e| unavailable(e, "retry shortly"))?;
    Ok(Json(entries))
}
