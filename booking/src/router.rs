//! Where every route of the booking service is mounted: the public listener's (reservations,
//! payments, the provider's webhook, probes) and the admin listener's (the ops API behind its
//! token, the console, the metrics scrape). Each documented route is registered through
//! `utoipa_axum` with its handler's description, and the two OpenAPI documents are collected
//! from the routes here ([`public_document`], [`ops_document`]), so a route cannot be served
//! undocumented and a document cannot name a route that is not served.

use std::sync::Arc;

use axum::extract::DefaultBodyLimit;
use axum::routing::get;
use axum::Router;
use floodgate_platform::openapi::{serve_document, strict_queries};
use floodgate_platform::secrets::NamedSecret;
use tower_http::trace::TraceLayer;
use utoipa::openapi::OpenApi as Document;
use utoipa::{Modify as _, OpenApi as _};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::openapi::{AtLeastOneSetting, OpsApi, PublicApi};
use crate::{admin, api, audit, listing, paying, probes, webhook, AppState, MAX_BODY_BYTES};

/// The booking API's routes.
pub fn public(state: AppState) -> Router {
    // No CORS: the page calls this API on its own origin (the CDN, or the gateway, routes the
    // booking paths here), so no other site's script is given a way in.
    let (documented, document) = documented_public();
    let router = documented
        .route("/openapi.json", serve_document(&document))
        .fallback(api::not_found)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(TraceLayer::new_for_http())
        .with_state(state);
    floodgate_platform::telemetry::instrument(router, "booking")
}

/// The admin listener's routes: the ops API, each route requiring `Authorization: Bearer <ops
/// token>`, its console and the metrics scrape.
pub fn admin(state: AppState, ops_tokens: Arc<Vec<NamedSecret>>) -> Router {
    // The token layer covers the ops routes, not the probes added after it.
    let (documented, document) = documented_ops(ops_tokens);
    let router = documented
        .route("/openapi.json", serve_document(&document))
        // The console holds no secret (the operator types the token into it), so it is served
        // without one; it exists only on this listener, never on a public path or a CDN.
        .route("/admin/console", get(admin::console_page))
        .route("/admin/console/console.js", get(admin::console_script))
        // The scrape target: on this listener only, never behind the CDN, and without the ops
        // token (Prometheus reads it from the operators' network).
        .route(
            "/metrics",
            get(|| async { floodgate_platform::telemetry::render() }),
        )
        .fallback(api::not_found)
        // Ops bodies are a few dozen bytes.
        .layer(DefaultBodyLimit::max(4 * 1024))
        .with_state(state);
    floodgate_platform::telemetry::instrument(router, "booking_admin")
}

/// The public API's document (docs/openapi/booking.json), as served and committed.
pub fn public_document() -> Document {
    documented_public().1
}

/// The ops API's document (docs/openapi/ops.json), as served and committed.
pub fn ops_document() -> Document {
    documented_ops(Default::default()).1
}

/// The public API's routes and their document; a query parameter an operation does not take
/// is refused (`floodgate_platform::openapi::strict_queries`).
fn documented_public() -> (Router<AppState>, Document) {
    let routes = OpenApiRouter::with_openapi(PublicApi::openapi())
        .routes(routes!(
            api::create_reservation,
            listing::buyer_reservations
        ))
        .routes(routes!(paying::get_reservation))
        .routes(routes!(paying::start_payment))
        .routes(routes!(webhook::receive_webhook))
        .routes(routes!(crate::catalog::served::catalog_document))
        .routes(routes!(probes::health))
        .routes(routes!(probes::ready_public));
    let (routes, mut document) = routes.split_for_parts();
    (strict_queries(routes, &mut document), document)
}

/// The ops API's routes, each behind one of `tokens` (`admin::require_ops_token`), with the
/// admin listener's probes, and their document.
fn documented_ops(tokens: Arc<Vec<NamedSecret>>) -> (Router<AppState>, Document) {
    let mut ops = OpenApiRouter::with_openapi(OpsApi::openapi())
        .routes(routes!(admin::sale_figures, admin::update_sale))
        .routes(routes!(admin::pause))
        .routes(routes!(admin::resume))
        .routes(routes!(admin::open_now))
        .routes(routes!(audit::list));
    // After the routes: their schemas are only in the document once they are registered.
    AtLeastOneSetting.modify(ops.get_openapi_mut());
    let token_check = axum::middleware::from_fn_with_state(tokens, admin::require_ops_token);
    let routes = ops
        .layer(token_check)
        .routes(routes!(probes::health))
        .routes(routes!(probes::ready));
    let (routes, mut document) = routes.split_for_parts();
    (strict_queries(routes, &mut document), document)
}
