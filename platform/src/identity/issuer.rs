//! An issuer's signing key and the claims it signs.

use std::time::Duration;

use jsonwebtoken::Algorithm;
use serde::Deserialize;

/// An issuer's signing key: the demo's sign-in stand-in and the tests sign identity tokens with
/// it, exactly as an operator's sign-in would (EdDSA, a key id, a JWKS document to publish).
pub struct IssuerKey {
    kid: String,
    key: ed25519_dalek::SigningKey,
}

impl IssuerKey {
    pub fn generate(kid: impl Into<String>) -> Self {
        Self {
            kid: kid.into(),
            key: ed25519_dalek::SigningKey::generate(&mut rand::rngs::OsRng),
        }
    }

    /// A key from its 32-byte seed (the stand-in derives its key from a configured secret).
    pub fn from_seed(kid: impl Into<String>, seed: &[u8; 32]) -> Self {
        Self {
            kid: kid.into(),
            key: ed25519_dalek::SigningKey::from_bytes(seed),
        }
    }

    pub fn kid(&self) -> &str {
        &self.kid
    }

    /// The public key as a JWK.
    pub fn jwk(&self) -> serde_json::Value {
        use base64::Engine as _;
        let x = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(self.key.verifying_key().to_bytes());
        serde_json::json!({
            "kty": "OKP", "crv": "Ed25519", "x": x, "kid": self.kid, "alg": "EdDSA", "use": "sig",
        })
    }

    /// A JWKS document publishing `keys`.
    pub fn jwks(keys: &[&IssuerKey]) -> serde_json::Value {
        serde_json::json!({ "keys": keys.iter().map(|k| k.jwk()).collect::<Vec<_>>() })
    }

    /// `claims` signed as a JWT (EdDSA, with this key's id).
    pub fn sign(&self, claims: &impl serde::Serialize) -> String {
        use ed25519_dalek::pkcs8::EncodePrivateKey as _;
        let der = self
            .key
            .to_pkcs8_der()
            .expect("an Ed25519 key encodes as PKCS#8");
        let mut header = jsonwebtoken::Header::new(Algorithm::EdDSA);
        header.kid = Some(self.kid.clone());
        jsonwebtoken::encode(
            &header,
            claims,
            &jsonwebtoken::EncodingKey::from_ed_der(der.as_bytes()),
        )
        .expect("signing with a valid Ed25519 key")
    }
}

/// The claims of a sign-in's identity token, as the stand-in and the tests issue them.
#[derive(Clone, Debug, serde::Serialize, Deserialize)]
pub struct IssuedIdentity {
    pub iss: String,
    pub aud: String,
    pub sub: String,
    /// Issued at and expiry, Unix seconds.
    pub iat: u64,
    pub exp: u64,
    /// The sign-in request's nonce, echoed (OpenID Connect): the page checks it is the one it
    /// sent, so a token from another sign-in is not taken for this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nonce: Option<String>,
}

impl IssuedIdentity {
    /// Claims for `sub`, valid from now for `lifetime`.
    pub fn new(iss: &str, aud: &str, sub: &str, lifetime: Duration) -> Self {
        let now = (floodgate_protocol::now_millis() / 1000) as u64;
        Self {
            iss: iss.to_owned(),
            aud: aud.to_owned(),
            sub: sub.to_owned(),
            iat: now,
            exp: now + lifetime.as_secs(),
            nonce: None,
        }
    }
}
