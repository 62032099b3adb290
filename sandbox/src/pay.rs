//! The sandbox payment provider.
//!
//! The checkout body tells it how to behave, like a provider's test cards:
//! `{"outcome": "succeed" | "fail", "delay_ms": 0, "deliveries": 1, "refund": "succeed" | "fail"}`:
//! succeed or fail, be slow, deliver the same event several times, and let a later refund of this
//! payment succeed or fail. Refunds (`POST /v1/refunds`) end in a webhook too.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use dashmap::DashMap;
use floodgate_protocol::payments::{
    sign, CreatePayment, CreateRefund, CreatedPayment, PaymentObject, WebhookEvent,
    SIGNATURE_HEADER,
};
use secrecy::ExposeSecret as _;
use serde::Deserialize;
use serde_json::json;

use crate::web::{holds_key, html_escape};
use crate::{signin, SandboxConfig};

#[derive(Clone, Debug)]
struct Payment {
    object: PaymentObject,
    status: String,
    refund_fails: bool,
    /// Webhook deliveries of this payment's events that the receiver acknowledged.
    delivered: u32,
    /// Requests that asked for this payment to be created (a retry with its idempotency key
    /// gets it again): what a real provider counts against the merchant's rate limits.
    create_requests: u32,
}

#[derive(Clone)]
pub struct Sandbox {
    config: Arc<SandboxConfig>,
    payments: Arc<DashMap<String, Payment>>,
    /// Idempotency-Key -> the id it created, for payments and refunds alike.
    idempotency: Arc<DashMap<String, String>>,
    http: reqwest::Client,
}

impl Sandbox {
    pub fn new(config: SandboxConfig) -> Self {
        Self {
            config: Arc::new(config),
            payments: Arc::default(),
            idempotency: Arc::default(),
            http: floodgate_platform::outbound::client()
                .timeout(Duration::from_secs(5))
                .build()
                .expect("HTTP client builds"),
        }
    }

    /// The provider's routes, and the sign-in stand-in's when it is asked for.
    pub fn router(self) -> Router {
        let signin = self.config.signin.enabled.then(|| {
            signin::SignIn::new(
                &self.config.public_url,
                &self.config.signin,
                self.config.api_key.clone(),
            )
        });
        let payments = Router::new()
            .route("/v1/payments", post(create_payment))
            .route("/v1/payments/{id}", get(get_payment))
            .route("/v1/payments/{id}/checkout", post(checkout))
            .route("/v1/refunds", post(create_refund))
            .route("/checkout/{id}", get(checkout_page))
            .with_state(self);
        match signin {
            Some(signin) => payments.merge(signin.router()),
            None => payments,
        }
    }

    /// Posts `event` to the webhook URL `deliveries` times after `delay`, each delivery retried
    /// with backoff until it is acknowledged (or after about a minute of trying).
    fn deliver(&self, event: WebhookEvent, delay: Duration, deliveries: u32) {
        let sandbox = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let body = serde_json::to_vec(&event).expect("events serialise");
            for _ in 0..deliveries.max(1) {
                let mut backoff = Duration::from_millis(100);
                for _attempt in 0..12 {
                    let now = floodgate_protocol::now_millis() / 1000;
                    let signature = sign(
                        sandbox.config.webhook_secret.expose_secret().as_bytes(),
                        now,
                        &body,
                    );
                    let sent = sandbox
                        .http
                        .post(&sandbox.config.webhook_url)
                        .header(SIGNATURE_HEADER, signature)
                        .header("Content-Type", "application/json")
                        .body(body.clone())
                        .send()
                        .await;
                    match sent {
                        Ok(r) if r.status().is_success() => {
                            if let Some(mut p) = sandbox.payments.get_mut(&event.data.payment_id) {
                                p.delivered += 1;
                            }
                            break;
                        }
                        Ok(r) => {
                            tracing::warn!(status = %r.status(), event = %event.id, "webhook refused; retrying")
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, event = %event.id, "webhook not delivered; retrying")
                        }
                    }
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(10));
                }
            }
        });
    }
}

fn error(status: StatusCode, code: &str, message: &str) -> Response {
    (status, Json(json!({ "error": code, "message": message }))).into_response()
}

/// The API's key check, `Authorization: Bearer <api key>` compared in constant time: the
/// refusal to answer, if any. The checkout endpoints are the payer's and take no key.
fn unauthorized(sandbox: &Sandbox, headers: &HeaderMap) -> Option<Response> {
    (!holds_key(headers, &sandbox.config.api_key)).then(|| {
        error(
            StatusCode::UNAUTHORIZED,
            "api_key_invalid",
            "present the API key: Authorization: Bearer <key>",
        )
    })
}

fn new_id(prefix: &str) -> String {
    format!("{prefix}_{}", uuid::Uuid::new_v4().simple())
}

async fn create_payment(
    State(sandbox): State<Sandbox>,
    headers: HeaderMap,
    Json(request): Json<CreatePayment>,
) -> Response {
    if let Some(refused) = unauthorized(&sandbox, &headers) {
        return refused;
    }
    let key = headers
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let id = match &key {
        Some(key) => sandbox
            .idempotency
            .entry(key.clone())
            .or_insert_with(|| new_id("pay"))
            .clone(),
        None => new_id("pay"),
    };
    let mut payment = sandbox
        .payments
        .entry(id.clone())
        .or_insert_with(|| Payment {
            object: PaymentObject {
                payment_id: id.clone(),
                reference: request.reference,
                sale: request.sale,
                amount_minor: request.amount_minor,
                currency: request.currency,
            },
            status: "requires_payment".into(),
            refund_fails: false,
            delivered: 0,
            create_requests: 0,
        });
    payment.create_requests += 1;
    let payment = payment.clone();
    let created = CreatedPayment {
        payment_id: id.clone(),
        status: payment.status,
        checkout_url: format!("{}/checkout/{id}", sandbox.config.public_url),
    };
    (StatusCode::CREATED, Json(created)).into_response()
}

async fn get_payment(State(sandbox): State<Sandbox>, Path(id): Path<String>) -> Response {
    match sandbox.payments.get(&id) {
        Some(p) => Json(json!({
            "payment": p.object,
            "status": p.status,
            "webhooks_delivered": p.delivered,
            "create_requests": p.create_requests,
        }))
        .into_response(),
        None => error(StatusCode::NOT_FOUND, "unknown_payment", "no such payment"),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Checkout {
    outcome: String,
    #[serde(default)]
    delay_ms: u64,
    #[serde(default = "one")]
    deliveries: u32,
    #[serde(default)]
    refund: Option<String>,
}

fn one() -> u32 {
    1
}

async fn checkout(
    State(sandbox): State<Sandbox>,
    Path(id): Path<String>,
    Json(checkout): Json<Checkout>,
) -> Response {
    let succeed = match checkout.outcome.as_str() {
        "succeed" => true,
        "fail" => false,
        _ => {
            return error(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_outcome",
                "outcome is succeed or fail",
            )
        }
    };
    let Some(mut payment) = sandbox.payments.get_mut(&id) else {
        return error(StatusCode::NOT_FOUND, "unknown_payment", "no such payment");
    };
    if payment.status != "requires_payment" {
        return error(
            StatusCode::CONFLICT,
            "already_completed",
            "this payment was already completed",
        );
    }
    payment.status = if succeed { "succeeded" } else { "failed" }.into();
    payment.refund_fails = checkout.refund.as_deref() == Some("fail");
    let event = WebhookEvent {
        id: new_id("evt"),
        kind: if succeed {
            "payment.succeeded"
        } else {
            "payment.failed"
        }
        .into(),
        created: floodgate_protocol::now_millis() / 1000,
        data: payment.object.clone(),
    };
    let status = payment.status.clone();
    drop(payment);
    sandbox.deliver(
        event,
        Duration::from_millis(checkout.delay_ms.min(600_000)),
        checkout.deliveries.min(10),
    );
    (
        StatusCode::ACCEPTED,
        Json(json!({ "payment_id": id, "status": status })),
    )
        .into_response()
}

async fn create_refund(
    State(sandbox): State<Sandbox>,
    headers: HeaderMap,
    Json(request): Json<CreateRefund>,
) -> Response {
    if let Some(refused) = unauthorized(&sandbox, &headers) {
        return refused;
    }
    let Some(mut payment) = sandbox.payments.get_mut(&request.payment_id) else {
        return error(StatusCode::NOT_FOUND, "unknown_payment", "no such payment");
    };
    if payment.status != "succeeded"
        && payment.status != "refunded"
        && payment.status != "refund_failed"
    {
        return error(
            StatusCode::CONFLICT,
            "not_refundable",
            "only a succeeded payment can be refunded",
        );
    }
    let key = headers
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    if !key.is_empty() && sandbox.idempotency.contains_key(&key) {
        return (
            StatusCode::OK,
            Json(json!({ "payment_id": request.payment_id, "status": payment.status })),
        )
            .into_response();
    }
    sandbox.idempotency.insert(key, request.payment_id.clone());
    let fails = payment.refund_fails;
    payment.status = if fails { "refund_failed" } else { "refunded" }.into();
    let event = WebhookEvent {
        id: new_id("evt"),
        kind: if fails {
            "refund.failed"
        } else {
            "refund.succeeded"
        }
        .into(),
        created: floodgate_protocol::now_millis() / 1000,
        data: payment.object.clone(),
    };
    drop(payment);
    sandbox.deliver(event, Duration::from_millis(50), 1);
    (
        StatusCode::ACCEPTED,
        Json(json!({ "payment_id": request.payment_id, "status": "pending" })),
    )
        .into_response()
}

/// A minimal hosted checkout page for the demo: pay or decline.
async fn checkout_page(State(sandbox): State<Sandbox>, Path(id): Path<String>) -> Response {
    let Some(payment) = sandbox.payments.get(&id).map(|p| p.clone()) else {
        return error(StatusCode::NOT_FOUND, "unknown_payment", "no such payment");
    };
    let amount = format!(
        "{}.{:02} {}",
        payment.object.amount_minor / 100,
        payment.object.amount_minor % 100,
        payment.object.currency
    );
    let id = serde_json::to_string(&id).expect("string serialises");
    Html(format!(
        r#"<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Sandbox checkout</title><style>
body{{margin:0;font:16px/1.5 system-ui,sans-serif;color:#1b2433;background:#eef1f6}}
main{{max-width:26rem;margin:2rem auto;padding:0 1rem}}
.card{{background:#fff;border:1px solid #dde2ea;border-radius:14px;padding:1.3rem 1.4rem}}
.badge{{display:inline-block;font-size:.75rem;font-weight:700;letter-spacing:.06em;text-transform:uppercase;color:#8a4b00;background:#fff1d6;border-radius:6px;padding:.15rem .5rem}}
h1{{font-size:1.25rem;margin:.6rem 0 .2rem}}.amount{{font-size:2rem;font-weight:750;margin:.2rem 0 .6rem}}
.muted{{color:#5a6478;font-size:.85rem}}code{{font-size:.8rem;word-break:break-all}}
.fake-card{{border:1px dashed #c3cbd8;border-radius:10px;padding:.7rem .9rem;margin:1rem 0;font-family:ui-monospace,monospace;color:#5a6478}}
button{{font:inherit;font-weight:600;width:100%;min-height:48px;border-radius:10px;margin-top:.6rem;cursor:pointer}}
#pay{{border:0;background:#0b5fcc;color:#fff}}#decline{{border:1px solid #c3cbd8;background:#fff;color:#1b2433}}
</style></head>
<body><main><div class="card"><span class="badge">Test mode</span><h1>Sandbox checkout</h1>
<p class="amount">{amount}</p><p class="muted">For reservation <code>{reference}</code></p>
<div class="fake-card" aria-hidden="true">4242 4242 4242 4242 · 12/34 · 123</div>
<p class="muted">No money moves: this provider only pretends, then tells Floodgate by a signed webhook.</p>
<button id="pay">Pay {amount}</button><button id="decline">Decline</button><p id="out" role="status"></p></div></main>
<script>
async function go(outcome) {{
  const r = await fetch("/v1/payments/" + {id} + "/checkout", {{method: "POST", headers: {{"Content-Type": "application/json"}}, body: JSON.stringify({{outcome}})}});
  document.getElementById("out").textContent = r.ok ? "Done: " + outcome + ". You can close this tab." : "This payment was already completed.";
}}
document.getElementById("pay").onclick = () => go("succeed");
document.getElementById("decline").onclick = () => go("fail");
</script></body></html>"#,
        reference = html_escape(&payment.object.reference),
    ))
    .into_response()
}
