//! The payment provider's API as Floodgate speaks it, and its signed webhooks.
//!
//! The provider is any service that speaks this small API (the sandbox, `floodgate-sandbox`,
//! does): `POST /v1/payments` creates a payment for a reservation and returns a checkout URL
//! the payer completes; `POST /v1/refunds` refunds a payment. Outcomes arrive later as webhooks
//! `POST /v1/payments/webhook`, signed like the large providers sign theirs:
//!
//! `Floodgate-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>`
//!
//! A webhook is accepted only with a valid signature and a timestamp within the tolerance
//! (replays of a captured delivery are refused once it is stale), and each provider event id is
//! processed once (the pool scripts remember outcomes), so duplicate and out-of-order deliveries
//! are harmless.

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

/// The webhook signature header.
pub const SIGNATURE_HEADER: &str = "floodgate-signature";

type HmacSha256 = Hmac<Sha256>;

/// Why a webhook's signature was refused.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("the Floodgate-Signature header is missing")]
    Missing,
    #[error("the Floodgate-Signature header is not t=<seconds>,v1=<hex>")]
    Malformed,
    #[error("the signed timestamp is outside the accepted window")]
    Stale,
    #[error("the signature does not match")]
    Invalid,
}

/// The signature header value for `body` sent at `timestamp` (Unix seconds).
pub fn sign(secret: &[u8], timestamp: i64, body: &[u8]) -> String {
    let mut mac = HmacSha256::new_from_slice(secret).expect("HMAC takes any key length");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!(
        "t={timestamp},v1={}",
        hex::encode(mac.finalize().into_bytes())
    )
}

/// Checks a webhook's signature header against its raw body.
pub fn verify(
    secret: &[u8],
    header: Option<&str>,
    body: &[u8],
    now_secs: i64,
    tolerance_secs: u64,
) -> Result<(), SignatureError> {
    let header = header.ok_or(SignatureError::Missing)?;
    let mut timestamp = None;
    let mut signatures = Vec::new();
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", t)) => timestamp = t.parse::<i64>().ok(),
            // Several v1 entries are allowed, as during a secret rotation.
            Some(("v1", sig)) => {
                signatures.push(hex::decode(sig).map_err(|_| SignatureError::Malformed)?)
            }
            _ => {}
        }
    }
    let timestamp = timestamp.ok_or(SignatureError::Malformed)?;
    if signatures.is_empty() {
        return Err(SignatureError::Malformed);
    }
    if now_secs.abs_diff(timestamp) > tolerance_secs {
        return Err(SignatureError::Stale);
    }
    let matches = signatures.iter().any(|sig| {
        let mut mac = HmacSha256::new_from_slice(secret).expect("HMAC takes any key length");
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        // verify_slice compares in constant time.
        mac.verify_slice(sig).is_ok()
    });
    if matches {
        Ok(())
    } else {
        Err(SignatureError::Invalid)
    }
}

/// A webhook delivery's body.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct WebhookEvent {
    /// The provider's event id: a redelivery carries the same id.
    #[schema(min_length = 1, max_length = 128, pattern = r"^[A-Za-z0-9_-]{1,128}$")]
    pub id: String,
    /// `payment.succeeded`, `payment.failed`, `refund.succeeded` or `refund.failed`; other types
    /// are acknowledged and ignored, as providers add types over time.
    #[serde(rename = "type")]
    pub kind: String,
    /// When the provider created the event, Unix seconds.
    pub created: i64,
    pub data: PaymentObject,
}

/// A payment as the provider describes it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PaymentObject {
    pub payment_id: String,
    /// The reservation id this service gave when creating the payment.
    pub reference: String,
    pub sale: String,
    pub amount_minor: i64,
    pub currency: String,
}

/// `POST /v1/payments` request.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CreatePayment {
    pub reference: String,
    pub sale: String,
    pub amount_minor: i64,
    pub currency: String,
}

/// `POST /v1/payments` answer.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CreatedPayment {
    pub payment_id: String,
    pub status: String,
    /// Where the payer completes the payment.
    pub checkout_url: String,
}

/// `POST /v1/refunds` request.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CreateRefund {
    pub payment_id: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"whsec_test";

    #[test]
    fn a_signed_body_verifies() {
        let header = sign(SECRET, 1_000, b"{}");
        assert_eq!(verify(SECRET, Some(&header), b"{}", 1_010, 300), Ok(()));
    }

    #[test]
    fn tampering_staleness_and_garbage_are_refused() {
        let header = sign(SECRET, 1_000, b"{\"a\":1}");
        assert_eq!(
            verify(SECRET, Some(&header), b"{\"a\":2}", 1_000, 300),
            Err(SignatureError::Invalid)
        );
        assert_eq!(
            verify(b"other", Some(&header), b"{\"a\":1}", 1_000, 300),
            Err(SignatureError::Invalid)
        );
        assert_eq!(
            verify(SECRET, Some(&header), b"{\"a\":1}", 1_301, 300),
            Err(SignatureError::Stale)
        );
        assert_eq!(
            verify(SECRET, Some(&header), b"{\"a\":1}", 699, 300),
            Err(SignatureError::Stale)
        );
        assert_eq!(
            verify(SECRET, None, b"", 0, 300),
            Err(SignatureError::Missing)
        );
        for junk in ["", "t=abc,v1=00", "t=1000", "v1=00", "t=1000,v1=zz"] {
            assert_eq!(
                verify(SECRET, Some(junk), b"", 1_000, 300),
                Err(SignatureError::Malformed),
                "{junk}"
            );
        }
    }

    #[test]
    fn any_of_several_signatures_may_match() {
        let good = sign(SECRET, 5, b"x");
        let header = format!(
            "t=5,v1={},{}",
            "00".repeat(32),
            good.split(',').nth(1).unwrap()
        );
        assert_eq!(verify(SECRET, Some(&header), b"x", 5, 300), Ok(()));
    }
}
