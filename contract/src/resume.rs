//! Resume tokens: a client's signed claim to its ticket, so it keeps its place when it reconnects
//! (to any gateway) within the grace period after a disconnect.
//!
//! Only gateways make and check resume tokens, so they are MACs (HMAC-SHA256, truncated to 128
//! bits) rather than signatures: short enough to travel in a WebSocket close reason (at most 123
//! bytes), which is how a draining gateway hands them back. The key is derived from the
//! admission signing key every gateway already holds, so there is no second secret to deploy.
//!
//! Format: `r1:<sale>:<ticket>:<mac>` with the MAC in unpadded base64url. A token says nothing
//! about whether the ticket is still alive: Redis decides that (see `lua/resume.lua`).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

use crate::ids::check_sale_id;

const VERSION: &str = "r1";
/// Bytes of the MAC kept: 128 bits resist forgery as well as the ticket space needs.
const MAC_BYTES: usize = 16;

/// Why a resume token was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResumeError {
    #[error("the resume token is malformed or its signature does not match")]
    Invalid,
    #[error("the resume token belongs to sale {0}")]
    OtherSale(String),
}

/// Makes and checks resume tokens.
#[derive(Clone)]
pub struct ResumeKey {
    key: [u8; 32],
}

impl ResumeKey {
    /// Derives the resume key from the admission signing seed (domain-separated, so the MAC key
    /// reveals nothing about the signing key).
    pub fn derive(signing_seed: &[u8]) -> Self {
        let mut hasher = Sha256::new();
        hasher.update(b"floodgate resume token key v1\0");
        hasher.update(signing_seed);
        Self {
            key: hasher.finalize().into(),
        }
    }

    pub fn issue(&self, sale: &str, ticket: u64) -> String {
        let mac = URL_SAFE_NO_PAD.encode(self.mac(sale, ticket));
        format!("{VERSION}:{sale}:{ticket}:{mac}")
    }

    /// The ticket `token` stands for, if it is genuine and for `sale`.
    pub fn verify(&self, token: &str, sale: &str) -> Result<u64, ResumeError> {
        let mut parts = token.split(':');
        let (Some(VERSION), Some(token_sale), Some(ticket), Some(mac), None) = (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        ) else {
            return Err(ResumeError::Invalid);
        };
        let ticket: u64 = ticket.parse().map_err(|_| ResumeError::Invalid)?;
        check_sale_id(token_sale).map_err(|_| ResumeError::Invalid)?;
        let mac = URL_SAFE_NO_PAD
            .decode(mac)
            .map_err(|_| ResumeError::Invalid)?;
        // Verify before comparing sales: only a genuine token may learn which sale it is for.
        if mac.len() != MAC_BYTES
            || self
                .hmac(token_sale, ticket)
                .verify_truncated_left(&mac)
                .is_err()
        {
            return Err(ResumeError::Invalid);
        }
        if token_sale != sale {
            return Err(ResumeError::OtherSale(token_sale.to_owned()));
        }
        Ok(ticket)
    }

    fn hmac(&self, sale: &str, ticket: u64) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key).expect("any key length works");
        mac.update(sale.as_bytes());
        mac.update(b"\0");
        mac.update(&ticket.to_be_bytes());
        mac
    }

    fn mac(&self, sale: &str, ticket: u64) -> [u8; MAC_BYTES] {
        let full = self.hmac(sale, ticket).finalize().into_bytes();
        full[..MAC_BYTES].try_into().expect("16 bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_round_trips_and_fits_in_a_close_reason() {
        let key = ResumeKey::derive(&[7; 32]);
        let sale = "a".repeat(64);
        let token = key.issue(&sale, u64::MAX);
        assert!(token.len() <= 123, "{} bytes", token.len());
        assert_eq!(key.verify(&token, &sale), Ok(u64::MAX));
    }

    #[test]
    fn forged_altered_and_foreign_tokens_are_refused() {
        let key = ResumeKey::derive(&[7; 32]);
        let token = key.issue("s1", 42);
        let other_key = ResumeKey::derive(&[8; 32]);
        assert_eq!(
            other_key.verify(&token, "s1"),
            Err(ResumeError::Invalid),
            "made with another key"
        );
        let altered = token.replace(":42:", ":41:");
        assert_eq!(key.verify(&altered, "s1"), Err(ResumeError::Invalid));
        assert_eq!(
            key.verify(&token, "s2"),
            Err(ResumeError::OtherSale("s1".into()))
        );
        for junk in [
            "",
            "r1",
            "r1:s1:42",
            "r1:s1:x:abc",
            "r2:s1:42:abc",
            "r1:s1:42:!!",
        ] {
            assert_eq!(key.verify(junk, "s1"), Err(ResumeError::Invalid), "{junk}");
        }
    }
}
