//! Floodgate's gateway: the waiting room. Clients hold a WebSocket, get a ticket, are pushed
//! their position, and are pushed an admission token when the admission controller's frontier
//! passes their ticket. Any number of gateways share one room through Redis.
//!
//! # Layout
//! - [`config`]: process settings (flags and environment).
//! - `join`: `GET /ws`, from the request's checks and limits to the ticket and the upgrade;
//!   `upgrade`: the WebSocket handshake answered here, and the ticket written before the
//!   WebSocket layer takes the connection over; `frame_watch`: the kind of each frame the client
//!   sends, followed on the way in, so an oversized control frame is closed 1002 (RFC 6455 5.5).
//! - `standing`: `GET /v1/sales/{sale}/place`, where a place stands, by its resume token (for
//!   an app in the background).
//! - [`session`]: one client's WebSocket session; [`sale`]: what the sessions of one sale share
//!   (its scripts' scope, the room, the signed-in sessions).
//! - [`room`]: a sale's shared view on this gateway, its refresh task and the admission
//!   controller (`room::view`, `room::driver`, `room::controller`).
//! - `rooms`: the rooms this gateway holds, one per sale: started on first need for an armed
//!   sale, retired when idle.
//! - [`scripts`]: every Redis script and pipelined read of the gateway, each with a typed
//!   answer: the tickets (join, resume, leave) and the room's tick.
//! - [`places`]: dead places and admission batches, as the room learns them from Redis.
//! - [`limits`]: the connection budget and per-IP connection and join-rate limits; `budget`: how
//!   many sessions the budget is (the open files and the memory limit allow); who a request is
//!   from (the peer, or the client a trusted proxy forwards for) is `floodgate_platform::clients`.
//! - `records`: signed-in buyers' records written again after a Redis failover.
//! - [`router`]: where every route of both listeners is mounted, and the OpenAPI document
//!   collected from them; [`openapi`]: what the document says beside the routes (its title,
//!   each operation's refusals).
//! - `memory`: freed memory given back to the system after a join ramp.
//! - [`summary`], [`seats`], `draw`: a sale's public figures, live seat counts and the
//!   pre-queue draw's public record; `draw_guard`: what that record may cost a stranger;
//!   `guards`: what the other public paths may cost (per address, per place, a Redis budget).
//! - [`assets`] and `cache`: the browser client's page and hashed assets, the headers that keep
//!   it to its own origin, and the static folder's caching headers (the encodings and ETags
//!   they share with the seat counts are `floodgate_platform::cache`'s).
//! - [`bookings`]: the booking paths on the page's own origin, passed to the booking service.
//! - [`door`]: who is joining (the buyer's identity) and the bot check at the door.
//! - [`error`]: JSON errors answered before an upgrade.
//! - [`probes`]: `/healthz` and `/readyz` (unready from the moment the gateway is told to stop);
//!   `service`: the gateway as `floodgate_platform::service` runs it (its background work, its
//!   listeners, its sessions' goodbye).
//!
//! A gateway never decides a seat: it only hands out tickets and admission tokens.

pub mod assets;
pub mod bookings;
pub mod budget;
mod cache;
pub mod config;
pub mod door;
pub mod error;
pub mod frame_watch;
mod join;
pub mod limits;
mod memory;

/// The gateway's allocator in this crate's own tests, as `main.rs` sets it for the binary: what
/// `memory.rs` gives back is jemalloc's.
#[cfg(test)]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;
pub mod openapi;
pub mod places;
pub mod probes;
mod records;
pub mod room;
mod rooms;
pub mod router;
pub mod sale;
pub mod scripts;
pub mod seats;
mod service;
pub mod session;
mod standing;
pub mod summary;
mod upgrade;

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use anyhow::Context as _;
use dashmap::DashMap;
use floodgate_platform::clients::Clients;
use floodgate_platform::identity::IdentityVerifier;
use floodgate_platform::keys::Keys;
use floodgate_platform::origins::AllowedOrigins;
use floodgate_platform::runtime::RedisConn;
use floodgate_platform::service::Lifecycle;
use floodgate_protocol::challenge::ProofOfWork;
use floodgate_protocol::resume::ResumeKey;
use floodgate_protocol::token::TokenSigner;
use secrecy::ExposeSecret;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use config::Config;
pub use service::Gateway;

mod draw;
mod draw_guard;
mod guards;

/// Shared state of a gateway, behind one `Arc`: axum clones the state for every request (each
/// extractor and middleware that takes it), and one reference count is cheaper than a score
/// of them (the join's profile: 1.8 % of a join's CPU went to cloning and dropping the fields).
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

/// What [`AppState`] shares; every field is a handle.
pub struct Shared {
    /// Redis: tickets, the frontier and the controller lease live there.
    pub redis: RedisConn,
    /// Key builder with this deployment's prefix.
    pub keys: Keys,
    /// Signs admission tokens; only gateways hold the private key.
    pub signer: Arc<TokenSigner>,
    /// The rooms this gateway has clients in, by sale id, with what their sessions share.
    pub rooms: Arc<DashMap<String, Arc<sale::Context>>>,
    /// Settings, parsed once.
    pub config: Arc<Config>,
    /// This instance's name in the controller lease.
    pub instance_id: Arc<str>,
    /// Cancelled on shutdown: sessions tell their clients to reconnect, rooms stop.
    pub shutdown: CancellationToken,
    /// Cancelled first when the process is told to stop: `/readyz` turns unready and no join is
    /// taken, while sessions go on for the drain delay (`floodgate_platform::service`). A child
    /// of `shutdown`, so cancelling that cancels this too.
    pub draining: CancellationToken,
    /// Tracks sessions and room tasks so shutdown can wait for them.
    pub tasks: TaskTracker,
    /// Per-IP connection counts and join rates.
    pub limits: Arc<limits::IpLimits>,
    /// The gateway's connection budget.
    pub budget: Arc<budget::Budget>,
    /// Makes and checks resume tokens.
    pub resume: Arc<ResumeKey>,
    /// Numbers this gateway's sessions (session ids are `<instance>/<n>`).
    pub sessions: Arc<AtomicU64>,
    /// The cacheable seat-count snapshots.
    pub seats: Arc<seats::SeatBoard>,
    /// The browser client's page and hashed assets.
    pub assets: Arc<assets::Assets>,
    /// Where the page's booking requests go, if this gateway passes them on.
    pub booking: Option<bookings::BookingRoute>,
    /// Checks buyers' identity tokens (`None`: no issuer configured).
    pub identity: Option<Arc<IdentityVerifier>>,
    /// Hands out and checks the proof-of-work puzzles.
    pub pow: Arc<ProofOfWork>,
    /// What the draw's public record may cost (crate::draw_guard).
    pub draw: Arc<draw_guard::DrawGuard>,
    /// The pages allowed to open the waiting room and book from a browser.
    pub origins: Arc<AllowedOrigins>,
    /// Who a request is from, as the per-address limits count it.
    pub clients: Arc<Clients>,
    /// What asking where a place stands may cost (crate::guards).
    pub place: Arc<guards::PlaceGuard>,
    /// What asking for the puzzles of sales not open here may cost one address (crate::guards).
    pub challenges: Arc<guards::Guard>,
    /// What asking about sales not open here (their figures, their seats) may cost one address.
    pub lookups: Arc<guards::Guard>,
    /// What taking places back may cost the sale's slot, and one address's share (crate::guards).
    pub resumes: Arc<guards::Guard>,
    /// Redis' latest answer to `/readyz`, asked at most once a second whoever asks.
    pub checks: Arc<floodgate_platform::readiness::RememberedChecks>,
}

impl axum::extract::FromRef<AppState> for Arc<Clients> {
    fn from_ref(state: &AppState) -> Self {
        state.clients.clone()
    }
}

impl axum::extract::FromRef<AppState> for Arc<AllowedOrigins> {
    fn from_ref(state: &AppState) -> Self {
        state.origins.clone()
    }
}

/// What each public path may cost a stranger (crate::guards, crate::draw_guard), as set.
struct PathGuards {
    place: Arc<guards::PlaceGuard>,
    challenges: Arc<guards::Guard>,
    lookups: Arc<guards::Guard>,
    resumes: Arc<guards::Guard>,
    draw: Arc<draw_guard::DrawGuard>,
}

impl PathGuards {
    fn new(config: &Config) -> Self {
        Self {
            place: Arc::new(guards::PlaceGuard::new(
                config.place_requests_per_sec_per_ip,
                config.place_reads_per_sec,
                config.place_every,
            )),
            challenges: Arc::new(guards::challenges(config.challenges_per_sec_per_ip)),
            lookups: Arc::new(guards::lookups(config.challenges_per_sec_per_ip)),
            resumes: Arc::new(guards::resumes(config.resumes_per_sec)),
            draw: Arc::new(draw_guard::DrawGuard::new(
                config.draw_reads_per_sec,
                config.draw_requests_per_sec_per_ip,
            )),
        }
    }
}

impl AppState {
    /// Validates `config` and connects to Redis.
    pub async fn connect(config: Config, life: &Lifecycle) -> anyhow::Result<Self> {
        floodgate_platform::runtime::metrics();
        let keys = config.redis.keys().map_err(anyhow::Error::msg)?;
        config.check()?;
        let signer = TokenSigner::from_base64(
            &config.token_key_id,
            config.token_signing_key.expose_secret(),
        )
        .context("FLOODGATE_TOKEN_SIGNING_KEY is not a base64url 32-byte seed")?;
        let redis = floodgate_platform::runtime::connect_redis(&config.redis)
            .await
            .context("connecting to Redis")?;
        // Unique per run even when the instance is named: a restarted gateway must not be taken
        // for its previous life, whose sessions the sweep has to hand over to the grace period.
        let run = &uuid::Uuid::new_v4().simple().to_string()[..8];
        let instance_id = match &config.instance_id {
            Some(name) => format!("{name}.{run}"),
            None => format!("gw-{run}"),
        };
        let limits = limits::IpLimits::with_ipv6_prefix(
            config.max_connections_per_ip,
            config.joins_per_sec_per_ip,
            config.clients.ipv6_prefix,
        );
        let sessions = config
            .max_sessions
            .unwrap_or_else(|| budget::sessions(raise_open_files_limit(), budget::memory_limit()));
        metrics::gauge!("floodgate_ws_session_budget").set(sessions as f64);
        let budget = budget::Budget::new(sessions);
        let resume = signer.resume_key();
        let pow = signer.challenge_key();
        let identity = config
            .identity
            .verifier()
            .await
            .map_err(anyhow::Error::msg)?;
        let assets = assets::Assets::for_config(&config)?;
        let booking = config
            .booking_url
            .as_deref()
            .map(bookings::BookingRoute::new)
            .transpose()?;
        let origins = Arc::new(AllowedOrigins::from_args(&config.origins)?);
        let clients = Arc::new(Clients::new(&config.clients));
        let PathGuards {
            place,
            challenges,
            lookups,
            resumes,
            draw,
        } = PathGuards::new(&config);
        Ok(Self(Arc::new(Shared {
            redis,
            keys,
            signer: Arc::new(signer),
            rooms: Arc::new(DashMap::new()),
            instance_id: Arc::from(instance_id),
            config: Arc::new(config),
            draining: life.draining.clone(),
            shutdown: life.shutdown.clone(),
            tasks: TaskTracker::new(),
            limits,
            budget,
            resume: Arc::new(resume),
            sessions: Arc::new(AtomicU64::new(0)),
            seats: Arc::new(seats::SeatBoard::default()),
            assets: Arc::new(assets),
            booking,
            identity,
            pow: Arc::new(pow),
            draw,
            origins,
            clients,
            place,
            challenges,
            lookups,
            resumes,
            checks: Arc::default(),
        })))
    }
}

pub use floodgate_platform::runtime::raise_open_files_limit;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_open_files_limit_is_raised_to_the_hard_limit() {
        let limit = raise_open_files_limit();
        let (soft, hard) = rlimit::getrlimit(rlimit::Resource::NOFILE).unwrap();
        assert_eq!(soft, limit);
        assert!(soft == hard || hard == rlimit::INFINITY, "{soft} of {hard}");
    }
}
