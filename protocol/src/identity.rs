//! Buyer identity on the wire: where a client carries its identity token, how long one may be,
//! the [`BuyerId`] every record names, and why a token is refused.
//!
//! Checking a token against the issuer's keys is the services' work (the platform crate's
//! `identity` module); a client only needs to know where to put it and what a refusal means.

use sha2::{Digest, Sha256};

use crate::api::code;

/// The header a non-browser client sends its identity token in (`Floodgate-Identity: <token>`),
/// at join and on every booking request.
pub const IDENTITY_HEADER: &str = "floodgate-identity";
/// Browsers cannot set headers on a WebSocket: the page offers the identity token as a second
/// subprotocol, `floodgate-identity.<token>` (every JWT character is allowed there), beside
/// [`crate::ws::SUBPROTOCOL`], which is the one the gateway answers with.
pub const IDENTITY_SUBPROTOCOL_PREFIX: &str = "floodgate-identity.";
/// Identity tokens longer than this are refused before any decoding (an OIDC ID token is
/// usually under 2 KB).
pub const MAX_IDENTITY_TOKEN_LEN: usize = 8 * 1024;
/// The longest subject accepted (OpenID Connect: at most 255 ASCII characters).
pub const MAX_SUBJECT_LEN: usize = 255;
/// A buyer, as Floodgate stores it: the issuer's subject, or its keyed hash.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BuyerId(String);

impl BuyerId {
    /// A buyer id as carried in an admission token or read back from storage.
    pub fn new(id: impl Into<String>) -> Self {
        Self(id.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The buyer's name inside Redis keys: SHA-256 of the id, in hex. Fixed length and plain
    /// hex whatever the subject holds (a `}` in a subject would otherwise move the key's hash
    /// tag), and it spreads buyers evenly over the cluster's slots.
    pub fn key_tag(&self) -> String {
        hex::encode(Sha256::digest(self.0.as_bytes()))
    }
}

impl std::fmt::Display for BuyerId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Why an identity token was refused. Each has its own error code ([`IdentityError::code`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IdentityError {
    #[error("the identity token is not a well-formed JWT")]
    Malformed,
    #[error("the identity token is signed with an algorithm this service does not accept")]
    Algorithm,
    #[error("the identity token names a signing key the issuer does not publish")]
    UnknownKey,
    #[error("the identity token's signature does not verify")]
    BadSignature,
    #[error("the identity token has expired; sign in again")]
    Expired,
    #[error("the identity token is not valid yet")]
    NotYetValid,
    #[error("the identity token was issued by another issuer")]
    WrongIssuer,
    #[error("the identity token was issued for another audience")]
    WrongAudience,
    #[error("the identity token names no subject")]
    NoSubject,
    #[error("identities cannot be checked right now (the issuer's keys are unavailable)")]
    Unavailable,
}

impl IdentityError {
    /// The API error code of this refusal.
    pub fn code(self) -> &'static str {
        match self {
            IdentityError::Malformed => code::IDENTITY_MALFORMED,
            IdentityError::Algorithm => code::IDENTITY_ALGORITHM,
            IdentityError::UnknownKey => code::IDENTITY_UNKNOWN_KEY,
            IdentityError::BadSignature => code::IDENTITY_INVALID,
            IdentityError::Expired => code::IDENTITY_EXPIRED,
            IdentityError::NotYetValid => code::IDENTITY_NOT_YET_VALID,
            IdentityError::WrongIssuer => code::IDENTITY_WRONG_ISSUER,
            IdentityError::WrongAudience => code::IDENTITY_WRONG_AUDIENCE,
            IdentityError::NoSubject => code::IDENTITY_NO_SUBJECT,
            IdentityError::Unavailable => code::IDENTITY_UNAVAILABLE,
        }
    }

    /// Whether the client is at fault (401) rather than the service (503).
    pub fn is_client_error(self) -> bool {
        self != IdentityError::Unavailable
    }
}
