//! The booking service as the service skeleton runs it (`floodgate_platform::service`): its
//! background work (the outbox relay and hold reaper, the broker's watch, the reconciliation),
//! its two listeners' routes, and its ending (the workers stopped, then the producer flushed,
//! so no acknowledged-but-unsent event is dropped).

use std::sync::Arc;
use std::time::Duration;

use floodgate_platform::service::{Lifecycle, Running, Service};
use tower_http::trace::TraceLayer;

use crate::worker::Workers;
use crate::{reconcile, router, AppState, Config};

/// A booking instance, built and ready to serve.
pub struct Booking(pub AppState);

impl Booking {
    /// Builds the service on a database pool of the caller's, migrated already (a test's own
    /// database): everything [`Service::build`] does after connecting to PostgreSQL.
    pub async fn on_database(
        config: Config,
        db: sqlx::PgPool,
        life: &Lifecycle,
    ) -> anyhow::Result<Self> {
        Ok(Self(AppState::connect(&config, db, life).await?))
    }
}

impl Service for Booking {
    type Settings = Config;
    const NAME: &'static str = "booking";
    const WHILE_DRAINING: &'static str = "still serving; the listeners close after the drain delay";

    fn addresses(config: &Config) -> (Option<&str>, &str) {
        (Some(&config.listen), &config.admin_listen)
    }

    fn drain_delay(config: &Config) -> Duration {
        config.drain.drain_delay
    }

    async fn build(config: Config, life: &Lifecycle) -> anyhow::Result<Self> {
        // Settings first: a missing or weak secret stops the service before it touches anything.
        config.validate().map_err(anyhow::Error::msg)?;
        let db = config
            .database
            .connect_migrated()
            .await
            .map_err(anyhow::Error::msg)?;
        Self::on_database(config, db, life).await
    }

    fn start(self, life: &Lifecycle) -> Running {
        let state = self.0;
        let shutdown = life.shutdown.clone();
        let config = &state.config;
        let workers = Workers {
            gatekeeper: state.gatekeeper.clone(),
            publisher: state.publisher.clone(),
            instance_id: state.instance_id.clone(),
            relay_interval: config.relay_interval,
            reaper_interval: config.reaper_interval,
            relay_grace: config.relay_grace(),
            db: state.db.clone(),
        };
        let worker = tokio::spawn(workers.run(shutdown.clone()));
        tokio::spawn(state.publisher.clone().watch(shutdown.clone()));
        tokio::spawn(crate::autopilot::drain(state.clone(), shutdown.clone()));
        tokio::spawn(state.limits.clone().keep_pruned(shutdown.clone()));
        tokio::spawn(crate::health::publish(
            state.health.clone(),
            state.gatekeeper.clone(),
            state.db.clone(),
            {
                let publisher = state.publisher.clone();
                move |now| publisher.ack_p99_ms(now)
            },
            state.instance_id.clone(),
            shutdown.clone(),
        ));
        if !config.reconcile_interval.is_zero() {
            tokio::spawn(reconcile::watch(
                state.db.clone(),
                state.gatekeeper.clone(),
                config.reconcile_interval,
                shutdown,
            ));
        }
        let limits = config.listener.limits(API_CONNECTIONS);
        // Config::validate checked every token of the list.
        let ops_tokens = floodgate_platform::secrets::named_secret_list(
            "FLOODGATE_OPS_TOKEN",
            &config.ops_token,
        )
        .unwrap_or_default();
        let publisher = state.publisher.clone();
        Running {
            public: Some((router::public(state.clone()), limits)),
            admin: router::admin(state, Arc::new(ops_tokens)).layer(TraceLayer::new_for_http()),
            ending: Box::pin(async move {
                let _ = worker.await;
                publisher.flush(Duration::from_secs(5));
                Ok(())
            }),
        }
    }
}

/// The booking API's default connection cap: requests are short (a reservation waits at most
/// its delivery timeout), so a few thousand connections carry tens of thousands of requests a
/// second; each connection costs a descriptor and a few KB.
const API_CONNECTIONS: usize = 8_192;
