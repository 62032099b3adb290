//! Buyer identity: who is buying, as the operator's own sign-in says.
//!
//! Floodgate runs no accounts. The operator's sign-in (any OpenID Connect provider, or anything
//! that issues signed JWTs) gives each signed-in person an *identity token*; a client presents it
//! when it joins a waiting room and when it reserves. [`IdentityVerifier`] checks it against the
//! issuer's published keys (a JWKS document, fetched from a URL or read from a file, cached, and
//! refreshed when a token names a key id it has not seen: that is how the issuer rotates keys),
//! with the algorithms pinned by configuration, and `iss`, `aud`, `exp` (and `nbf` when present)
//! checked. The JOSE work is the maintained `jsonwebtoken` crate's; this module decides policy.
//!
//! What a verified token yields is a [`BuyerId`]: the issuer's subject (`sub`) as it is, or a
//! keyed hash of issuer and subject when the operator would rather Floodgate never store the
//! subject ([`BuyerIdForm`]). The token itself is never stored or logged; the buyer id is what the
//! admission token, the reservation, every event and the booking row carry.

//!
//! - [`verifier`]: the issuer's keys (JWKS), the policy and the check.
//! - [`issuer`]: an issuer's signing key, for the sign-in stand-in and the tests.
//! - [`args`]: the settings every service that checks identities takes.

mod args;
mod issuer;
mod key_set;
mod verifier;

pub use args::{on_loopback, IdentityArgs};
pub use issuer::{IssuedIdentity, IssuerKey};
pub use key_set::KeySource;
pub use verifier::{parse_algorithms, IdentityPolicy, IdentityVerifier};

use hmac::{Hmac, Mac};
use secrecy::{ExposeSecret, SecretString};
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
/// The algorithms accepted unless configured otherwise: asymmetric only. An HMAC algorithm would
/// let anyone holding the verification key mint identities, so none can be configured.
pub const DEFAULT_ALGORITHMS: &str = "EdDSA,ES256,RS256";

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

/// How a verified identity becomes a [`BuyerId`].
#[derive(Clone)]
pub enum BuyerIdForm {
    /// The issuer's `sub` as it is: bookings can be matched with the operator's accounts directly.
    Subject,
    /// HMAC-SHA256 of issuer and subject under the operator's key, 128 bits in hex: Floodgate's
    /// records name nobody, and only whoever holds the key can link a booking to an account.
    KeyedHash(SecretString),
}

impl BuyerIdForm {
    fn buyer(&self, issuer: &str, subject: &str) -> BuyerId {
        match self {
            BuyerIdForm::Subject => BuyerId(subject.to_owned()),
            BuyerIdForm::KeyedHash(key) => {
                let mut mac = Hmac::<Sha256>::new_from_slice(key.expose_secret().as_bytes())
                    .expect("HMAC takes a key of any length");
                mac.update(issuer.as_bytes());
                mac.update(b"\0");
                mac.update(subject.as_bytes());
                BuyerId(hex::encode(&mac.finalize().into_bytes()[..16]))
            }
        }
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
