//! A reservation's own routes, behind the secret its 201 gave once: read it
//! (`GET .../reservations/{id}`) and pay for it (`POST .../reservations/{id}/payment`).

use crate::holders::{Holder, Paying, Reading};
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use floodgate_platform::origins::SameSite;
use floodgate_protocol::api::booking::{PaymentStarted, RefundView, ReservationView};
use floodgate_protocol::api::code;
use floodgate_protocol::payments::CreatePayment;
use floodgate_protocol::reservation::ReservationState;
use floodgate_protocol::same_secret;

use crate::error::ApiError;
use crate::extract::ReservationRef;
use crate::gatekeeper::{PaymentStart, ReserveError, StartedPayment, StoredReservation};
use crate::AppState;

/// A stored reservation as its holder sees it.
fn view(sale: &str, pool: &str, r: StoredReservation) -> ReservationView {
    ReservationView {
        status: r.state,
        reservation_id: r.id,
        sale: sale.to_owned(),
        pool: pool.to_owned(),
        seats: r.seats,
        reserved_at_ms: r.reserved_at_ms,
        hold_expires_at_ms: r.hold_expires_at_ms,
        amount_minor: r.fare_minor * i64::from(r.seats),
        currency: r.currency,
        payment_id: r.payment_id,
        refunds: r
            .refunds
            .into_iter()
            .map(|(payment_id, status)| RefundView { payment_id, status })
            .collect(),
    }
}

/// Finds a reservation and checks its secret against the stored one (whatever allowance the
/// caller paid with, crate::holders). Unknown ids and wrong secrets get the same 404, so the API
/// never confirms that someone else's reservation exists.
async fn authorized_reservation<A>(
    state: &AppState,
    holder: &Holder<A>,
) -> Result<StoredReservation, ApiError> {
    let (at, presented) = (&holder.at, &holder.secret);
    let stored = state
        .gatekeeper
        .reservation(&at.sale, &at.pool, &at.id)
        .await
        .map_err(ReserveError::from)?
        .ok_or_else(ReservationRef::not_found)?;
    if !same_secret(presented.as_bytes(), stored.secret.as_bytes()) {
        return Err(ReservationRef::not_found());
    }
    Ok(stored)
}

/// `GET /v1/sales/{sale}/reservations/{id}` with `Authorization: Bearer <secret>`.
#[utoipa::path(
    get,
    path = "/v1/sales/{sale}/reservations/{id}",
    tag = "reservations",
    params(crate::openapi::ReservationPath),
    responses(
        (status = 200, description = "The reservation's state now.", body = ReservationView),
        crate::openapi::ReservationRefusals,
    ),
    security(("reservation_secret" = [])),
)]
#[tracing::instrument(skip_all, fields(sale = %holder.at.sale, id = %holder.at.id))]
pub async fn get_reservation(
    State(state): State<AppState>,
    _: SameSite,
    holder: Holder<Reading>,
) -> Result<Json<ReservationView>, ApiError> {
    let stored = authorized_reservation(&state, &holder).await?;
    Ok(Json(view(&holder.at.sale, &holder.at.pool, stored)))
}

/// `POST /v1/sales/{sale}/reservations/{id}/payment` with `Authorization: Bearer <secret>`:
/// starts paying for a held reservation. Answers 202 with the provider's checkout URL; the
/// outcome arrives later by webhook, and `GET` on the reservation shows it. Started again while
/// the hold lasts, it answers the same checkout without asking the provider again.
#[utoipa::path(
    post,
    path = "/v1/sales/{sale}/reservations/{id}/payment",
    tag = "payments",
    params(crate::openapi::ReservationPath),
    responses(
        (status = 202, description = "Started at the provider (or started before, while the hold lasts: the same payment and checkout, the provider not asked again): send the payer to checkout_url.", body = PaymentStarted),
        crate::openapi::PaymentRefusals,
    ),
    security(("reservation_secret" = [])),
)]
#[tracing::instrument(skip_all, fields(sale = %holder.at.sale, id = %holder.at.id))]
pub async fn start_payment(
    State(state): State<AppState>,
    _: SameSite,
    holder: Holder<Paying>,
) -> Result<(StatusCode, Json<PaymentStarted>), ApiError> {
    let stored = authorized_reservation(&state, &holder).await?;
    let ReservationRef { sale, id, pool } = holder.at;
    if stored.state != ReservationState::Held {
        return Err(ApiError::new(
            code::NOT_PAYABLE,
            format!(
                "this reservation is {}; only a held reservation can be paid",
                stored.state
            ),
        ));
    }
    let amount_minor = stored.fare_minor * i64::from(stored.seats);
    let answer = |started: StartedPayment| {
        (
            StatusCode::ACCEPTED,
            Json(PaymentStarted {
                reservation_id: id.clone(),
                payment_id: started.payment_id,
                status: started.status,
                checkout_url: started.checkout_url,
                amount_minor,
                currency: stored.currency.clone(),
                hold_expires_at_ms: stored.hold_expires_at_ms,
            }),
        )
    };
    // Started already: the same checkout again, with no call to the provider (whose limits are
    // the operator's account's, shared by every payer: a holder starting over and over would
    // spend them for everyone) and the first checkout still the one that buys the hold. The
    // script still runs, for the wait on the replicas that a 202 promises. Only the payment
    // recorded, for exactly this amount, can buy the hold (confirm.lua).
    let created = match stored.started.clone() {
        Some(started) => started,
        None => create(&state, &sale, &id, amount_minor, &stored.currency).await?,
    };
    match state
        .gatekeeper
        .start_payment(&sale, &pool, &id, &created)
        .await
        .map_err(ReserveError::from)?
    {
        PaymentStart::Pending => Ok(answer(created)),
        // Recorded before (by an earlier start, or another at the same moment): its checkout
        // is the one.
        PaymentStart::Started(first) => Ok(answer(first)),
        PaymentStart::NotHeld { state: now } => Err(ApiError::new(
            code::NOT_PAYABLE,
            format!("this reservation is {now} now; only a held reservation can be paid"),
        )),
        PaymentStart::Unknown => Err(ApiError::new(
            code::UNKNOWN_RESERVATION,
            "no such reservation".into(),
        )),
        PaymentStart::PoolUnavailable => Err(ReserveError::PoolUnavailable.into()),
    }
}

/// Creates the payment at the provider (idempotent by the reservation's id there too).
async fn create(
    state: &AppState,
    sale: &str,
    id: &str,
    amount_minor: i64,
    currency: &str,
) -> Result<StartedPayment, ApiError> {
    let created = state
        .provider
        .create_payment(&CreatePayment {
            reference: id.to_owned(),
            sale: sale.to_owned(),
            amount_minor,
            currency: currency.to_owned(),
        })
        .await
        .map_err(|e| {
            tracing::warn!(error = %e, "payment provider call failed");
            ApiError::new(
                code::PAYMENT_PROVIDER_UNAVAILABLE,
                "the payment provider is unavailable; retry shortly".into(),
            )
        })?;
    Ok(StartedPayment {
        payment_id: created.payment_id,
        checkout_url: created.checkout_url,
        status: created.status,
    })
}
