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

/// A sale update names at least one setting (`SaleUpdate::parse` refuses an empty one).
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
    ReserveRefusals {
        400 => "The Idempotency-Key is missing or invalid, or the body is not JSON.",
        401 => "The admission token (or a required identity token) is missing, malformed, invalid or expired.",
        403 => "The token was issued for another sale or another buyer, the buyer's limit is reached, or the token was spent.",
        404 => "No such sale is armed, or no such pool.",
        409 => "Sold out, the sale has ended, or the Idempotency-Key was used with another body.",
        413 => "The body is larger than 4 KiB.",
        422 => "The body is not {pool, seats}, or seats is out of range.",
        503 => "Redis, the broker or the catalog is unavailable: nothing was reserved; retry.",
    }
);

floodgate_platform::refusals!(
    /// What `GET /v1/sales/{sale}/reservations` refuses with.
    ListRefusals {
        401 => "The identity token is missing, malformed, invalid or expired.",
        404 => "The sale id is not an id.",
        503 => "The durable record or the identity issuer is unavailable; retry.",
    }
);

floodgate_platform::refusals!(
    /// What a reservation's own routes refuse with.
    ReservationRefusals {
        401 => "No secret was presented.",
        404 => "No such reservation, or the secret does not match it (the same answer for both).",
        503 => "Redis is unavailable; retry.",
    }
);

floodgate_platform::refusals!(
    /// What `POST .../payment` refuses with.
    PaymentRefusals {
        401 => "No secret was presented.",
        404 => "No such reservation, or the secret does not match it.",
        409 => "The reservation is not held (paid, expired, released).",
        503 => "Redis or the payment provider is unavailable; retry.",
    }
);

floodgate_platform::refusals!(
    /// What the webhook refuses with; the provider redelivers after anything but a 2xx.
    WebhookRefusals {
        400 => "The signature header is missing, malformed or outside the time window, or the body is not an event.",
        401 => "The signature does not match the body.",
        413 => "The body is larger than the limit.",
        422 => "The event's id is not 1 to 128 letters, digits, '_' or '-'.",
        503 => "The outcome could not be recorded yet; redeliver.",
    }
);

floodgate_platform::refusals!(
    /// What every ops route refuses with.
    OpsRefusals {
        401 => "The ops token is missing or not one of FLOODGATE_OPS_TOKEN's.",
        404 => "No such sale is armed.",
        503 => "Redis or the catalog is unavailable; retry.",
    }
);

floodgate_platform::refusals!(
    /// What `GET /admin/v1/sales/{sale}/audit` refuses with.
    AuditRefusals {
        400 => "limit is not a whole number from 1 to 100.",
        401 => "The ops token is missing or not one of FLOODGATE_OPS_TOKEN's.",
        404 => "No such sale is armed.",
        503 => "The audit trail is unavailable; retry.",
    }
);

floodgate_platform::refusals!(
    /// What `PATCH /admin/v1/sales/{sale}` refuses with.
    UpdateRefusals {
        400 => "The body is not JSON.",
        401 => "The ops token is missing or not one of FLOODGATE_OPS_TOKEN's.",
        404 => "No such sale is armed.",
        413 => "The body is larger than 4 KiB.",
        422 => "A field is unknown or out of its range, or none was named.",
        503 => "Redis or the catalog is unavailable; retry.",
    }
);
