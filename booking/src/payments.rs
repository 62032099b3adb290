//! Payments: the provider's API as this service calls it ([`ProviderClient`]). The wire itself
//! (the bodies, the webhook's signature) is `floodgate_protocol::payments`.

use std::time::Duration;

use anyhow::Context as _;
use floodgate_protocol::payments::{CreatePayment, CreateRefund, CreatedPayment};

#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    #[error("payment provider unreachable: {0}")]
    Unreachable(#[from] reqwest::Error),
    #[error("payment provider answered {0}")]
    Status(u16),
}

/// Calls the payment provider's API, presenting its API key.
#[derive(Clone)]
pub struct ProviderClient {
    http: reqwest::Client,
    base: String,
    api_key: secrecy::SecretString,
}

impl ProviderClient {
    /// A client of `provider`: the system's roots plus the provider's CA file if one is set;
    /// HTTPS only unless it is the sandbox.
    pub fn new(provider: &crate::config::PaymentProvider) -> anyhow::Result<Self> {
        let mut builder = floodgate_platform::outbound::client()
            // A payer waits on this call: give up quickly and let them retry.
            .timeout(Duration::from_secs(5))
            // Never sent over plain HTTP, not even by a redirect.
            .https_only(!provider.sandbox);
        if let Some(path) = &provider.ca_file {
            let pem = std::fs::read(path).with_context(|| {
                format!("FLOODGATE_PAYMENT_CA_FILE: cannot read {}", path.display())
            })?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem).with_context(|| {
                format!(
                    "FLOODGATE_PAYMENT_CA_FILE: {} holds no PEM certificate",
                    path.display()
                )
            })?;
            anyhow::ensure!(
                !certs.is_empty(),
                "FLOODGATE_PAYMENT_CA_FILE: {} holds no certificate",
                path.display()
            );
            for cert in certs {
                builder = builder.add_root_certificate(cert);
            }
        }
        Ok(Self {
            http: builder.build().context("building the HTTP client")?,
            base: provider.url.trim_end_matches('/').to_owned(),
            api_key: provider.api_key.clone(),
        })
    }

    /// Creates a payment; the reservation id is the idempotency key, so a retried start returns
    /// the same payment rather than charging twice.
    pub async fn create_payment(
        &self,
        request: &CreatePayment,
    ) -> Result<CreatedPayment, ProviderError> {
        let response = self
            .http
            .post(format!("{}/v1/payments", self.base))
            .bearer_auth(secrecy::ExposeSecret::expose_secret(&self.api_key))
            .header("Idempotency-Key", format!("pay-{}", request.reference))
            .json(request)
            .send()
            .await?;
        if !response.status().is_success() {
            return Err(ProviderError::Status(response.status().as_u16()));
        }
        Ok(response.json().await?)
    }

    /// Asks for a payment to be refunded; idempotent per payment.
    pub async fn refund(&self, payment_id: &str) -> Result<(), ProviderError> {
        let response = self
            .http
            .post(format!("{}/v1/refunds", self.base))
            .bearer_auth(secrecy::ExposeSecret::expose_secret(&self.api_key))
            .header("Idempotency-Key", format!("refund-{payment_id}"))
            .json(&CreateRefund {
                payment_id: payment_id.to_owned(),
            })
            .send()
            .await?;
        if !response.status().is_success() {
            return Err(ProviderError::Status(response.status().as_u16()));
        }
        Ok(())
    }
}
