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
//!
//! Checking a signature costs one HMAC over the body, however the header is written: the MAC is
//! computed once and each `v1` entry compared with it. A header may carry at most
//! [`MAX_SIGNATURES`] entries, each exactly a SHA-256's 64 lowercase hex digits, and one `t`;
//! anything else is malformed before any hashing, so a stranger's stuffed header costs a parse
//! of at most the header's own bytes.

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

/// The webhook signature header.
pub const SIGNATURE_HEADER: &str = "floodgate-signature";

/// The most `v1` entries one header may carry: a provider rolling its secret signs with the old
/// and the new one (two), and two more leave room for a rollback in the middle of one.
pub const MAX_SIGNATURES: usize = 4;

/// A `v1` entry's length: the hex of an HMAC-SHA256.
const SIGNATURE_HEX: usize = 64;

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

/// HMAC-SHA256 of `"<timestamp>.<body>"`: what a `v1` entry carries, in hex.
fn mac_of(secret: &[u8], timestamp: i64, body: &[u8]) -> [u8; 32] {
    let mut mac = HmacSha256::new_from_slice(secret).expect("HMAC takes any key length");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    mac.finalize().into_bytes().into()
}

/// The signature header value for `body` sent at `timestamp` (Unix seconds).
pub fn sign(secret: &[u8], timestamp: i64, body: &[u8]) -> String {
    format!(
        "t={timestamp},v1={}",
        hex::encode(mac_of(secret, timestamp, body))
    )
}

/// A signature header, read: its one timestamp and its `v1` entries.
#[derive(Debug, PartialEq, Eq)]
pub struct SignatureHeader {
    pub timestamp: i64,
    signatures: Vec<[u8; 32]>,
}

impl SignatureHeader {
    /// Reads a header: exactly one `t=<seconds>`, one to [`MAX_SIGNATURES`] `v1=<64 lowercase
    /// hex>`; entries of other schemes (a provider's future `v2`) are passed over, as providers
    /// ask of their receivers, but counted against the same bound.
    pub fn parse(header: &str) -> Result<Self, SignatureError> {
        let mut timestamp = None;
        let mut signatures = Vec::new();
        for (n, part) in header.split(',').enumerate() {
            if n >= 2 * MAX_SIGNATURES {
                return Err(SignatureError::Malformed);
            }
            match part.trim().split_once('=') {
                Some(("t", t)) if timestamp.is_none() => {
                    timestamp = Some(t.parse::<i64>().map_err(|_| SignatureError::Malformed)?)
                }
                Some(("v1", sig)) if signatures.len() < MAX_SIGNATURES => {
                    signatures.push(signature_of(sig).ok_or(SignatureError::Malformed)?)
                }
                Some((scheme, _)) if scheme != "t" && scheme != "v1" => {}
                _ => return Err(SignatureError::Malformed),
            }
        }
        let timestamp = timestamp.ok_or(SignatureError::Malformed)?;
        if signatures.is_empty() {
            return Err(SignatureError::Malformed);
        }
        Ok(Self {
            timestamp,
            signatures,
        })
    }
}

/// A `v1` entry's bytes, if it is 64 lowercase hex digits.
fn signature_of(hex_digits: &str) -> Option<[u8; 32]> {
    let lowercase = |b: &u8| b.is_ascii_digit() || (b'a'..=b'f').contains(b);
    if hex_digits.len() != SIGNATURE_HEX || !hex_digits.as_bytes().iter().all(lowercase) {
        return None;
    }
    let mut bytes = [0u8; 32];
    hex::decode_to_slice(hex_digits, &mut bytes).ok()?;
    Some(bytes)
}

/// Checks a webhook's signature header against its raw body: one HMAC, whatever the header.
pub fn verify(
    secret: &[u8],
    header: Option<&str>,
    body: &[u8],
    now_secs: i64,
    tolerance_secs: u64,
) -> Result<(), SignatureError> {
    let header = SignatureHeader::parse(header.ok_or(SignatureError::Missing)?)?;
    if now_secs.abs_diff(header.timestamp) > tolerance_secs {
        return Err(SignatureError::Stale);
    }
    let expected = mac_of(secret, header.timestamp, body);
    // Every entry is compared (in constant time), so the time taken says nothing of which one
    // matched or how closely.
    let matched = header
        .signatures
        .iter()
        .fold(false, |any, sig| crate::same_secret(sig, &expected) | any);
    if matched {
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

    /// A stuffed header is refused before any hashing: too many entries, an entry that is not
    /// a SHA-256's 64 lowercase hex digits, two timestamps.
    #[test]
    fn a_header_is_bounded_and_exact() {
        let good = sign(SECRET, 5, b"x");
        let v1 = good.split(',').nth(1).unwrap().to_owned();
        let wrong = format!("v1={}", "00".repeat(32));
        let at_most = format!("t=5,{}", [wrong.as_str(); MAX_SIGNATURES - 1].join(","));
        assert_eq!(
            verify(SECRET, Some(&format!("{at_most},{v1}")), b"x", 5, 300),
            Ok(()),
            "the most entries a header may carry, the good one last"
        );
        let stuffed = format!("t=5,{}", vec![wrong.as_str(); 1_300].join(","));
        let over = format!("t=5,{},{v1}", [wrong.as_str(); MAX_SIGNATURES].join(","));
        let upper = format!("t=5,{}", v1.to_uppercase().replace("V1=", "v1="));
        for junk in [
            stuffed.as_str(),
            over.as_str(),
            upper.as_str(),
            "t=5,v1=00",
            &format!("t=5,{v1}00"),
            &format!("t=5,t=6,{v1}"),
            &format!("t=5,{v1},junk"),
        ] {
            assert_eq!(
                SignatureHeader::parse(junk).map(|_| ()),
                Err(SignatureError::Malformed),
                "{}",
                &junk[..junk.len().min(80)]
            );
        }
        // Another scheme's entry is passed over, as a provider adding one would send it.
        let with_v2 = format!("t=5,v2=anything,{v1}");
        assert_eq!(verify(SECRET, Some(&with_v2), b"x", 5, 300), Ok(()));
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
