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
use sha2::Sha256;

use floodgate_protocol::identity::BuyerId;

/// The algorithms accepted unless configured otherwise: asymmetric only. An HMAC algorithm would
/// let anyone holding the verification key mint identities, so none can be configured.
pub const DEFAULT_ALGORITHMS: &str = "EdDSA,ES256,RS256";

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
            BuyerIdForm::Subject => BuyerId::new(subject),
            BuyerIdForm::KeyedHash(key) => {
                let mut mac = Hmac::<Sha256>::new_from_slice(key.expose_secret().as_bytes())
                    .expect("HMAC takes a key of any length");
                mac.update(issuer.as_bytes());
                mac.update(b"\0");
                mac.update(subject.as_bytes());
                BuyerId::new(hex::encode(&mac.finalize().into_bytes()[..16]))
            }
        }
    }
}
