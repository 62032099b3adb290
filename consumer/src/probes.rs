//! The consumer's admin listener: `GET /metrics`, `GET /healthz` (the process is alive) and
//! `GET /readyz` (PostgreSQL and the broker answer: a consumer that cannot reach one of them
//! applies nothing; and it is not stopping).

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use floodgate_platform::kafka::Role;
use floodgate_platform::readiness::{self, Check, Readiness, CHECK_TIMEOUT};
use floodgate_protocol::api::booking::Health;
use rdkafka::consumer::{BaseConsumer, Consumer};
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use crate::Config;

#[derive(Clone)]
struct Probes {
    db: PgPool,
    /// A client of its own, for the broker's metadata.
    kafka: Arc<BaseConsumer>,
    topic: Arc<str>,
    /// Cancelled once the consumer is told to stop.
    draining: CancellationToken,
}

/// The admin listener's routes.
pub fn admin_router(
    config: &Config,
    db: PgPool,
    draining: CancellationToken,
) -> anyhow::Result<Router> {
    let kafka: BaseConsumer = config.kafka.client(Role::Admin, &[])?.create()?;
    let probes = Probes {
        db,
        kafka: Arc::new(kafka),
        topic: Arc::from(config.kafka.reservations_topic.as_str()),
        draining,
    };
    let router = Router::new()
        .route(
            "/metrics",
            get(|| async { floodgate_platform::telemetry::render() }),
        )
        .route("/healthz", get(|| async { Json(Health::ok()) }))
        .route("/readyz", get(ready))
        .with_state(probes);
    Ok(floodgate_platform::telemetry::instrument(
        router,
        "consumer_admin",
    ))
}

async fn ready(State(probes): State<Probes>) -> (StatusCode, Json<Readiness>) {
    let (kafka, topic) = (probes.kafka.clone(), probes.topic.clone());
    let broker = async move {
        tokio::task::spawn_blocking(move || {
            kafka
                .fetch_metadata(Some(&topic), CHECK_TIMEOUT)
                .map(drop)
                .map_err(|e| e.to_string())
        })
        .await
        .map_err(|e| e.to_string())?
    };
    let readiness = readiness::check(vec![
        Check::draining(&probes.draining),
        Check::postgres(&probes.db),
        Check::new("kafka", broker),
    ])
    .await;
    readiness.answer()
}
