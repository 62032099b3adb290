//! What the booking service's OpenAPI 3.1 documents say beside their routes: each document's
//! title, tags and security schemes, the path parameters, and each operation's refusals. The
//! routes themselves are mounted in [`crate::router`], each through `utoipa_axum` together with
//! its handler's `#[utoipa::path]` description, so a route cannot be served without being
//! documented, and each body's schema is derived from the type the handler returns. Two
//! documents, one per listener:
//!
//! - the public API (reservations, payments, the provider's webhook, probes), served at
//!   `/openapi.json` on the public listener;
//! - the ops API, served at `/openapi.json` on the admin listener only (an operator's network).
//!
//! Committed copies live in `docs/openapi/` (a test fails when they differ from what the code
//! makes, and says how to refresh them).

use floodgate_protocol::api::code;
use utoipa::openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{self, RefOr};
use utoipa::{IntoParams, Modify, OpenApi};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Floodgate booking API",
        description = "Reserve the seats an admission token lets you take, read and pay for a \
                       reservation, and (for the payment provider) report how payments ended. \
                       Every 4xx and 5xx carries `{\"error\": <code>, \"message\": <text>}`; \
                       clients branch on `error` (docs/protocol.md lists every code). A 503 \
                       decided nothing and comes with `Retry-After`.",
        license(name = "Apache-2.0", identifier = "Apache-2.0")
    ),
    tags(
        (name = "reservations", description = "Holding seats with an admission token (docs/protocol.md 2)."),
        (name = "payments", description = "Paying for a hold; the provider's webhook."),
        (name = "catalog", description = "The sales and their trains, classes and fares, as the page reads them (docs/protocol.md 1.9), for a CDN to cache."),
        (name = "probes", description = "Liveness and readiness, for load balancers and kubelets."),
    ),
    modifiers(&SecuritySchemes),
    components(schemas(floodgate_protocol::api::ErrorBody))
)]
pub struct PublicApi;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Floodgate ops API",
        description = "Live figures of a sale and the settings operators change during a rush \
                       (admission rate, active cap, bot check, pause, resume, open now), each \
                       change recorded in the sale's audit trail. Served on the booking \
                       service's admin listener only; every call needs an ops token.",
        license(name = "Apache-2.0", identifier = "Apache-2.0")
    ),
    tags(
        (name = "ops", description = "A sale's live figures and settings (docs/protocol.md, Ops API)."),
        (name = "probes", description = "Liveness and readiness."),
    ),
    modifiers(&SecuritySchemes),
    components(schemas(floodgate_protocol::api::ErrorBody))
)]
pub struct OpsApi;

/// A sale update names at least one setting (`SaleUpdate::read` refuses an empty one).
pub struct AtLeastOneSetting;

impl Modify for AtLeastOneSetting {
    fn modify(&self, document: &mut openapi::OpenApi) {
        let schemas = document
            .components
            .as_mut()
            .map(|components| &mut components.schemas);
        if let Some(RefOr::T(openapi::Schema::Object(update))) =
            schemas.and_then(|schemas| schemas.get_mut("SaleUpdate"))
        {
            update.min_properties = Some(1);
        }
    }
}

pub use floodgate_platform::openapi::SalePath;

/// How callers prove who they are. Every scheme but the webhook's is a bearer token in
/// `Authorization`: which one an operation takes is in its `security`.
struct SecuritySchemes;

impl Modify for SecuritySchemes {
    fn modify(&self, document: &mut openapi::OpenApi) {
        let components = document.components.get_or_insert_with(Default::default);
        let bearer = |format: &str, description: &str| {
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format(format)
                    .description(Some(description))
                    .build(),
            )
        };
        components.add_security_scheme(
            "admission",
            bearer(
                "floodgate admission token",
                "The admission token the waiting room gave (`admitted` message); one \
                 reservation per token.",
            ),
        );
        components.add_security_scheme(
            "reservation_secret",
            bearer(
                "reservation secret",
                "The `secret` of the reservation's 201, given once.",
            ),
        );
        components.add_security_scheme(
            "buyer_identity",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
                "Floodgate-Identity",
                "The buyer's identity token (a JWT from the operator's sign-in).",
            ))),
        );
        components.add_security_scheme(
            "ops",
            bearer(
                "ops token",
                "One of the tokens in FLOODGATE_OPS_TOKEN; its name is recorded with every change.",
            ),
        );
        components.add_security_scheme(
            "webhook_signature",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
                "Floodgate-Signature",
                "`t=<unix seconds>,v1=<hex HMAC-SHA256 of \"<t>.<raw body>\">` with the webhook \
                 secret; several v1 entries are allowed during a rotation.",
            ))),
        );
    }
}

/// The `{sale}` and `{id}` path parameters of one reservation's routes.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)] // Read by the documents only.
pub struct ReservationPath {
    /// The sale's id: 1 to 64 ASCII letters, digits, `-`, `_` or `.`.
    #[param(min_length = 1, max_length = 64, pattern = r"^[A-Za-z0-9._-]{1,64}$")]
    sale: String,
    /// The reservation's id, as its 201 gave it.
    id: String,
}

floodgate_platform::refusals!(
    /// What `POST /v1/sales/{sale}/reservations` refuses with.
    ReserveRefusals [
        code::ORIGIN_FORBIDDEN,
        code::BOOKING_RATE_LIMITED,
        code::RESERVATION_RATE_LIMITED,
        code::IDEMPOTENCY_KEY_MISSING,
        code::IDEMPOTENCY_KEY_INVALID,
        code::BAD_BODY,
        code::BAD_JSON,
        code::TOKEN_MISSING,
        code::TOKEN_MALFORMED,
        code::TOKEN_INVALID,
        code::TOKEN_EXPIRED,
        code::IDENTITY,
        code::TOKEN_WRONG_SALE,
        code::BUYER_MISMATCH,
        code::UNKNOWN_SALE,
        code::UNKNOWN_POOL,
        code::SOLD_OUT,
        code::RESERVATION_ENDED,
        code::SALE_ENDED,
        code::TOKEN_SPENT,
        code::BUYER_LIMIT,
        code::BODY_TOO_LARGE,
        code::INVALID_REQUEST,
        code::INVALID_POOL,
        code::INVALID_SEATS,
        code::IDEMPOTENCY_KEY_REUSED,
        code::REDIS_UNAVAILABLE,
        code::BROKER_UNAVAILABLE,
        code::REPLICA_UNAVAILABLE,
        code::POOL_UNAVAILABLE,
        code::SALE_UNAVAILABLE,
        code::CATALOG_UNAVAILABLE,
        code::RESERVATION_LATE,
        code::RESERVATION_UNSETTLED,
    ]
);

floodgate_platform::refusals!(
    /// What `GET /v1/sales/{sale}/reservations` refuses with.
    ListRefusals [
        code::ORIGIN_FORBIDDEN,
        code::BOOKING_RATE_LIMITED,
        code::HOLDER_RATE_LIMITED,
        code::IDENTITY,
        code::UNKNOWN_SALE,
        code::CATALOG_UNAVAILABLE,
    ]
);

floodgate_platform::refusals!(
    /// What `GET /data/sales/{file}` refuses with.
    CatalogRefusals [
        code::NOT_FOUND,
        code::UNKNOWN_SALE,
        code::CATALOG_UNAVAILABLE,
    ]
);

floodgate_platform::refusals!(
    /// What a reservation's own routes refuse with.
    ReservationRefusals [
        code::ORIGIN_FORBIDDEN,
        code::BOOKING_RATE_LIMITED,
        code::HOLDER_RATE_LIMITED,
        code::SECRET_MISSING,
        code::UNKNOWN_RESERVATION,
        code::REDIS_UNAVAILABLE,
    ]
);

floodgate_platform::refusals!(
    /// What `POST .../payment` refuses with.
    PaymentRefusals [
        code::ORIGIN_FORBIDDEN,
        code::BOOKING_RATE_LIMITED,
        code::HOLDER_RATE_LIMITED,
        code::SECRET_MISSING,
        code::UNKNOWN_RESERVATION,
        code::NOT_PAYABLE,
        code::REDIS_UNAVAILABLE,
        code::PAYMENT_PROVIDER_UNAVAILABLE,
    ]
);

floodgate_platform::refusals!(
    /// What the webhook refuses with; the provider redelivers after anything but a 2xx.
    WebhookRefusals [
        code::WEBHOOK_RATE_LIMITED,
        code::SIGNATURE_MISSING,
        code::SIGNATURE_MALFORMED,
        code::TIMESTAMP_OUTSIDE_TOLERANCE,
        code::BAD_JSON,
        code::BAD_BODY,
        code::SIGNATURE_INVALID,
        code::BODY_TOO_LARGE,
        code::INVALID_EVENT,
        code::REDIS_UNAVAILABLE,
        code::POOL_UNAVAILABLE,
        code::CATALOG_UNAVAILABLE,
        code::PAYMENT_PROVIDER_UNAVAILABLE,
    ]
);

floodgate_platform::refusals!(
    /// What every ops route refuses with.
    OpsRefusals [
        code::OPS_TOKEN_MISSING,
        code::OPS_TOKEN_INVALID,
        code::UNKNOWN_SALE,
        code::REDIS_UNAVAILABLE,
        code::CATALOG_UNAVAILABLE,
    ]
);

floodgate_platform::refusals!(
    /// What `GET /admin/v1/sales/{sale}/audit` refuses with.
    AuditRefusals [
        code::BAD_PAGE,
        code::OPS_TOKEN_MISSING,
        code::OPS_TOKEN_INVALID,
        code::UNKNOWN_SALE,
        code::CATALOG_UNAVAILABLE,
    ]
);

floodgate_platform::refusals!(
    /// What `PATCH /admin/v1/sales/{sale}` refuses with.
    UpdateRefusals [
        code::BAD_JSON,
        code::BAD_BODY,
        code::OPS_TOKEN_MISSING,
        code::OPS_TOKEN_INVALID,
        code::UNKNOWN_SALE,
        code::BODY_TOO_LARGE,
        code::INVALID_REQUEST,
        code::INVALID_RATE,
        code::INVALID_CAP,
        code::INVALID_DIFFICULTY,
        code::INVALID_AUTOPILOT,
        code::REDIS_UNAVAILABLE,
        code::CATALOG_UNAVAILABLE,
    ]
);
