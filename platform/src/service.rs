//! One service process's life, written once for the gateway, the booking service and the
//! consumer, and used by their `main`s and by the tests' `TestApp` alike, so a test starts a
//! service exactly as production does:
//!
//! 1. **Build**: the service checks its settings and connects to what it needs ([`Service::build`]).
//! 2. **Listen**: an admin listener (metrics, probes) always, a public one if the service has
//!    one; both bound after the build, so a port that answers is a service that can.
//! 3. **Serve** until told to stop.
//! 4. **Drain**: told to stop (SIGTERM, Ctrl-C), it turns unready at once (`/readyz` answers
//!    503 `draining`) and goes on serving for its drain delay, so the edge, the load balancer
//!    and kube-proxy stop sending it work before anything is refused or reset.
//! 5. **Shut down**: the listeners stop accepting and finish what is in flight; then the
//!    service's own ending runs (a producer's flush, a consumer group's goodbye).

use std::future::Future;
use std::time::Duration;

use anyhow::Context as _;
use axum::Router;
use futures::future::BoxFuture;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::listener::{self, Limits};
use crate::runtime;

/// A background task's pace until its service stops: `while every.tick().await { .. }`. Each
/// tick waits for the next period (a late one is not made up: the next comes a whole period
/// after it), and the loop ends once `shutdown` is cancelled. The first tick is at once.
pub struct Every {
    interval: tokio::time::Interval,
    shutdown: CancellationToken,
}

impl Every {
    pub fn new(period: Duration, shutdown: CancellationToken) -> Self {
        let mut interval = tokio::time::interval(period);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Self { interval, shutdown }
    }

    /// True at the next period; false once the service stops.
    pub async fn tick(&mut self) -> bool {
        tokio::select! {
            biased;
            _ = self.shutdown.cancelled() => false,
            _ = self.interval.tick() => true,
        }
    }
}

/// The two moments of a stop, as tokens every part of a service watches.
#[derive(Clone, Debug, Default)]
pub struct Lifecycle {
    /// Cancelled the moment the process is told to stop: `/readyz` fails from then on
    /// (`readiness::Check::draining`) and a gateway takes no new join.
    pub draining: CancellationToken,
    /// Cancelled a drain delay later (or at once, by a test or a fatal error): listeners stop
    /// accepting, background work ends. Cancelling it cancels `draining` too.
    pub shutdown: CancellationToken,
}

impl Lifecycle {
    pub fn new() -> Self {
        let shutdown = CancellationToken::new();
        Self {
            draining: shutdown.child_token(),
            shutdown,
        }
    }

    /// A lifecycle that ends with `parent` (a test's own token): no signal, nothing to drain.
    pub fn child_of(parent: &CancellationToken) -> Self {
        let shutdown = parent.child_token();
        Self {
            draining: shutdown.child_token(),
            shutdown,
        }
    }

    /// Drains when `signal` is cancelled: `draining` at once, `shutdown` `delay` later;
    /// `meanwhile` says in the log what the service goes on doing while it drains.
    pub fn drain_on(&self, signal: CancellationToken, delay: Duration, meanwhile: &'static str) {
        let (draining, shutdown) = (self.draining.clone(), self.shutdown.clone());
        tokio::spawn(async move {
            tokio::select! {
                () = signal.cancelled() => {}
                // Shut down by other means (a test, a fatal error): nothing to drain.
                () = shutdown.cancelled() => return,
            }
            draining.cancel();
            tracing::info!(
                delay_ms = delay.as_millis() as u64,
                "draining: unready; {meanwhile}"
            );
            tokio::time::sleep(delay).await;
            shutdown.cancel();
        });
    }
}

/// How long a service told to stop drains: the gateway's and the booking service's setting
/// (the consumer, which nothing routes work to, has its own, `FLOODGATE_CONSUMER_DRAIN_DELAY_MS`).
#[derive(Clone, Debug, clap::Args)]
pub struct DrainArgs {
    /// How long a service told to stop (SIGTERM) stays up and unready before its listeners
    /// close: long enough for load balancers to see `/readyz` fail and stop sending it work (a
    /// few of their probe periods). A gateway refuses new joins meanwhile and keeps its
    /// sessions, then closes them with their resume tokens; a booking instance goes on serving
    /// every request. Keep the platform's termination grace period above this plus the longest
    /// request (the booking service's delivery timeout) and the goodbye (a few seconds).
    #[arg(
        long = "drain-delay-ms",
        env = "FLOODGATE_DRAIN_DELAY_MS",
        default_value = "5000",
        value_parser = crate::settings::millis
    )]
    pub drain_delay: Duration,
}

/// A service's listeners, bound.
#[derive(Debug)]
pub struct Listeners {
    /// The public listener's sockets: none (no public listener), one, or one per address of a
    /// comma-separated list, all serving the same routes under one connection cap.
    pub public: Vec<TcpListener>,
    pub admin: TcpListener,
}

impl Listeners {
    /// Binds `public` (if the service has a public listener; a comma-separated list binds each
    /// address) and `admin`.
    pub async fn bind(public: Option<&str>, admin: &str) -> anyhow::Result<Self> {
        let mut listeners = Vec::new();
        for addr in public.into_iter().flat_map(|list| list.split(',')) {
            let addr = addr.trim();
            listeners.push(
                runtime::listen(addr)
                    .await
                    .with_context(|| format!("binding {addr}"))?,
            );
        }
        let public = listeners;
        let admin = runtime::listen(admin)
            .await
            .with_context(|| format!("binding {admin}"))?;
        Ok(Self { public, admin })
    }
}

/// What a running service hands the skeleton once its background work has started.
pub struct Running {
    /// The public listener's routes and limits (`None`: the service has no public listener).
    pub public: Option<(Router, Limits)>,
    /// The admin listener's routes (metrics, probes, an ops API).
    pub admin: Router,
    /// Awaited once both listeners have closed and what was in flight has finished: the
    /// service's own ending (a producer's flush, a consumer's goodbye to its group).
    pub ending: BoxFuture<'static, anyhow::Result<()>>,
}

/// A Floodgate service, as the skeleton runs it.
pub trait Service: Sized + Send + 'static {
    /// Its settings, from flags and `FLOODGATE_*` environment variables.
    type Settings: Send + 'static;
    /// Its name in the log.
    const NAME: &'static str;
    /// What it goes on doing while it drains, for the log.
    const WHILE_DRAINING: &'static str;

    /// Where it listens: the public address (`None`: no public listener) and the admin one.
    fn addresses(settings: &Self::Settings) -> (Option<&str>, &str);
    /// How long it serves on, unready, once told to stop.
    fn drain_delay(settings: &Self::Settings) -> Duration;
    /// Checks `settings` and connects to what the service needs; its `/readyz` reports
    /// `life.draining`, and its work ends with `life.shutdown`.
    fn build(
        settings: Self::Settings,
        life: &Lifecycle,
    ) -> impl Future<Output = anyhow::Result<Self>> + Send;
    /// Starts its background work (until `life.shutdown`) and hands over its routes.
    fn start(self, life: &Lifecycle) -> Running;
}

/// A binary's `serve`: builds the service, binds its listeners, serves until SIGTERM or
/// Ctrl-C, drains, and returns once everything has ended.
pub async fn main<S: Service>(settings: S::Settings) -> anyhow::Result<()> {
    let life = Lifecycle::new();
    life.drain_on(
        runtime::shutdown_on_signal(),
        S::drain_delay(&settings),
        S::WHILE_DRAINING,
    );
    let (public, admin) = S::addresses(&settings);
    let (public, admin) = (public.map(str::to_owned), admin.to_owned());
    // Told to stop while still starting (its dependencies slow to answer), it stops now: there
    // is nothing to drain, and waiting out the build could take the whole stop grace.
    let service = tokio::select! {
        built = S::build(settings, &life) => built?,
        () = life.draining.cancelled() => {
            tracing::info!(service = S::NAME, "told to stop while starting: stopped");
            return Ok(());
        }
    };
    let listeners = Listeners::bind(public.as_deref(), &admin).await?;
    serve(service, listeners, life).await
}

/// Serves a built service on bound listeners until `life.shutdown`, then ends it. Also how a
/// test runs one (on listeners it bound itself, its lifecycle a child of its own token).
pub async fn serve<S: Service>(
    service: S,
    listeners: Listeners,
    life: Lifecycle,
) -> anyhow::Result<()> {
    let running = service.start(&life);
    let stopped = |life: &Lifecycle| {
        let shutdown = life.shutdown.clone();
        async move { shutdown.cancelled().await }
    };
    tracing::info!(service = S::NAME, addr = %listeners.admin.local_addr()?, "admin listener listening");
    let admin = tokio::spawn(listener::serve(
        listeners.admin,
        running.admin,
        Limits::internal(),
        stopped(&life),
    ));
    if let (false, Some((router, limits))) = (listeners.public.is_empty(), running.public) {
        for listener in &listeners.public {
            tracing::info!(service = S::NAME, addr = %listener.local_addr()?, "listening");
        }
        listener::serve_all(listeners.public, router, limits, stopped(&life)).await?;
    } else {
        life.shutdown.cancelled().await;
    }
    admin.await??;
    running.ending.await?;
    tracing::info!(service = S::NAME, "stopped");
    Ok(())
}
