//! The audit of operator actions: each change made through the ops API, and each admin command
//! (`floodgate-booking sale create|arm|rebuild|end|purge`, `sale reconcile --repair`), is recorded
//! in PostgreSQL (`ops_audit`) as an intent before the change and its outcome after, with who
//! (the ops token's name, never the token; `FLOODGATE_OPERATOR` for a command), when, and the
//! sale's settings before and after. The rows are chained with a key PostgreSQL never holds
//! ([`chain`]), so `floodgate-booking audit verify` finds a row edited or deleted.
//! `GET /admin/v1/sales/{sale}/audit` and the console show them.

pub mod chain;
pub mod head;
pub mod keys;
pub mod rotate;
pub mod row;
pub mod verify;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::Json;
use floodgate_platform::http::SaleId;
use floodgate_protocol::api::code;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

pub use chain::{AppendError, AuditKey, AuditKeys, Phase};

use crate::error::ApiError;
use crate::figures::{self, OpsFigures};
use crate::AppState;

/// The operator a request of the ops API came from: its token's name, put into the request by
/// the token check.
#[derive(Clone, Debug)]
pub struct Operator(pub String);

/// The settings an operator can change, as an audit record keeps them.
pub fn settings(figures: &OpsFigures) -> Value {
    json!({
        "admission_rate": figures.admission_rate,
        "active_cap": figures.active_cap,
        "paused": figures.paused,
        "opens_at_ms": figures.opens_at_ms,
        "challenge": figures.door.challenge.as_str(),
        "pow_difficulty": figures.door.pow_difficulty,
        "autopilot": figures.autopilot.settings,
    })
}

/// An action whose intent is in the trail; [`Intent::finish`] records how it ended.
#[must_use = "an intent is finished with its outcome"]
pub struct Intent {
    id: i64,
    sale: String,
    action: String,
    actor: String,
    before: Value,
}

/// Records that `actor` is about to do `action` to `sale`, whose settings are `before`, as
/// `detail` asks. Made before the change: if the trail cannot be written, nothing is changed.
pub async fn intend(
    db: &sqlx::PgPool,
    keys: &AuditKeys,
    (sale, action, actor): (&str, &str, &str),
    before: Value,
    detail: &Value,
) -> Result<Intent, AppendError> {
    let id = chain::append(
        db,
        keys,
        chain::Entry {
            sale,
            action,
            actor,
            phase: Phase::Intent,
            intent: None,
            before: &before,
            after: &json!({}),
            detail,
        },
    )
    .await?;
    Ok(Intent {
        id,
        sale: sale.to_owned(),
        action: action.to_owned(),
        actor: actor.to_owned(),
        before,
    })
}

impl Intent {
    /// Records the outcome: `phase`, the settings `after`, and what was seen (`detail`).
    pub async fn finish(
        self,
        db: &sqlx::PgPool,
        keys: &AuditKeys,
        phase: Phase,
        after: &Value,
        detail: &Value,
    ) -> Result<(), AppendError> {
        chain::append(
            db,
            keys,
            chain::Entry {
                sale: &self.sale,
                action: &self.action,
                actor: &self.actor,
                phase,
                intent: Some(self.id),
                before: &self.before,
                after,
                detail,
            },
        )
        .await?;
        tracing::info!(sale = %self.sale, action = %self.action, actor = %self.actor,
            outcome = phase.as_str(), "operator action recorded");
        Ok(())
    }
}

/// An ops API change to `sale`: its intent recorded first (503, and nothing changed, if the
/// trail cannot be written), then `change`, then its outcome with the figures after. An outcome
/// that cannot be recorded leaves the intent unfinished in the trail, and the change stands.
pub async fn audited_change<F>(
    state: &AppState,
    operator: &Operator,
    (sale, action): (&str, &str),
    detail: Value,
    change: F,
) -> Result<OpsFigures, ApiError>
where
    F: std::future::Future<Output = Result<(), ApiError>>,
{
    let before = figures::read(state, sale).await?;
    let intent = intend(
        &state.db,
        &state.audit_keys,
        (sale, action, &operator.0),
        settings(&before),
        &detail,
    )
    .await
    .map_err(|e| match e {
        // Retrying does not help: an operator must give this service the key in force.
        AppendError::KeyNotHeld { .. } => {
            tracing::error!(error = %e, "an ops change refused: the audit key in force is not held");
            ApiError::new(code::CATALOG_UNAVAILABLE, format!("{e}; nothing was changed"))
        }
        AppendError::Database(e) => unavailable(e, "nothing was changed; retry shortly"),
    })?;
    let changed = change.await;
    let after = figures::read(state, sale).await;
    let (phase, seen) = match (&changed, &after) {
        (Ok(()), Ok(_)) => (Phase::Done, detail),
        (Err(e), _) => (
            Phase::Failed,
            json!({ "asked": detail, "error": e.to_string() }),
        ),
        (Ok(()), Err(e)) => (
            Phase::Done,
            json!({ "asked": detail, "unread": e.to_string() }),
        ),
    };
    let after_settings = after.as_ref().map_or(json!({}), settings);
    if let Err(e) = intent
        .finish(&state.db, &state.audit_keys, phase, &after_settings, &seen)
        .await
    {
        tracing::error!(error = %e, %sale, action,
            "the change's outcome could not be recorded; its intent shows it unfinished");
    }
    changed?;
    after
}

/// The audit trail's table could not be used, or this process does not hold the key in force:
/// 503, with what to do.
fn unavailable(e: impl std::fmt::Display, then: &str) -> ApiError {
    tracing::warn!(error = %e, "the audit trail is unavailable");
    ApiError::new(
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
    /// `update`, `pause`, `resume` or `open_now` (the ops API), `create`, `arm`, `rebuild`,
    /// `repair`, `end` or `purge` (the admin commands), `autopilot` (a notable change of rate
    /// the admission autopilot made).
    pub action: String,
    /// `done`, `refused` or `failed`; `intent` for a change whose outcome was never recorded
    /// (the process stopped part-way, or the trail could not be written after the change).
    pub phase: String,
    /// The ops token's name (`name:token` in FLOODGATE_OPS_TOKEN), or `sha256:` and 8 hex digits
    /// of an unnamed token, never the token; `autopilot (gateway <instance>)` for the autopilot.
    pub actor: String,
    /// The sale's settings before and after (as `GET /admin/v1/sales/{sale}` showed them; the
    /// admission rate alone for the autopilot's changes).
    #[schema(value_type = Object)]
    pub before: Value,
    #[schema(value_type = Object)]
    pub after: Value,
    /// What else the record says: the request's fields for an operator's change, what was seen
    /// when one failed, and for the autopilot the step (its decision, the signal and the
    /// health it judged).
    #[schema(value_type = Object)]
    pub detail: Value,
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
    SaleId(sale): SaleId,
    query: Result<Query<AuditQuery>, QueryRejection>,
) -> Result<Json<Vec<AuditEntry>>, ApiError> {
    // A limit out of its range is refused, not quietly clamped: the caller learns its mistake.
    let limit = match query {
        Ok(Query(AuditQuery { limit: None })) => 100,
        Ok(Query(AuditQuery { limit: Some(n) })) if (1..=100).contains(&n) => n,
        _ => {
            return Err(ApiError::new(
                code::BAD_PAGE,
                "limit must be a whole number from 1 to 100".into(),
            ))
        }
    };
    let entries = sqlx::query_as::<_, AuditEntry>(
        "select id, at, action, actor, phase, before, after, detail from ops_audit a
         where sale = $1
           and (phase <> 'intent'
                or not exists (select 1 from ops_audit o where o.intent = a.id))
         order by id desc limit $2",
    )
    .bind(&sale)
    .bind(limit)
    .fetch_all(&state.db)
    .await
    .map_err(|e| unavailable(e, "retry shortly"))?;
    Ok(Json(entries))
}
