//! The consumer as the service skeleton runs it (`floodgate_platform::service`): no public
//! listener; its admin listener (`/metrics`, `/healthz`, `/readyz`); its loop ([`crate::run`])
//! until shutdown; and its ending (the batch in hand finished, the partitions given back).

use std::time::Duration;

use floodgate_platform::service::{Lifecycle, Running, Service};
use sqlx::PgPool;

use crate::{probes, Config};

/// A consumer, built and ready to run.
pub struct Consumer {
    config: Config,
    db: PgPool,
    admin: axum::Router,
}

impl Consumer {
    /// Builds the consumer on a database pool of the caller's, migrated already (a test's own
    /// database): everything [`Service::build`] does after connecting to PostgreSQL.
    pub fn on_database(config: Config, db: PgPool, life: &Lifecycle) -> anyhow::Result<Self> {
        let admin = probes::admin_router(&config, db.clone(), life.draining.clone())?;
        Ok(Self { config, db, admin })
    }
}

impl Service for Consumer {
    type Settings = Config;
    const NAME: &'static str = "consumer";
    const WHILE_DRAINING: &'static str =
        "still applying events; the partitions are given back after the drain delay";

    fn addresses(config: &Config) -> (Option<&str>, &str) {
        (None, &config.metrics_listen)
    }

    fn drain_delay(config: &Config) -> Duration {
        config.drain_delay
    }

    async fn build(config: Config, life: &Lifecycle) -> anyhow::Result<Self> {
        let db = config
            .database
            .connect_migrated()
            .await
            .map_err(anyhow::Error::msg)?;
        Self::on_database(config, db, life)
    }

    fn start(self, life: &Lifecycle) -> Running {
        let shutdown = life.shutdown.clone();
        let consuming = tokio::spawn(async move {
            // The loop ending by itself (it could not start, it failed, it panicked) ends the
            // service: the listeners close and the process exits with the error, so the
            // platform restarts it, rather than a consumer serving /readyz while it applies
            // nothing.
            let _ending = shutdown.clone().drop_guard();
            crate::run(&self.config, self.db, shutdown).await
        });
        Running {
            public: None,
            admin: self.admin,
            ending: Box::pin(async move { consuming.await? }),
        }
    }
}
