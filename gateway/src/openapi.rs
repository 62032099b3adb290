//! The gateway's OpenAPI 3.1 document (docs/openapi/gateway.json), made from its handlers: each
//! documented route is registered through `utoipa_axum` together with its description, so a
//! route cannot be served undocumented. The WebSocket session behind `GET /ws` is described in
//! docs/asyncapi.yaml; the booking paths the gateway forwards are in docs/openapi/booking.json.

use floodgate_platform::refusals;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::AppState;

pub use floodgate_platform::openapi::serve_document;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Floodgate gateway API",
        description = "The waiting room's public side: join a sale's queue over WebSocket \
                       (`GET /ws`, the session itself in docs/asyncapi.yaml), read a sale's \
                       figures and live seat counts, take the bot check's puzzle, and check \
                       the pre-queue lottery's draw. The gateway also forwards the booking \
                       API's paths (docs/openapi/booking.json) to the booking service. Every \
                       4xx and 5xx carries `{\"error\": <code>, \"message\": <text>}`.",
        license(name = "Apache-2.0", identifier = "Apache-2.0")
    ),
    tags(
        (name = "waiting room", description = "Joining a sale and what anyone may read about it (docs/protocol.md 1)."),
        (name = "draw", description = "The pre-queue lottery's public record, to check it (docs/protocol.md 1.6)."),
        (name = "probes", description = "Liveness and readiness."),
    ),
    components(schemas(floodgate_protocol::api::ErrorBody))
)]
struct GatewayApi;

/// The gateway's documented public routes (state is given by the caller).
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(GatewayApi::openapi())
        .routes(routes!(crate::join::join_queue))
        .routes(routes!(crate::summary::sale_summary))
        .routes(routes!(crate::seats::seats))
        .routes(routes!(crate::seats::seats_file))
        .routes(routes!(crate::door::challenge))
        .routes(routes!(crate::standing::place))
        .routes(routes!(crate::draw::draw))
        .routes(routes!(crate::draw::nonces))
        .routes(routes!(crate::draw::batches))
        .routes(routes!(crate::draw::proof))
        .routes(routes!(crate::probes::health))
        .routes(routes!(crate::probes::ready_public))
}

/// The documented routes and their document, as served and committed; a query parameter an
/// operation does not take is refused (`floodgate_platform::openapi::strict_queries`).
pub fn documented() -> (axum::Router<AppState>, utoipa::openapi::OpenApi) {
    let (routes, mut document) = routes().split_for_parts();
    let routes = floodgate_platform::openapi::strict_queries(routes, &mut document);
    (routes, document)
}

/// The document, as served and committed.
pub fn document() -> utoipa::openapi::OpenApi {
    documented().1
}

refusals!(
    /// What `GET /ws` refuses with, before any upgrade (a plain HTTP answer a client can read).
    JoinRefusals {
        400 => "No sale named, a bad draw nonce, a resume token in the URL, or a resume token for another sale.",
        401 => "The resume token or the identity token is not genuine, or expired.",
        403 => "The bot check failed, expired or was reused, or the resume token's place is another buyer's.",
        404 => "No such sale is armed, or the resume token's ticket was never handed out.",
        410 => "The resume token's ticket is dead (its grace ran out, or the sale ended): join without it.",
        426 => "Not a WebSocket upgrade.",
        429 => "Too many connections, or joins too fast, from this address.",
        503 => "The gateway is full or draining (Retry-After spreads the retries), or Redis is unavailable.",
    }
);

refusals!(
    /// What a place's standing refuses with.
    PlaceRefusals {
        400 => "The resume token is for another sale.",
        401 => "No resume token, or it (or the identity token) is not genuine.",
        403 => "The place is another buyer's.",
        404 => "No such sale is armed, or no such ticket.",
        410 => "The ticket is dead (its grace ran out, or the sale ended): join again.",
        503 => "Redis is unavailable; retry.",
    }
);

refusals!(
    /// What a sale's public reads refuse with.
    SaleRefusals {
        404 => "No such sale is armed.",
        503 => "Redis is unavailable, or the record is damaged; retry.",
    }
);

refusals!(
    /// What a page of the draw's record refuses with.
    PageRefusals {
        400 => "from or count is out of range.",
        404 => "No such sale is armed.",
        429 => "This address asks for the record too fast (`draw_rate_limited`); retry after Retry-After.",
        503 => "This gateway's budget of reads of the record is spent for now (`draw_busy`), Redis is unavailable, or the record is damaged; retry after Retry-After.",
    }
);

refusals!(
    /// What a ticket's proof refuses with.
    ProofRefusals {
        400 => "ticket is not a ticket number from 1.",
        404 => "No such sale is armed, or the ticket did not join the pre-queue.",
        429 => "This address asks for the record too fast (`draw_rate_limited`); retry after Retry-After.",
        503 => "This gateway's budget of reads of the record is spent for now (`draw_busy`), Redis is unavailable, or the record is damaged; retry after Retry-After.",
    }
);
