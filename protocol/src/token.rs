//! Admission tokens: a signed, expiring pass for one reservation by one ticket in one sale.
//!
//! The format is the compact JWS shape (`header.payload.signature`, each base64url without padding)
//! so any JOSE tool can inspect one, signed with Ed25519 (`alg: EdDSA`). The header carries a key
//! id (`kid`): gateways sign with one current key, and the booking service accepts every key in its
//! configured set, so a key can be rotated by adding the new public key everywhere first, then
//! switching the gateways' signing key, then removing the old public key after the token TTL.
//!
//! Only gateways hold a private key. A leaked booking-service config therefore cannot mint tokens.

use std::collections::HashMap;

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine as _;
use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::UnixMillis;

/// The `typ` header value: keeps an admission token from being confused with any other JWT
/// signed by the same key.
pub const TOKEN_TYPE: &str = "fg-admission";
/// Tokens longer than this are refused before any decoding work (they are ~400 bytes in practice).
pub const MAX_TOKEN_LEN: usize = 2048;

/// What an admission token says.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdmissionClaims {
    /// The sale this token admits to; it is refused for any other sale.
    pub sale: String,
    /// The waiting-room ticket that was admitted.
    pub ticket: u64,
    /// Unique token id: the key of its single use in Redis.
    pub jti: String,
    /// The most seats one reservation with this token may take (the sale's setting at admission).
    pub max_seats: u32,
    /// Issued at, Unix ms.
    pub iat_ms: UnixMillis,
    /// Expires at, Unix ms. A token is refused from this instant on.
    pub exp_ms: UnixMillis,
    /// The buyer whose place in line was admitted, when they joined signed in: the booking
    /// service accepts the token only with that buyer's identity token beside it, so a pass
    /// copied to anyone else is useless to them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buyer: Option<String>,
}

#[derive(Serialize, Deserialize)]
struct Header {
    alg: String,
    typ: String,
    kid: String,
}

/// Why a token was refused. Each maps to a distinct API error code.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum TokenError {
    #[error("the token is not a well-formed admission token")]
    Malformed,
    #[error("the token was signed with an unknown key")]
    UnknownKey,
    #[error("the token's signature does not verify")]
    BadSignature,
    #[error("the token has expired")]
    Expired,
}

/// Signs admission tokens with one Ed25519 key.
#[derive(Clone)]
pub struct TokenSigner {
    kid: String,
    key: SigningKey,
}

impl std::fmt::Debug for TokenSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the private key, even in debug logs.
        f.debug_struct("TokenSigner")
            .field("kid", &self.kid)
            .finish()
    }
}

impl TokenSigner {
    /// A signer from a 32-byte Ed25519 seed (the private key).
    pub fn from_seed(kid: impl Into<String>, seed: &[u8; 32]) -> Self {
        Self {
            kid: kid.into(),
            key: SigningKey::from_bytes(seed),
        }
    }

    /// A signer from the base64url seed as written by `keygen`.
    pub fn from_base64(kid: impl Into<String>, seed: &str) -> Result<Self, KeyError> {
        let bytes = B64.decode(seed.trim()).map_err(|_| KeyError::Encoding)?;
        let seed: [u8; 32] = bytes.try_into().map_err(|_| KeyError::Length)?;
        Ok(Self::from_seed(kid, &seed))
    }

    /// A fresh random key: for tests and for `keygen`.
    pub fn generate(kid: impl Into<String>) -> Self {
        Self {
            kid: kid.into(),
            key: SigningKey::generate(&mut rand::rngs::OsRng),
        }
    }

    pub fn kid(&self) -> &str {
        &self.kid
    }

    /// The private seed, base64url: what `keygen` prints for the gateways' secret.
    pub fn seed_base64(&self) -> String {
        B64.encode(self.key.to_bytes())
    }

    /// The key of the resume tokens this signer's gateways make and check (derived from the
    /// private key, so a gateway needs no second secret).
    pub fn resume_key(&self) -> crate::resume::ResumeKey {
        crate::resume::ResumeKey::derive(&self.key.to_bytes())
    }

    /// The key of the proof-of-work puzzles this signer's gateways hand out and check (derived
    /// from the private key, like the resume key).
    pub fn challenge_key(&self) -> crate::challenge::ProofOfWork {
        crate::challenge::ProofOfWork::derive(&self.key.to_bytes())
    }

    /// The public key, base64url: what the booking service is configured with.
    pub fn public_base64(&self) -> String {
        B64.encode(self.key.verifying_key().to_bytes())
    }

    /// A verifier that accepts exactly this signer's tokens.
    pub fn verifier(&self) -> TokenVerifier {
        let mut keys = HashMap::new();
        keys.insert(self.kid.clone(), self.key.verifying_key());
        TokenVerifier { keys }
    }

    pub fn sign(&self, claims: &AdmissionClaims) -> String {
        let header = Header {
            alg: "EdDSA".into(),
            typ: TOKEN_TYPE.into(),
            kid: self.kid.clone(),
        };
        // Serialising these plain structs cannot fail.
        let header = B64.encode(serde_json::to_vec(&header).expect("header serialises"));
        let payload = B64.encode(serde_json::to_vec(claims).expect("claims serialise"));
        let signing_input = format!("{header}.{payload}");
        let signature = self.key.sign(signing_input.as_bytes());
        format!("{signing_input}.{}", B64.encode(signature.to_bytes()))
    }
}

/// Why a configured key could not be read.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum KeyError {
    #[error("key is not valid base64url")]
    Encoding,
    #[error("key must be exactly 32 bytes")]
    Length,
    #[error("public key is not a valid Ed25519 point")]
    Point,
    #[error("expected a list of kid=base64url entries separated by commas")]
    Syntax,
}

/// Verifies admission tokens against a set of public keys, by key id.
#[derive(Clone, Debug, Default)]
pub struct TokenVerifier {
    keys: HashMap<String, VerifyingKey>,
}

impl TokenVerifier {
    /// Parses `kid=base64url,kid2=base64url`: the format of `FLOODGATE_TOKEN_PUBLIC_KEYS`.
    pub fn from_list(list: &str) -> Result<Self, KeyError> {
        let mut keys = HashMap::new();
        for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let (kid, key) = entry.split_once('=').ok_or(KeyError::Syntax)?;
            let bytes = B64.decode(key.trim()).map_err(|_| KeyError::Encoding)?;
            let bytes: [u8; 32] = bytes.try_into().map_err(|_| KeyError::Length)?;
            let key = VerifyingKey::from_bytes(&bytes).map_err(|_| KeyError::Point)?;
            keys.insert(kid.trim().to_owned(), key);
        }
        if keys.is_empty() {
            return Err(KeyError::Syntax);
        }
        Ok(Self { keys })
    }

    /// Checks signature and expiry. The caller checks that the sale matches the request.
    pub fn verify(&self, token: &str, now: UnixMillis) -> Result<AdmissionClaims, TokenError> {
        // A pass is given out sealed for the edge: the seal is no part of what is checked.
        let token = crate::unsealed(token);
        if token.len() > MAX_TOKEN_LEN {
            return Err(TokenError::Malformed);
        }
        let mut parts = token.split('.');
        let (Some(header_b64), Some(payload_b64), Some(sig_b64), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(TokenError::Malformed);
        };
        let header: Header = B64
            .decode(header_b64)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .ok_or(TokenError::Malformed)?;
        if header.alg != "EdDSA" || header.typ != TOKEN_TYPE {
            return Err(TokenError::Malformed);
        }
        let key = self.keys.get(&header.kid).ok_or(TokenError::UnknownKey)?;
        let sig_bytes: [u8; 64] = B64
            .decode(sig_b64)
            .ok()
            .and_then(|b| b.try_into().ok())
            .ok_or(TokenError::Malformed)?;
        let signing_input = &token[..header_b64.len() + 1 + payload_b64.len()];
        key.verify(signing_input.as_bytes(), &Signature::from_bytes(&sig_bytes))
            .map_err(|_| TokenError::BadSignature)?;
        // Only a verified payload is parsed, so a forger cannot probe the JSON parser's errors.
        let claims: AdmissionClaims = B64
            .decode(payload_b64)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .ok_or(TokenError::Malformed)?;
        if now >= claims.exp_ms {
            return Err(TokenError::Expired);
        }
        Ok(claims)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(exp_ms: i64) -> AdmissionClaims {
        AdmissionClaims {
            sale: "s1".into(),
            ticket: 7,
            jti: "j1".into(),
            max_seats: 4,
            iat_ms: 1_000,
            exp_ms,
            buyer: None,
        }
    }

    #[test]
    fn a_signed_token_verifies_and_round_trips() {
        let signer = TokenSigner::generate("k1");
        let token = signer.sign(&claims(10_000));
        assert_eq!(signer.verifier().verify(&token, 5_000), Ok(claims(10_000)));
    }

    #[test]
    fn expired_tokens_are_refused() {
        let signer = TokenSigner::generate("k1");
        let token = signer.sign(&claims(10_000));
        assert_eq!(
            signer.verifier().verify(&token, 10_000),
            Err(TokenError::Expired)
        );
    }

    #[test]
    fn a_token_from_another_key_is_refused() {
        let ours = TokenSigner::generate("k1");
        let forger = TokenSigner::generate("k1");
        let token = forger.sign(&claims(10_000));
        assert_eq!(
            ours.verifier().verify(&token, 0),
            Err(TokenError::BadSignature)
        );
        let other_kid = TokenSigner::generate("k2").sign(&claims(10_000));
        assert_eq!(
            ours.verifier().verify(&other_kid, 0),
            Err(TokenError::UnknownKey)
        );
    }

    #[test]
    fn a_tampered_payload_is_refused() {
        let signer = TokenSigner::generate("k1");
        let token = signer.sign(&claims(10_000));
        let mut parts: Vec<String> = token.split('.').map(str::to_owned).collect();
        let mut forged = claims(10_000);
        forged.max_seats = 400;
        parts[1] = B64.encode(serde_json::to_vec(&forged).unwrap());
        assert_eq!(
            signer.verifier().verify(&parts.join("."), 0),
            Err(TokenError::BadSignature)
        );
    }

    #[test]
    fn garbage_is_malformed_not_a_panic() {
        let verifier = TokenSigner::generate("k1").verifier();
        for junk in ["", "a.b", "a.b.c.d", "!!!.???.***", &"x".repeat(5000)] {
            assert_eq!(
                verifier.verify(junk, 0),
                Err(TokenError::Malformed),
                "{junk}"
            );
        }
    }

    #[test]
    fn key_lists_parse_and_rotate() {
        let old = TokenSigner::generate("old");
        let new = TokenSigner::generate("new");
        let list = format!("old={}, new={}", old.public_base64(), new.public_base64());
        let verifier = TokenVerifier::from_list(&list).unwrap();
        assert!(verifier.verify(&old.sign(&claims(10)), 0).is_ok());
        assert!(verifier.verify(&new.sign(&claims(10)), 0).is_ok());
        assert_eq!(
            TokenVerifier::from_list("nonsense").unwrap_err(),
            KeyError::Syntax
        );
        let restored = TokenSigner::from_base64("new", &new.seed_base64()).unwrap();
        assert_eq!(restored.public_base64(), new.public_base64());
    }
}
