//! What the gateway's OpenAPI 3.1 document (docs/openapi/gateway.json) says beside its routes:
//! the title and tags, and each operation's refusals. The routes are mounted in
//! [`crate::router`], each registered through `utoipa_axum` together with its handler's
//! description, so a route cannot be served undocumented. The WebSocket session behind `GET /ws` is described in
//! docs/asyncapi.yaml; the booking paths the gateway forwards are in docs/openapi/booking.json.

use floodgate_platform::refusals;
use floodgate_protocol::api::code;
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

/// What reading the draw's record may refuse with, whichever part is read.
const DRAW_READS: &[&str] = &[
    code::DRAW_RATE_LIMITED,
    code::DRAW_BUSY,
    code::REDIS_UNAVAILABLE,
    code::DRAW_UNAVAILABLE,
];

refusals!(
    /// What `GET /ws` refuses with, before any upgrade (a plain HTTP answer a client can read).
    JoinRefusals [
        code::SALE_MISSING,
        code::BAD_NONCE,
        code::RESUME_IN_URL,
        code::RESUME_OTHER_SALE,
        code::RESUME_INVALID,
        code::IDENTITY,
        code::CHALLENGE_REQUIRED,
        code::CHALLENGE_FAILED,
        code::CHALLENGE_EXPIRED,
        code::CHALLENGE_REUSED,
        code::CHALLENGE_UNAVAILABLE,
        code::RESUME_OTHER_BUYER,
        code::UNKNOWN_SALE,
        code::UNKNOWN_TICKET,
        code::TICKET_EXPIRED,
        code::HOST_MISSING,
        code::WEBSOCKET_REQUIRED,
        code::ORIGIN_FORBIDDEN,
        code::TOO_MANY_CONNECTIONS,
        code::JOIN_RATE_LIMITED,
        code::GATEWAY_FULL,
        code::RESUME_BUSY,
        code::GATEWAY_DRAINING,
        code::REDIS_UNAVAILABLE,
    ]
);

refusals!(
    /// What a place's standing refuses with.
    PlaceRefusals [
        code::PLACE_RATE_LIMITED,
        code::RESUME_OTHER_SALE,
        code::RESUME_REQUIRED,
        code::RESUME_INVALID,
        code::IDENTITY,
        code::RESUME_OTHER_BUYER,
        code::UNKNOWN_SALE,
        code::UNKNOWN_TICKET,
        code::TICKET_EXPIRED,
        code::REDIS_UNAVAILABLE,
    ]
);

refusals!(
    /// What the draw's record refuses with.
    DrawRefusals [
        code::UNKNOWN_SALE,
        DRAW_READS,
    ]
);

refusals!(
    /// What a sale's figures and seat counts refuse with.
    LookupRefusals [
        code::SALE_LOOKUP_RATE_LIMITED,
        code::UNKNOWN_SALE,
        code::REDIS_UNAVAILABLE,
    ]
);

refusals!(
    /// What a request for a puzzle refuses with.
    ChallengeRefusals [
        code::CHALLENGE_RATE_LIMITED,
        code::UNKNOWN_SALE,
        code::REDIS_UNAVAILABLE,
    ]
);

refusals!(
    /// What a page of the draw's record refuses with.
    PageRefusals [
        code::BAD_PAGE,
        code::UNKNOWN_SALE,
        DRAW_READS,
    ]
);

refusals!(
    /// What a ticket's proof refuses with.
    ProofRefusals [
        code::BAD_TICKET,
        code::UNKNOWN_SALE,
        code::NOT_IN_PREQUEUE,
        DRAW_READS,
    ]
);
