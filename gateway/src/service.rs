//! The gateway as the service skeleton runs it (`floodgate_platform::service`): its background
//! work (limits pruned, memory trimmed after ramps, records kept across failovers, idle rooms
//! retired), its two listeners' routes, and its ending (every session closed with "going away,
//! reconnect" and its resume token, the rooms stopped).

use std::collections::HashMap;
use std::time::Duration;

use floodgate_platform::service::{Lifecycle, Running, Service};

use crate::{memory, records, router, AppState, Config};

/// A gateway, built and ready to serve.
pub struct Gateway(pub AppState);

impl Service for Gateway {
    type Settings = Config;
    const NAME: &'static str = "gateway";
    const WHILE_DRAINING: &'static str = "joins are refused; sessions close after the drain delay";

    fn addresses(config: &Config) -> (Option<&str>, &str) {
        (Some(&config.listen), &config.admin_listen)
    }

    fn drain_delay(config: &Config) -> Duration {
        config.drain.drain_delay
    }

    async fn build(config: Config, life: &Lifecycle) -> anyhow::Result<Self> {
        Ok(Self(AppState::connect(config, life).await?))
    }

    fn start(self, life: &Lifecycle) -> Running {
        let state = self.0;
        let shutdown = life.shutdown.clone();
        prune_limits(&state, shutdown.clone());
        memory::trim_after_ramps(state.budget.clone(), shutdown.clone());
        records::keep_across_failovers(&state);
        retire_idle_rooms(&state, shutdown);
        // Every session is a connection: the cap sits above the session budget, so a full
        // gateway still answers joins with 503 `gateway_full` rather than leaving them in the
        // backlog.
        let limits = state
            .config
            .listener
            .limits(connection_cap(state.budget.max()));
        let tasks = state.tasks.clone();
        Running {
            public: Some((router::public(state.clone()), limits)),
            admin: router::admin(state),
            ending: Box::pin(async move {
                // The sessions saw the shutdown and are saying goodbye; the rooms are stopping.
                tasks.close();
                if tokio::time::timeout(GOODBYE_TIMEOUT, tasks.wait())
                    .await
                    .is_err()
                {
                    tracing::warn!("some sessions did not close in time");
                }
                Ok(())
            }),
        }
    }
}

/// How long shutdown waits for sessions to say goodbye before the process exits anyway.
const GOODBYE_TIMEOUT: Duration = Duration::from_secs(5);

/// The public listener's default connection cap for a budget of `sessions`: room for the HTTP
/// requests and the refusals beside them, within the descriptors the session budget leaves.
fn connection_cap(sessions: u64) -> usize {
    usize::try_from(sessions.saturating_add(128)).unwrap_or(usize::MAX)
}

/// Forgets, once a minute, the per-address counts, the draw's readers and the places nobody has
/// asked about lately.
fn prune_limits(state: &AppState, shutdown: tokio_util::sync::CancellationToken) {
    let (limits, draw) = (state.limits.clone(), state.draw.clone());
    let (place, challenges) = (state.place.clone(), state.challenges.clone());
    let resumes = state.resumes.clone();
    tokio::spawn(async move {
        let mut every = tokio::time::interval(Duration::from_secs(60));
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = every.tick() => {
                    limits.prune();
                    draw.prune();
                    place.prune();
                    challenges.prune();
                    resumes.prune();
                }
            }
        }
    });
}

/// Retires the rooms nobody has been in for the idle time ([`AppState::retire_idle_rooms`]).
fn retire_idle_rooms(state: &AppState, shutdown: tokio_util::sync::CancellationToken) {
    let rooms = state.clone();
    tokio::spawn(async move {
        // Looked at four times per idle time: a room outlives its last session by at most a
        // quarter more than the idle time.
        let period = (rooms.config.room_idle / 4).max(Duration::from_millis(10));
        let mut every = tokio::time::interval(period);
        let mut idle = HashMap::new();
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = every.tick() => rooms.retire_idle_rooms(&mut idle),
            }
        }
    });
}
