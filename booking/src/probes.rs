//! `/healthz` and `/readyz` of the booking service, for load balancers and kubelets.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use floodgate_platform::readiness::{self, Check, Readiness, CHECK_TIMEOUT};
use floodgate_protocol::api::booking::Health;

use crate::AppState;

/// `GET /healthz`: the process is up (not whether its dependencies are).
#[utoipa::path(get, path = "/healthz", tag = "probes",
    responses((status = 200, description = "The process is up.", body = Health)))]
pub async fn health() -> Json<Health> {
    Json(Health::ok())
}

/// `GET /readyz` of the public listener: 503 only while the instance is draining (told to stop:
/// it still serves, for its drain delay). Redis, PostgreSQL and the broker are reported too, but
/// none keeps an instance out of the load balancer: every instance shares their faults (a
/// Redis Cluster's one slow or lost primary included: platform::readiness::Check::redis), a 201
/// never needs PostgreSQL, and each instance answers what does need the missing part a JSON 503
/// with `Retry-After` at once meanwhile (crate::broker_health). It names the failed check, not
/// why.
#[utoipa::path(get, path = "/readyz", tag = "probes", responses(
    (status = 200, description = "Ready for traffic (a shared dependency, Redis, PostgreSQL or the broker, may be reported down).", body = Readiness),
    (status = 503, description = "The instance is draining: which check failed (the reason is on the admin port's `/readyz`).", body = Readiness),
))]
pub async fn ready_public(State(state): State<AppState>) -> (StatusCode, Json<Readiness>) {
    readiness(&state).await.without_reasons().answer()
}

/// The admin port's `GET /readyz`: [`ready_public`]'s answer with each failed check's reason.
#[utoipa::path(get, path = "/readyz", tag = "probes", responses(
    (status = 200, description = "Ready for traffic (a shared dependency, Redis, PostgreSQL or the broker, may be reported down).", body = Readiness),
    (status = 503, description = "The instance is draining, and why.", body = Readiness),
))]
pub async fn ready(State(state): State<AppState>) -> (StatusCode, Json<Readiness>) {
    readiness(&state).await.answer()
}

/// Each dependency is asked at most once a second, whoever asks (platform::readiness::Remembered);
/// draining is this process's own, told at once.
async fn readiness(state: &AppState) -> Readiness {
    let publisher = state.publisher.clone();
    let remembered = &state.checks;
    readiness::check(vec![
        Check::draining(&state.draining),
        remembered.check(Check::redis(state.gatekeeper.redis())),
        // A 201 needs Redis and the broker, never PostgreSQL (the consumer writes the booking
        // later): while it is away (a failover) every instance shares the fault, and reads of
        // a reservation answer their own 503.
        remembered.check(Check::postgres(&state.db).as_shared()),
        remembered.check(Check::shared("kafka", async move {
            publisher.reachable(CHECK_TIMEOUT).await
        })),
    ])
    .await
}
