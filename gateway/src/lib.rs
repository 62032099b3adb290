//! Floodgate's gateway: the waiting room. Clients hold a WebSocket, get a ticket, are pushed
//! their position, and are pushed an admission token when the admission controller's frontier
//! passes their ticket. Any number of gateways share one room through Redis.
//!
//! # Layout
//! - [`config`]: process settings (flags and environment).
//! - [`room`]: a sale's shared view on this gateway, its refresh task and the admission controller.
//! - [`session`]: one client's WebSocket session.
//! - [`error`]: JSON errors answered before an upgrade.
//! - [`limits`]: per-IP connection and join-rate limits.
//!
//! A gateway never decides a seat: it only hands out tickets and admission tokens.

pub mod config;
pub mod error;
pub mod limits;
pub mod room;
pub mod session;

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use axum::extract::rejection::QueryRejection;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::{ConnectInfo, Path, Query, State, WebSocketUpgrade};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use dashmap::DashMap;
use floodgate_contract::ids::check_sale_id;
use floodgate_contract::keys::Keys;
use floodgate_contract::token::TokenSigner;
use floodgate_contract::ws::MAX_CLIENT_MESSAGE;
use redis::aio::ConnectionManager;
use secrecy::ExposeSecret;
use serde::Deserialize;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower_http::services::ServeDir;
use tower_http::trace::TraceLayer;

pub use config::Config;
use error::ApiError;
use room::{read_view, Room, RoomDriver, Scripts};
use session::Session;

/// Shared state of a gateway; every field is a cheap handle.
#[derive(Clone)]
pub struct AppState {
    /// Redis: tickets, the frontier and the controller lease live there.
    pub redis: ConnectionManager,
    /// Key builder with this deployment's prefix.
    pub keys: Keys,
    /// The Lua scripts, loaded once.
    pub scripts: Scripts,
    /// Signs admission tokens; only gateways hold the private key.
    pub signer: Arc<TokenSigner>,
    /// The rooms this gateway has clients in, by sale id.
    pub rooms: Arc<DashMap<String, Arc<Room>>>,
    /// Settings, parsed once.
    pub config: Arc<Config>,
    /// This instance's name in the controller lease.
    pub instance_id: Arc<str>,
    /// Cancelled on shutdown: sessions tell their clients to reconnect, rooms stop.
    pub shutdown: CancellationToken,
    /// Tracks sessions and room tasks so shutdown can wait for them.
    pub tasks: TaskTracker,
    /// Per-IP connection counts and join rates.
    pub limits: Arc<limits::IpLimits>,
}

impl AppState {
    /// Validates `config` and connects to Redis.
    pub async fn connect(config: Config, shutdown: CancellationToken) -> anyhow::Result<Self> {
        floodgate_contract::runtime::metrics();
        let keys = config.redis.keys().map_err(anyhow::Error::msg)?;
        anyhow::ensure!(
            config.tick_ms > 0 && config.lease_ms >= 5 * config.tick_ms,
            "the lease must be at least five ticks long"
        );
        let signer = TokenSigner::from_base64(
            &config.token_key_id,
            config.token_signing_key.expose_secret(),
        )
        .context("FLOODGATE_TOKEN_SIGNING_KEY is not a base64url 32-byte seed")?;
        let redis = floodgate_contract::runtime::connect_redis(&config.redis.redis_url)
            .await
            .context("connecting to Redis")?;
        let instance_id = config
            .instance_id
            .clone()
            .unwrap_or_else(|| format!("gw-{}", uuid::Uuid::new_v4().simple()));
        let limits =
            limits::IpLimits::new(config.max_connections_per_ip, config.joins_per_sec_per_ip);
        Ok(Self {
            redis,
            keys,
            scripts: Scripts::default(),
            signer: Arc::new(signer),
            rooms: Arc::new(DashMap::new()),
            instance_id: Arc::from(instance_id),
            config: Arc::new(config),
            shutdown,
            tasks: TaskTracker::new(),
            limits,
        })
    }

    /// This gateway's room for `sale`, started on first use.
    fn room(&self, sale: &str) -> Arc<Room> {
        if let Some(room) = self.rooms.get(sale) {
            return room.clone();
        }
        self.rooms
            .entry(sale.to_owned())
            .or_insert_with(|| {
                let driver = RoomDriver {
                    sale: sale.to_owned(),
                    keys: self.keys.clone(),
                    redis: self.redis.clone(),
                    scripts: self.scripts.clone(),
                    instance_id: self.instance_id.clone(),
                    tick: Duration::from_millis(self.config.tick_ms),
                    lease: Duration::from_millis(self.config.lease_ms),
                };
                let (room, task) = driver.start(Default::default(), self.shutdown.clone());
                self.tasks.spawn(task);
                room
            })
            .clone()
    }
}

/// The gateway's routes.
pub fn router(state: AppState) -> Router {
    let mut router = Router::new()
        .route("/ws", get(join_queue))
        .route("/v1/sales/{sale}", get(sale_summary))
        .route(
            "/healthz",
            get(|| async { Json(serde_json::json!({ "status": "ok" })) }),
        )
        .route(
            "/metrics",
            get(|| async { floodgate_contract::runtime::metrics().render() }),
        );
    if let Some(dir) = &state.config.static_dir {
        router = router.fallback_service(ServeDir::new(dir));
    } else {
        router = router
            .fallback(|| async { ApiError::NotFound("not_found", "no such endpoint".into()) });
    }
    router.layer(TraceLayer::new_for_http()).with_state(state)
}

#[derive(Deserialize)]
pub struct JoinParams {
    sale: String,
}

/// `GET /ws?sale=<id>`: join a sale's waiting room.
///
/// The ticket is taken before the upgrade so that an unknown sale or an unreachable Redis is a
/// plain JSON HTTP error the client can read, not a socket that opens and dies.
#[tracing::instrument(skip_all)]
pub async fn join_queue(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<std::net::SocketAddr>,
    params: Result<Query<JoinParams>, QueryRejection>,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    let Query(JoinParams { sale }) = params.map_err(|_| {
        ApiError::BadRequest(
            "sale_missing",
            "name the sale to join: /ws?sale=<sale id>".into(),
        )
    })?;
    check_sale_id(&sale).map_err(|_| unknown_sale())?;
    let upgrade = upgrade.map_err(|e| {
        ApiError::UpgradeRequired(
            "websocket_required",
            format!("this endpoint speaks WebSocket only: {e}"),
        )
    })?;

    // Limits before any Redis work: a flood from one address costs a map lookup.
    let slot = state.limits.admit(peer.ip()).map_err(|e| match e {
        limits::LimitError::TooManyConnections => ApiError::TooManyRequests(
            "too_many_connections",
            "too many open connections from this address".into(),
        ),
        limits::LimitError::JoiningTooFast => ApiError::TooManyRequests(
            "join_rate_limited",
            "joining too fast from this address; retry in a second".into(),
        ),
    })?;

    let keys = state.keys.sale(&sale);
    let mut conn = state.redis.clone();
    let joined: Vec<i64> = state
        .scripts
        .join
        .key(keys.meta())
        .key(keys.seq())
        .invoke_async(&mut conn)
        .await?;
    let [ticket, opens_at_ms] = joined[..] else {
        return Err(unknown_sale());
    };
    metrics::counter!("floodgate_tickets_issued_total").increment(1);
    let session = Session {
        room: state.room(&sale),
        sale,
        ticket: ticket as u64,
        opens_at_ms,
        signer: state.signer.clone(),
        position_interval: Duration::from_millis(state.config.position_interval_ms),
        heartbeat: Duration::from_millis(state.config.heartbeat_ms),
        idle_timeout: Duration::from_millis(state.config.idle_timeout_ms),
        send_timeout: Duration::from_millis(state.config.send_timeout_ms),
        shutdown: state.shutdown.clone(),
        _connection: slot,
    };
    let tasks = state.tasks.clone();
    Ok(upgrade
        .max_message_size(MAX_CLIENT_MESSAGE)
        .max_frame_size(MAX_CLIENT_MESSAGE)
        .on_upgrade(move |socket| tasks.track_future(session.run(socket)))
        .into_response())
}

/// `GET /v1/sales/{sale}`: the waiting room's public figures (opening, rate, queue, pools).
pub async fn sale_summary(
    State(state): State<AppState>,
    Path(sale): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    check_sale_id(&sale).map_err(|_| unknown_sale())?;
    let keys = state.keys.sale(&sale);
    let mut conn = state.redis.clone();
    let pools: Option<String> = redis::cmd("HGET")
        .arg(keys.meta())
        .arg("pools")
        .query_async(&mut conn)
        .await?;
    let pools = pools.ok_or_else(unknown_sale)?;
    let view = read_view(&mut conn, &keys).await?;
    Ok(Json(serde_json::json!({
        "sale": sale,
        "opens_at_ms": view.opens_at_ms,
        "admission_rate": view.rate,
        "max_seats": view.max_seats,
        "tickets_issued": view.issued,
        "frontier": view.frontier,
        "pools": pools.split(',').filter(|p| !p.is_empty()).collect::<Vec<_>>(),
    })))
}

fn unknown_sale() -> ApiError {
    ApiError::NotFound("unknown_sale", "no such sale is open for queueing".into())
}

/// How long shutdown waits for sessions to say goodbye before the process exits anyway.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// Serves until `shutdown` (the same token given to [`AppState::connect`]) is cancelled; then
/// every session closes with "going away, reconnect" and the rooms stop.
pub async fn run(listener: TcpListener, state: AppState) -> std::io::Result<()> {
    let shutdown = state.shutdown.clone();
    let tasks = state.tasks.clone();
    let limits = state.limits.clone();
    let pruning = shutdown.clone();
    tokio::spawn(async move {
        let mut every = tokio::time::interval(Duration::from_secs(60));
        loop {
            tokio::select! {
                _ = pruning.cancelled() => break,
                _ = every.tick() => limits.prune(),
            }
        }
    });
    let app = router(state).into_make_service_with_connect_info::<std::net::SocketAddr>();
    axum::serve(listener, app)
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await?;
    tasks.close();
    if tokio::time::timeout(DRAIN_TIMEOUT, tasks.wait())
        .await
        .is_err()
    {
        tracing::warn!("some sessions did not close in time");
    }
    Ok(())
}
