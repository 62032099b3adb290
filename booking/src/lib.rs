//! Floodgate's booking service: the admitted client's reservation, decided atomically in Redis
//! and answered only once it is durable in Kafka; plus the sale catalog and its arming.
//!
//! # Layout
//! - [`config`]: process settings (flags and environment).
//! - [`api`]: `create_reservation`, from the admission token to the durable 201; [`paying`]: a
//!   reservation's own routes behind its secret (`get_reservation`, `start_payment`);
//!   [`holders`]: that secret, made from the reservation under the service's key, and what its
//!   presenter pays for asking.
//! - [`webhook`]: `receive_webhook`, the payment provider's signed outcomes.
//! - [`listing`]: `GET /v1/sales/{sale}/reservations`, a signed-in buyer's own reservations.
//! - [`router`]: where every route of both listeners is mounted, and the OpenAPI documents
//!   collected from them; [`openapi`]: what the documents say beside the routes (titles,
//!   security schemes, each operation's refusals).
//! - [`payments`]: the payment provider's API as this service calls it.
//! - [`admin`]: the ops API (live figures, rate, cap, pause, resume, open now) on its own listener;
//!   [`sale_update`]: the body of its change; [`figures`]: a sale's live figures as operators see
//!   them; [`audit`]: the trail of every operator action; [`autopilot`]: the admission
//!   autopilot's settings as ops change them, and its notable changes written to the trail.
//! - `service`: the service as `floodgate_platform::service` runs it: its background work,
//!   its listeners' routes, its ending (the producer flushed).
//! - [`worker`]: the outbox relay and the hold reaper, run by every instance.
//! - [`auth`]: reading bearer credentials and the buyer's identity token; [`extract`]: what
//!   handlers take from a request (the admission token, the Idempotency-Key, a reservation's
//!   secret, the signed-in buyer), each refused with its own code before the handler runs.
//! - [`probes`]: `/healthz` and `/readyz` (the broker reported, never gating); [`health`]: each
//!   sale's reservation latency and failures, written every second for the admission autopilot.
//! - [`limits`]: what a stranger's requests may cost (per address, per pass, the webhook's bad
//!   signatures per address), checked in memory before any Redis work.
//! - [`error`]: [`error::ApiError`], the one mapping from failures to statuses and JSON bodies.
//! - [`gatekeeper`]: every Lua script of this service and its reply as a Rust type: the
//!   reservation's lifecycle, arming, repair and rebuild, and the relay's, reaper's and ops
//!   API's calls. Nothing else here reads a pool's keys.
//! - [`reservations`]: the durable-201 sequence (reserve, publish, then ack or abort);
//!   [`replays`]: the 201s this instance gave, answered again from memory to their replays.
//! - [`publish`]: the idempotent Kafka producer that acknowledges events before a 2xx;
//!   [`broker_health`]: whether the broker is known to be down (reservations refused at once),
//!   and its probe.
//! - [`catalog`]: sale files, the PostgreSQL catalog and arming a sale into Redis; the catalog
//!   documents the page reads, served for the edge to cache (`catalog::served`).
//! - [`publish_static`]: the static catalog JSON and the list of sales, for a CDN.
//! - [`reconcile`], [`rebuild`]: the on-call commands (Redis against PostgreSQL; a lost pool).
//! - [`topics`]: `topics ensure`, the Kafka topics made and checked by Floodgate itself.
//! - [`ending`]: the end of a sale (`sale end`) and the purge of its Redis state (`sale purge`).
//!
//! This crate never writes bookings to PostgreSQL: the consumer does, from the event stream.

pub mod admin;
pub mod api;
pub mod audit;
pub mod auth;
pub mod autopilot;
pub mod broker_health;
pub mod catalog;
pub mod config;
pub mod ending;
pub mod error;
pub mod extract;
pub mod figures;
pub mod gatekeeper;
pub mod health;
pub mod holders;
pub mod limits;
pub mod listing;
pub mod openapi;
pub mod paying;
pub mod payments;
pub mod probes;
pub mod publish;
pub mod publish_static;
pub mod rebuild;
pub mod reconcile;
pub mod replays;
pub mod reservations;
pub mod router;
pub mod sale_update;
mod service;
pub mod topics;
pub mod webhook;
pub mod worker;

use std::sync::Arc;
use std::time::Duration;

use floodgate_platform::service::Lifecycle;
use floodgate_protocol::token::TokenVerifier;
use tokio_util::sync::CancellationToken;

pub use config::Config;
use gatekeeper::Gatekeeper;
use payments::ProviderClient;
use publish::Publisher;
use secrecy::SecretString;
pub use service::Booking;

/// Reservation bodies are a few dozen bytes; anything near this is not a booking request.
const MAX_BODY_BYTES: usize = 4 * 1024;

/// Shared state of the booking service; every field is a cheap handle.
#[derive(Clone)]
pub struct AppState {
    /// Runs the reservation scripts on Redis, where every seat decision is made.
    pub gatekeeper: Gatekeeper,
    /// Checks admission tokens against the gateways' public keys.
    pub verifier: Arc<TokenVerifier>,
    /// Publishes decisions to Kafka and waits for the ack before a 2xx.
    pub publisher: Publisher,
    /// The catalog: tells a sale Redis lost from one that never existed.
    pub db: sqlx::PgPool,
    /// The payment provider's API.
    pub provider: ProviderClient,
    /// Makes and proves reservations' secrets (crate::holders).
    pub reservation_key: holders::ReservationKey,
    /// Verifies the provider's webhooks.
    pub webhook_secret: Arc<SecretString>,
    pub webhook_tolerance: Duration,
    /// How long a request waits for its SeatReserved ack before aborting the hold.
    pub delivery_timeout: Duration,
    /// Settings, parsed once (the workers read theirs from here).
    pub config: Arc<Config>,
    /// This instance's name in the relay leases.
    pub instance_id: Arc<str>,
    /// Checks buyers' identity tokens (`None`: no issuer configured).
    pub identity: Option<Arc<floodgate_platform::identity::IdentityVerifier>>,
    /// The audit trail's chain keys: the current one, and those it replaced (appended with until
    /// a rotation hands over).
    pub audit_keys: audit::AuditKeys,
    /// Cancelled when the instance begins to stop: `/readyz` fails from then on, while every
    /// route still answers until the drain delay is over (`floodgate_platform::service`).
    pub draining: CancellationToken,
    /// Each sale's reservation times and failures, for the admission autopilot.
    pub health: Arc<health::SaleHealth>,
    /// The pages allowed to book from a browser.
    pub origins: Arc<floodgate_platform::origins::AllowedOrigins>,
    /// Who a request is from, as the per-address limits count it.
    pub clients: Arc<floodgate_platform::clients::Clients>,
    /// What a stranger's requests may cost (crate::limits).
    pub limits: Arc<limits::Limits>,
    /// The 201s this instance gave, for their replays (crate::replays).
    pub answered: Arc<replays::Answered>,
    /// The catalog documents the page reads, made from PostgreSQL (crate::catalog::served).
    pub shelf: Arc<catalog::served::Shelf>,
    /// Each dependency's latest answer to `/readyz`, asked at most once a second whoever asks.
    pub checks: Arc<floodgate_platform::readiness::RememberedChecks>,
}

impl axum::extract::FromRef<AppState> for Arc<floodgate_platform::clients::Clients> {
    fn from_ref(state: &AppState) -> Self {
        state.clients.clone()
    }
}

impl axum::extract::FromRef<AppState> for Arc<floodgate_platform::origins::AllowedOrigins> {
    fn from_ref(state: &AppState) -> Self {
        state.origins.clone()
    }
}

impl AppState {
    /// Connects to Redis and creates the producer from `config`; `db` holds the catalog.
    /// `life.draining` is what `/readyz` reports.
    pub async fn connect(
        config: &Config,
        db: sqlx::PgPool,
        life: &Lifecycle,
    ) -> anyhow::Result<Self> {
        use anyhow::Context as _;
        let provider = config.validate().map_err(anyhow::Error::msg)?;
        if provider.sandbox {
            tracing::warn!(
                url = %floodgate_platform::secrets::redact_url(&provider.url),
                "PAYMENTS GO TO THE SANDBOX PROVIDER: no money moves. Never run a real sale like this."
            );
        }
        let verifier = TokenVerifier::from_list(&config.token_public_keys)
            .context("FLOODGATE_TOKEN_PUBLIC_KEYS is not a valid key list")?;
        floodgate_platform::runtime::metrics();
        // Rare events an alert watches are served from the start, at zero, so a rule over them
        // has a series before the first one happens.
        metrics::counter!("floodgate_pools_lost_writes_total").increment(0);
        metrics::gauge!("floodgate_reconcile_drift_pools").set(0.0);
        metrics::counter!("floodgate_reconcile_failures_total").increment(0);
        let keys = config.redis.keys().map_err(anyhow::Error::msg)?;
        let redis = floodgate_platform::runtime::connect_redis(&config.redis)
            .await
            .context("connecting to Redis")?;
        let publisher = Publisher::new(
            &config.kafka,
            config.delivery_timeout,
            &topics::probe_topic(&config.kafka, config.probe_topic.as_deref()),
        )
        .context("creating the Kafka producer")?;
        Ok(Self {
            gatekeeper: Gatekeeper::connect(redis.clone(), keys)
                .await
                .context("loading the Lua scripts into Redis")?
                .with_replicas(
                    config.min_replicas(redis.is_cluster()),
                    config.redis_replica_timeout,
                ),
            verifier: Arc::new(verifier),
            publisher,
            db,
            provider: ProviderClient::new(&provider)
                .context("configuring the payment provider's client")?,
            webhook_secret: Arc::new(config.webhook_secret.clone()),
            reservation_key: holders::ReservationKey::parse(
                &config.reservation_key,
                config.reservation_previous_keys.as_ref(),
            )
            .map_err(anyhow::Error::msg)?,
            webhook_tolerance: config.webhook_tolerance,
            delivery_timeout: config.delivery_timeout,
            instance_id: Arc::from(
                config
                    .instance_id
                    .clone()
                    .unwrap_or_else(|| format!("booking-{}", uuid::Uuid::new_v4().simple())),
            ),
            audit_keys: audit::AuditKeys::parse(
                &config.audit_key,
                config.audit_previous_keys.as_ref(),
            )
            .map_err(anyhow::Error::msg)?,
            draining: life.draining.clone(),
            health: Arc::default(),
            origins: Arc::new(floodgate_platform::origins::AllowedOrigins::from_args(
                &config.origins,
            )?),
            clients: Arc::new(floodgate_platform::clients::Clients::new(&config.clients)),
            limits: Arc::new(limits::Limits::new(config)),
            answered: Arc::default(),
            shelf: Arc::default(),
            checks: Arc::default(),
            config: Arc::new(config.clone()),
            identity: config
                .identity
                .verifier()
                .await
                .map_err(anyhow::Error::msg)?,
        })
    }
}
