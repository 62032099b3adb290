//! `POST /v1/payments/webhook`: the payment provider tells this service how payments ended.
//!
//! Answering 2xx tells the provider to stop redelivering, so a 2xx is given only once the outcome
//! is recorded in Redis (with its event in the pool's outbox) and any refund has been requested;
//! otherwise 503, and the provider's retry finds the work half done and finishes it.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::Json;
use floodgate_contract::ids::{check_sale_id, reservation_pool};
use secrecy::ExposeSecret;
use serde_json::{json, Value};

use crate::error::ApiError;
use crate::gatekeeper::{Confirmation, Release, ReserveError, WebhookTarget};
use crate::payments::{verify, SignatureError, WebhookEvent, SIGNATURE_HEADER};
use crate::AppState;

#[tracing::instrument(skip_all, fields(event, kind))]
pub async fn receive_webhook(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let body = body.map_err(|_| {
        ApiError::PayloadTooLarge("body_too_large", "the webhook body is too large".into())
    })?;
    let signature = headers.get(SIGNATURE_HEADER).and_then(|v| v.to_str().ok());
    let now_secs = floodgate_contract::now_millis() / 1000;
    verify(
        state.webhook_secret.expose_secret().as_bytes(),
        signature,
        &body,
        now_secs,
        state.webhook_tolerance_secs,
    )
    .map_err(|e| match e {
        SignatureError::Missing => ApiError::BadRequest("signature_missing", e.to_string()),
        SignatureError::Malformed => ApiError::BadRequest("signature_malformed", e.to_string()),
        SignatureError::Stale => ApiError::BadRequest("timestamp_outside_tolerance", e.to_string()),
        SignatureError::Invalid => ApiError::Unauthorized("signature_invalid", e.to_string()),
    })?;

    // Only a correctly signed body is parsed.
    let event: WebhookEvent = serde_json::from_slice(&body).map_err(|e| {
        ApiError::BadRequest(
            "bad_json",
            format!("the webhook body is not a payment event: {e}"),
        )
    })?;
    let span = tracing::Span::current();
    span.record("event", event.id.as_str());
    span.record("kind", event.kind.as_str());
    let id_ok = !event.id.is_empty()
        && event.id.len() <= 128
        && event
            .id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !id_ok {
        return Err(ApiError::Unprocessable(
            "invalid_event",
            "the event id must be 1 to 128 letters, digits, '_' or '-'".into(),
        ));
    }
    let data = &event.data;
    let Some(pool) =
        reservation_pool(&data.reference).filter(|_| check_sale_id(&data.sale).is_ok())
    else {
        // Money for something this service never issued: say so loudly; redelivery would not help.
        tracing::error!(reference = %data.reference, payment = %data.payment_id, "webhook for an unknown reservation");
        return Ok(Json(
            json!({ "result": "ignored", "reason": "unknown reservation" }),
        ));
    };
    let gatekeeper = &state.gatekeeper;
    let (reference, payment) = (&data.reference, &data.payment_id);
    let target = WebhookTarget {
        sale: &data.sale,
        pool,
        reservation_id: reference,
        event: &event.id,
    };

    let result = match event.kind.as_str() {
        "payment.succeeded" => {
            let confirmation = gatekeeper
                .confirm(&target, payment)
                .await
                .map_err(ReserveError::from)?;
            match confirmation {
                Confirmation::Confirmed => json!({ "result": "confirmed" }),
                Confirmation::RefundRequired { lost_to } => {
                    request_refund(&state, payment).await?;
                    json!({ "result": "refund_requested", "hold": lost_to })
                }
                // A redelivery after a failed refund request: ask again (refunds are idempotent).
                Confirmation::Duplicate(earlier) if earlier == "refund_required" => {
                    request_refund(&state, payment).await?;
                    json!({ "result": "duplicate", "earlier": earlier })
                }
                Confirmation::Duplicate(earlier) => {
                    json!({ "result": "duplicate", "earlier": earlier })
                }
                Confirmation::Unknown => {
                    json!({ "result": "ignored", "reason": "unknown reservation" })
                }
            }
        }
        "payment.failed" => match gatekeeper
            .release(&target, payment)
            .await
            .map_err(ReserveError::from)?
        {
            Release::Released => json!({ "result": "released" }),
            Release::Ignored(state) => json!({ "result": "ignored", "reservation": state }),
            Release::Duplicate(earlier) => json!({ "result": "duplicate", "earlier": earlier }),
            Release::Unknown => json!({ "result": "ignored", "reason": "unknown reservation" }),
        },
        kind @ ("refund.succeeded" | "refund.failed") => {
            let succeeded = kind == "refund.succeeded";
            let outcome = gatekeeper
                .refund_result(&target, payment, succeeded)
                .await
                .map_err(ReserveError::from)?;
            if !succeeded {
                tracing::error!(%payment, %reference, "refund failed at the provider; a person must follow up");
            }
            json!({ "result": outcome })
        }
        other => {
            tracing::debug!(kind = other, "webhook type not handled");
            json!({ "result": "ignored", "reason": "event type not handled" })
        }
    };
    let outcome = result["result"].as_str().unwrap_or("?").to_owned();
    // Only known types become label values: a provider's new types must not grow the series.
    let kind: &'static str = match event.kind.as_str() {
        "payment.succeeded" => "payment.succeeded",
        "payment.failed" => "payment.failed",
        "refund.succeeded" => "refund.succeeded",
        "refund.failed" => "refund.failed",
        _ => "other",
    };
    metrics::counter!("floodgate_webhooks_total", "type" => kind, "result" => outcome).increment(1);
    Ok(Json(result))
}

async fn request_refund(state: &AppState, payment: &str) -> Result<(), ApiError> {
    state.provider.refund(payment).await.map_err(|e| {
        tracing::warn!(error = %e, %payment, "refund request failed; the provider will redeliver");
        ApiError::Unavailable(
            "payment_provider_unavailable",
            "refund not yet requested; redeliver".into(),
        )
    })
}
