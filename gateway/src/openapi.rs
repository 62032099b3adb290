//! What the gateway's OpenAPI 3.1 document (docs/openapi/gateway.json) says beside its routes:
//! the title and tags, and each operation's refusals. The routes are mounted in
//! [`crate::router`], each registered through `utoipa_axum` together with its handler's
//! description, so a route cannot be served undocumented. The WebSocket session behind `GET /ws` is described in
//! docs/asyncapi.yaml; the booking paths the gateway forwards are in docs/openapi/booking.json.

use floodgate_platform::refusals;
use utoipa::OpenApi;

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
pub struct GatewayApi;

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
