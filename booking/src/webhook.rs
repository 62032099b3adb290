//! `POST /v1/payments/webhook`: the payment provider tells this service how payments ended.
//!
//! Answering 2xx tells the provider to stop redelivering, so a 2xx is given only once the outcome
//! is recorded (in Redis with its event in the pool's outbox, or in PostgreSQL for money that
//! matches no reservation) and any refund has been requested; otherwise 503, and the provider's
//! retry finds the work half done and finishes it. Money is never acknowledged and kept: it buys
//! the hold it was started for, at its price, or it is refunded.

use axum::extract::State;
use axum::Json;
use floodgate_protocol::api::booking::WebhookAnswer;
use floodgate_protocol::api::code;
use floodgate_protocol::ids::{check_sale_id, reservation_pool};

use crate::error::ApiError;
use crate::extract::SignedEvent;
use crate::gatekeeper::{Confirmation, Paid, Release, ReserveError, WebhookTarget};
use crate::AppState;
use floodgate_protocol::payments::WebhookEvent;

/// `POST /v1/payments/webhook`: the provider reports a payment's or a refund's outcome.
#[utoipa::path(
    post,
    path = "/v1/payments/webhook",
    tag = "payments",
    request_body(content = WebhookEvent, description = "The event, signed in Floodgate-Signature over its raw bytes."),
    responses(
        (status = 200, description = "Recorded (or a duplicate, or ignored): stop redelivering.", body = WebhookAnswer),
        crate::openapi::WebhookRefusals,
    ),
    security(("webhook_signature" = [])),
)]
#[tracing::instrument(skip_all, fields(event, kind))]
pub async fn receive_webhook(
    State(state): State<AppState>,
    SignedEvent(event): SignedEvent,
) -> Result<Json<WebhookAnswer>, ApiError> {
    let span = tracing::Span::current();
    span.record("event", event.id.as_str());
    span.record("kind", event.kind.as_str());
    let result = match event.kind.as_str() {
        "payment.succeeded" => payment_succeeded(&state, &event).await?,
        "payment.failed" => payment_failed(&state, &event).await?,
        "refund.succeeded" | "refund.failed" => refund_result(&state, &event).await?,
        other => {
            tracing::debug!(kind = other, "webhook type not handled");
            WebhookAnswer::because("ignored", "event type not handled")
        }
    };
    let outcome = result.result.clone();
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

/// The reservation an event names, if its reference could be one of this service's.
fn target_of(event: &WebhookEvent) -> Option<WebhookTarget<'_>> {
    let data = &event.data;
    let pool = reservation_pool(&data.reference).filter(|_| check_sale_id(&data.sale).is_ok())?;
    Some(WebhookTarget {
        sale: &data.sale,
        pool,
        reservation_id: &data.reference,
        event: &event.id,
    })
}

async fn payment_succeeded(
    state: &AppState,
    event: &WebhookEvent,
) -> Result<WebhookAnswer, ApiError> {
    let data = &event.data;
    let Some(target) = target_of(event) else {
        return refund_unmatched(state, event, "unknown_reference").await;
    };
    let paid = Paid {
        payment_id: &data.payment_id,
        amount_minor: data.amount_minor,
        currency: &data.currency,
    };
    let confirmation = state
        .gatekeeper
        .confirm(&target, &paid)
        .await
        .map_err(ReserveError::from)?;
    Ok(match confirmation {
        Confirmation::Confirmed => WebhookAnswer::result("confirmed"),
        Confirmation::RefundRequired { reason } => {
            request_refund(state, &data.payment_id).await?;
            WebhookAnswer::because("refund_requested", reason)
        }
        // A redelivery after a failed refund request: ask again (refunds are idempotent).
        Confirmation::Duplicate(earlier) if earlier == "refund_required" => {
            request_refund(state, &data.payment_id).await?;
            WebhookAnswer::duplicate(earlier)
        }
        Confirmation::Duplicate(earlier) => WebhookAnswer::duplicate(earlier),
        Confirmation::PoolUnavailable => {
            pool_lost_or_unknown(state, &target).await?;
            return refund_unmatched(state, event, "unknown_reservation").await;
        }
        Confirmation::Unknown => {
            return refund_unmatched(state, event, "unknown_reservation").await
        }
    })
}

async fn payment_failed(state: &AppState, event: &WebhookEvent) -> Result<WebhookAnswer, ApiError> {
    let Some(target) = target_of(event) else {
        return Ok(WebhookAnswer::because("ignored", "unknown reservation"));
    };
    let released = state
        .gatekeeper
        .release(&target, &event.data.payment_id)
        .await
        .map_err(ReserveError::from)?;
    Ok(match released {
        Release::Released => WebhookAnswer::result("released"),
        Release::Ignored(now) => WebhookAnswer {
            reservation: Some(now),
            ..WebhookAnswer::result("ignored")
        },
        Release::Duplicate(earlier) => WebhookAnswer::duplicate(earlier),
        Release::PoolUnavailable => {
            pool_lost_or_unknown(state, &target).await?;
            WebhookAnswer::because("ignored", "unknown reservation")
        }
        Release::Unknown => WebhookAnswer::because("ignored", "unknown reservation"),
    })
}

async fn refund_result(state: &AppState, event: &WebhookEvent) -> Result<WebhookAnswer, ApiError> {
    let data = &event.data;
    let succeeded = event.kind == "refund.succeeded";
    if !succeeded {
        tracing::error!(payment = %data.payment_id, reference = %data.reference, "refund failed at the provider; a person must follow up");
    }
    let Some(target) = target_of(event) else {
        // A refund of money that matched nothing: its record is in unmatched_payments.
        return Ok(WebhookAnswer::because("ignored", "unknown reservation"));
    };
    match state
        .gatekeeper
        .refund_result(&target, &data.payment_id, succeeded)
        .await
    {
        Ok(verdict) => Ok(WebhookAnswer::result(verdict.as_str())),
        Err(e) => {
            pool_lost_or_unknown(state, &target).await?;
            tracing::debug!(error = %e, "refund result for a pool the catalog does not know");
            Ok(WebhookAnswer::because("ignored", "unknown reservation"))
        }
    }
}

/// A pool whose Redis state is missing: if the catalog has it, its state was lost and is not
/// yet rebuilt, so nothing can be decided: 503, and the provider redelivers until it is back.
/// `Ok` means the catalog never had it (the reference names nothing this service sold).
async fn pool_lost_or_unknown(
    state: &AppState,
    target: &WebhookTarget<'_>,
) -> Result<(), ApiError> {
    let known: Option<i32> = sqlx::query_scalar(
        "select 1 from pools p join sales s on s.id = p.sale_id
         where p.sale_id = $1 and p.id = $2 and s.armed_at is not null",
    )
    .bind(target.sale)
    .bind(target.pool)
    .fetch_optional(&state.db)
    .await
    .map_err(catalog_unavailable)?;
    if known.is_some() {
        tracing::error!(sale = %target.sale, pool = %target.pool, "a payment for a pool whose Redis state is lost: refused until it is rebuilt");
        return Err(ApiError::new(
            code::POOL_UNAVAILABLE,
            "this reservation's pool is being restored; redeliver".into(),
        ));
    }
    Ok(())
}

/// Money that matches no reservation: recorded in `unmatched_payments`, then refunded. Both are
/// idempotent per payment, so a redelivery finishes what a failure left half done.
async fn refund_unmatched(
    state: &AppState,
    event: &WebhookEvent,
    reason: &'static str,
) -> Result<WebhookAnswer, ApiError> {
    let data = &event.data;
    tracing::error!(reference = %data.reference, payment = %data.payment_id, amount = data.amount_minor, %reason, "money for no reservation: refunding");
    sqlx::query(
        "insert into unmatched_payments
           (payment_id, event_id, reference, sale_id, amount_minor, currency, reason)
         values ($1, $2, $3, $4, $5, $6, $7)
         on conflict (payment_id) do nothing",
    )
    .bind(&data.payment_id)
    .bind(&event.id)
    .bind(&data.reference)
    .bind(&data.sale)
    .bind(data.amount_minor)
    .bind(&data.currency)
    .bind(reason)
    .execute(&state.db)
    .await
    .map_err(catalog_unavailable)?;
    request_refund(state, &data.payment_id).await?;
    sqlx::query(
        "update unmatched_payments set refund_requested_at = coalesce(refund_requested_at, now())
         where payment_id = $1",
    )
    .bind(&data.payment_id)
    .execute(&state.db)
    .await
    .map_err(catalog_unavailable)?;
    metrics::counter!("floodgate_unmatched_payments_total", "reason" => reason).increment(1);
    Ok(WebhookAnswer::because("refund_requested", reason))
}

fn catalog_unavailable(e: sqlx::Error) -> ApiError {
    tracing::warn!(error = %e, "catalog unreachable");
    ApiError::new(
        code::CATALOG_UNAVAILABLE,
        "the payment could not be recorded; redeliver".into(),
    )
}

async fn request_refund(state: &AppState, payment: &str) -> Result<(), ApiError> {
    state.provider.refund(payment).await.map_err(|e| {
        tracing::warn!(error = %e, %payment, "refund request failed; the provider will redeliver");
        ApiError::new(
            code::PAYMENT_PROVIDER_UNAVAILABLE,
            "refund not yet requested; redeliver".into(),
        )
    })
}
