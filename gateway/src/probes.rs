//! `GET /healthz` (the process is alive) and `GET /readyz` (it should be sent joins: it is not
//! draining; Redis is reported, a shared dependency that never takes a gateway out of its
//! Services, platform::readiness::Check::redis), on the public listener, where load balancers
//! look, and on the admin listener. A gateway told to stop turns unready at once and refuses new joins for
//! its drain delay before it closes a socket (`floodgate_platform::service`), so a load balancer has stopped
//! sending it clients by then.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use floodgate_platform::readiness::{self, Check, Readiness};
use floodgate_protocol::api::booking::Health;

use crate::AppState;

#[utoipa::path(get, path = "/healthz", tag = "probes",
    responses((status = 200, description = "The process is up.", body = Health)))]
pub async fn health() -> Json<Health> {
    Json(Health::ok())
}

#[utoipa::path(get, path = "/readyz", tag = "probes", responses(
    (status = 200, description = "Ready for joins (Redis, a dependency every gateway shares, may be reported down: the gateway then refuses only what needs the part that is down).", body = Readiness),
    (status = 503, description = "The gateway is draining: which check failed (the reason is on the admin port's `/readyz`).", body = Readiness),
))]
pub async fn ready_public(State(state): State<AppState>) -> (StatusCode, Json<Readiness>) {
    readiness(&state).await.without_reasons().answer()
}

/// The admin port's `/readyz`: [`ready_public`]'s answer with each failed check's reason.
pub async fn ready(State(state): State<AppState>) -> (StatusCode, Json<Readiness>) {
    readiness(&state).await.answer()
}

/// Redis is asked at most once a second, whoever asks (platform::readiness::Remembered): in a
/// cluster its `PING` goes to every primary, and this path is public. Draining is told at once.
async fn readiness(state: &AppState) -> Readiness {
    readiness::check(vec![
        Check::draining(&state.draining),
        state.checks.check(Check::redis(&state.redis)),
    ])
    .await
}
