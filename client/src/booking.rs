//! The booking API (docs/protocol.md 3), answered with the public types: a 2xx is its body, any
//! other answer a [`Failure`] with the status and the error body.

use std::fmt::Display;

use floodgate_protocol::api::booking::{
    BuyerReservations, PaymentStarted, ReservationCreated, ReservationView,
};
use floodgate_protocol::api::ErrorBody;
use floodgate_protocol::identity::IDENTITY_HEADER;
use reqwest::{RequestBuilder, StatusCode};
use serde::de::DeserializeOwned;

use crate::backoff;

/// Why a request did not get its 2xx.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum Failure {
    /// The service answered with an error body.
    #[error("{status} {}: {}", body.error, body.message)]
    Refused {
        status: u16,
        body: ErrorBody,
        /// Seconds, from `Retry-After`.
        retry_after: Option<u64>,
    },
    /// No answer, or one that is not the protocol's.
    #[error("no usable answer: {0}")]
    Unreachable(String),
}

impl Failure {
    /// The HTTP status (0 if there was no answer).
    pub fn status(&self) -> u16 {
        match self {
            Failure::Refused { status, .. } => *status,
            Failure::Unreachable(_) => 0,
        }
    }

    /// The error code (`""` if there was no answer).
    pub fn code(&self) -> &str {
        match self {
            Failure::Refused { body, .. } => &body.error,
            Failure::Unreachable(_) => "",
        }
    }
}

/// The answer to one request.
pub type Answer<T> = Result<T, Failure>;

/// A client of one booking service (or of a gateway passing the booking paths on).
#[derive(Clone)]
pub struct BookingClient {
    http: reqwest::Client,
    base: String,
    /// The signed-in buyer's identity token, sent with every request (`Floodgate-Identity`).
    identity: Option<String>,
}

impl BookingClient {
    /// `booking` is `host:port`.
    pub fn new(http: reqwest::Client, booking: impl Display) -> Self {
        Self {
            http,
            base: format!("http://{booking}"),
            identity: None,
        }
    }

    /// The same client, signed in: every request carries the buyer's identity token.
    pub fn signed_in(mut self, identity: impl Into<String>) -> Self {
        self.identity = Some(identity.into());
        self
    }

    /// A request with the buyer's identity, if signed in.
    fn request(&self, method: reqwest::Method, path: &str) -> RequestBuilder {
        let request = self.http.request(method, format!("{}{path}", self.base));
        match &self.identity {
            Some(identity) => request.header(IDENTITY_HEADER, identity),
            None => request,
        }
    }

    /// The signed-in buyer's own reservations in `sale`.
    pub async fn my_reservations(&self, sale: &str) -> Answer<BuyerReservations> {
        let request = self.request(
            reqwest::Method::GET,
            &format!("/v1/sales/{sale}/reservations"),
        );
        answer(request, StatusCode::OK).await
    }

    /// One attempt at reserving `seats` in `pool` with an admission token and an idempotency key.
    pub async fn reserve(
        &self,
        sale: &str,
        token: &str,
        key: &str,
        pool: &str,
        seats: u32,
    ) -> Answer<ReservationCreated> {
        let request = self
            .request(
                reqwest::Method::POST,
                &format!("/v1/sales/{sale}/reservations"),
            )
            .bearer_auth(token)
            .header("Idempotency-Key", key)
            .json(&serde_json::json!({ "pool": pool, "seats": seats }));
        answer(request, StatusCode::CREATED).await
    }

    /// Reserves as the protocol says a client should: one new key, and a 503 retried with that
    /// same key after its `Retry-After`, at most `attempts` times in all.
    pub async fn reserve_retrying(
        &self,
        sale: &str,
        token: &str,
        pool: &str,
        seats: u32,
        attempts: u32,
    ) -> Answer<ReservationCreated> {
        let key = uuid::Uuid::new_v4().to_string();
        let mut tries = 1;
        loop {
            match self.reserve(sale, token, &key, pool, seats).await {
                Err(Failure::Refused {
                    status: 503,
                    retry_after,
                    ..
                }) if tries < attempts => {
                    tries += 1;
                    tokio::time::sleep(backoff::retry_after(retry_after)).await;
                }
                answered => return answered,
            }
        }
    }

    /// A reservation, for whoever holds its secret.
    pub async fn reservation(&self, sale: &str, id: &str, secret: &str) -> Answer<ReservationView> {
        let request = self
            .request(
                reqwest::Method::GET,
                &format!("/v1/sales/{sale}/reservations/{id}"),
            )
            .bearer_auth(secret);
        answer(request, StatusCode::OK).await
    }

    /// Starts paying for a held reservation: where the payer goes to pay.
    pub async fn start_payment(
        &self,
        sale: &str,
        id: &str,
        secret: &str,
    ) -> Answer<PaymentStarted> {
        let request = self
            .request(
                reqwest::Method::POST,
                &format!("/v1/sales/{sale}/reservations/{id}/payment"),
            )
            .bearer_auth(secret);
        answer(request, StatusCode::ACCEPTED).await
    }
}

/// Completes a payment at the sandbox provider (`sandbox` is `host:port`) the way its checkout
/// page does: `checkout` is `{"outcome": "succeed"}` or `"fail"`, with the sandbox's own knobs
/// if wanted (docs/protocol.md, "The sandbox payment provider").
pub async fn sandbox_checkout(
    http: &reqwest::Client,
    sandbox: impl Display,
    payment_id: &str,
    checkout: &serde_json::Value,
) -> Answer<serde_json::Value> {
    let request = http
        .post(format!(
            "http://{sandbox}/v1/payments/{payment_id}/checkout"
        ))
        .json(checkout);
    answer(request, StatusCode::ACCEPTED).await
}

/// Sends `request`: its body as `T` if the status is `expected`, else the failure.
async fn answer<T: DeserializeOwned>(request: RequestBuilder, expected: StatusCode) -> Answer<T> {
    let response = request
        .send()
        .await
        .map_err(|e| Failure::Unreachable(e.to_string()))?;
    let status = response.status();
    let retry_after = response
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok()?.parse().ok());
    let bytes = response
        .bytes()
        .await
        .map_err(|e| Failure::Unreachable(e.to_string()))?;
    if status == expected {
        return serde_json::from_slice(&bytes)
            .map_err(|e| Failure::Unreachable(format!("{status} with an unreadable body: {e}")));
    }
    match serde_json::from_slice::<ErrorBody>(&bytes) {
        Ok(body) => Err(Failure::Refused {
            status: status.as_u16(),
            body,
            retry_after,
        }),
        Err(_) => Err(Failure::Unreachable(format!(
            "{status}: {}",
            String::from_utf8_lossy(&bytes)
        ))),
    }
}
