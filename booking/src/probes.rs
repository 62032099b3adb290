//! `/healthz` and `/readyz` of the booking service, for load balancers and kubelets.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use floodgate_contract::api::booking::Health;
use floodgate_contract::readiness::{self, Check, Readiness, CHECK_TIMEOUT};

use crate::AppState;

/// `GET /healthz`: the process is up (not whether its dependencies are).
#[utoipa::path(get, path = "/healthz", tag = "probes",
    responses((status = 200, description = "The process is up.", body = Health)))]
pub async fn health() -> Json<Health> {
    Json(Health::ok())
}

/// `GET /readyz` of the public listener: Redis and PostgreSQL answer (each within a second),
/// else 503. The broker is reported too, but a broker that is down keeps no instance out of the
/// load balancer: every instance shares that fault, and each answers reservations a JSON 503 with
/// `Retry-After` at once meanwhile (crate::broker_health). It names the failed check, not why.
#[utoipa::path(get, path = "/readyz", tag = "probes", responses(
    (status = 200, description = "Ready for traffic (a shared dependency, the broker, may be reported down).", body = Readiness),
    (status = 503, description = "A dependency did not answer in time: which one (the reason is on the admin port's `/readyz`).", body = Readiness),
))]
pub async fn ready_public(State(state): State<AppState>) -> (StatusCode, Json<Readiness>) {
    answer(readiness(&state).await.without_reasons())
}

/// The admin port's `GET /readyz`: [`ready_public`]'s answer with each failed check's reason.
#[utoipa::path(get, path = "/readyz", tag = "probes", responses(
    (status = 200, description = "Ready for traffic (a shared dependency, the broker, may be reported down).", body = Readiness),
    (status = 503, description = "A dependency did not answer in time, and why.", body = Readiness),
))]
pub async fn ready(State(state): State<AppState>) -> (StatusCode, Json<Readiness>) {
    answer(readiness(&state).await)
}

async fn readiness(state: &AppState) -> Readiness {
    let publisher = state.publisher.clone();
    readiness::check(vec![
        Check::redis(state.gatekeeper.redis()),
        Check::postgres(&state.db),
        Check::shared(
            "kafka",
            async move { publisher.reachable(CHECK_TIMEOUT).await },
        ),
    ])
    .await
}

fn answer(readiness: Readiness) -> (StatusCode, Json<Readiness>) {
    let status =
        StatusCode::from_u16(readiness.http_status()).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
    (status, Json(readiness))
}
