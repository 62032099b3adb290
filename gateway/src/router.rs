//! Where every route of the gateway is mounted: the public listener's (the join, a sale's
//! figures and seats, the bot check's puzzle, the draw, the booking paths it forwards, the page
//! and its assets) and the admin listener's (metrics, probes). Each documented route is
//! registered through `utoipa_axum` with its handler's description, and the OpenAPI document is
//! collected from the routes here ([`document`]).

use axum::routing::get;
use axum::Router;
use floodgate_platform::openapi::{serve_document, strict_queries};
use floodgate_protocol::api::code;
use tower_http::services::ServeDir;
use tower_http::trace::TraceLayer;
use utoipa::OpenApi as _;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::error::ApiError;
use crate::openapi::GatewayApi;
use crate::AppState;
use crate::{assets, bookings, cache, door, draw, join, probes, seats, standing, summary};

/// The gateway's routes.
pub fn public(state: AppState) -> Router {
    let policy = state.assets.policy.clone();
    // Every route of the gateway's own is registered with its OpenAPI description
    // (docs/openapi/gateway.json); the booking paths it forwards are the booking service's.
    let (documented, document) = documented();
    let mut router = documented
        .route("/openapi.json", serve_document(&document))
        .route("/v1/sales/{sale}/{file}", get(seats::no_such_file))
        .route(
            "/v1/sales/{sale}/reservations",
            axum::routing::post(bookings::forward).get(bookings::forward),
        )
        .route("/v1/sales/{sale}/reservations/{id}", get(bookings::forward))
        .route(
            "/v1/sales/{sale}/reservations/{id}/payment",
            axum::routing::post(bookings::forward),
        );
    if let Some(dir) = &state.config.static_dir {
        router = router
            .route("/", get(assets::index))
            .route("/index.html", get(assets::index))
            .route("/assets/{name}", get(assets::asset));
        // Precompressed siblings (`.br`, `.gz`, as `floodgate-booking sale publish` writes them)
        // are served as is; caching headers and ETags come from `static_headers`.
        let files = ServeDir::new(dir).precompressed_br().precompressed_gzip();
        router = router.fallback_service(
            tower::ServiceBuilder::new()
                .layer(axum::middleware::from_fn(cache::static_headers))
                .service(files),
        );
    } else {
        router =
            router.fallback(|| async { ApiError::new(code::NOT_FOUND, "no such endpoint".into()) });
    }
    let router = router
        // Booking bodies are a few dozen bytes (the booking service's own limit is 4 KiB).
        .layer(axum::extract::DefaultBodyLimit::max(4 * 1024))
        .method_not_allowed_fallback(|| async {
            ApiError::new(
                code::METHOD_NOT_ALLOWED,
                "this endpoint does not take that method".into(),
            )
        })
        .layer(TraceLayer::new_for_http())
        .with_state(state);
    floodgate_platform::telemetry::instrument(assets::with_page_headers(router, policy), "gateway")
}

/// The admin listener's routes: what operators and Prometheus read, never the public.
pub fn admin(state: AppState) -> Router {
    let router = Router::new()
        .route(
            "/metrics",
            get(|| async { floodgate_platform::telemetry::render() }),
        )
        .route("/healthz", get(probes::health))
        .route("/readyz", get(probes::ready))
        .fallback(|| async { ApiError::new(code::NOT_FOUND, "no such endpoint".into()) })
        .with_state(state);
    floodgate_platform::telemetry::instrument(router, "gateway_admin")
}

/// The gateway's own documented routes and their document (docs/openapi/gateway.json); a query
/// parameter an operation does not take is refused (`floodgate_platform::openapi::strict_queries`).
/// The booking paths it forwards are the booking service's, documented there.
fn documented() -> (Router<AppState>, utoipa::openapi::OpenApi) {
    let routes = OpenApiRouter::with_openapi(GatewayApi::openapi())
        .routes(routes!(join::join_queue))
        .routes(routes!(summary::sale_summary))
        .routes(routes!(seats::seats))
        .routes(routes!(seats::seats_file))
        .routes(routes!(door::challenge))
        .routes(routes!(standing::place))
        .routes(routes!(draw::draw))
        .routes(routes!(draw::nonces))
        .routes(routes!(draw::batches))
        .routes(routes!(draw::proof))
        .routes(routes!(probes::health))
        .routes(routes!(probes::ready_public));
    let (routes, mut document) = routes.split_for_parts();
    (strict_queries(routes, &mut document), document)
}

/// The document, as served and committed.
pub fn document() -> utoipa::openapi::OpenApi {
    documented().1
}
