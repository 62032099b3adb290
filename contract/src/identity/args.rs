//! The identity settings of the services.

use std::path::PathBuf;
use std::time::Duration;

use secrecy::SecretString;

use super::{
    parse_algorithms, BuyerIdForm, IdentityPolicy, IdentityVerifier, KeySource, DEFAULT_ALGORITHMS,
};
use std::sync::Arc;

/// The identity settings of a service that checks identities (the gateway and the booking
/// service take the same ones, and must be given the same values: the booking service
/// recomputes the buyer a gateway bound into each admission token).
#[derive(Clone, Debug, clap::Args)]
pub struct IdentityArgs {
    /// The identity issuer (`iss` of the operator's sign-in tokens). Unset: no identities are
    /// checked, and sales that require one cannot be joined.
    #[arg(long, env = "FLOODGATE_IDENTITY_ISSUER")]
    pub identity_issuer: Option<String>,
    /// The audience identity tokens must be issued for (`aud`): this deployment's client id.
    #[arg(long, env = "FLOODGATE_IDENTITY_AUDIENCE")]
    pub identity_audience: Option<String>,
    /// Where the issuer publishes its keys (its JWKS `jwks_uri`).
    #[arg(long, env = "FLOODGATE_IDENTITY_JWKS_URL")]
    pub identity_jwks_url: Option<String>,
    /// A JWKS file instead of a URL (re-read when a token names a key it does not hold).
    #[arg(long, env = "FLOODGATE_IDENTITY_JWKS_FILE")]
    pub identity_jwks_file: Option<PathBuf>,
    /// The signature algorithms accepted, comma-separated; symmetric ones are refused.
    #[arg(long, env = "FLOODGATE_IDENTITY_ALGORITHMS", default_value = DEFAULT_ALGORITHMS)]
    pub identity_algorithms: String,
    /// Clock skew allowed on a token's `exp` and `nbf`, seconds.
    #[arg(long, env = "FLOODGATE_IDENTITY_LEEWAY_SECS", default_value_t = 30)]
    pub identity_leeway_secs: u64,
    /// What Floodgate stores as the buyer: `subject` (the issuer's `sub`) or `hash` (a keyed
    /// hash of issuer and subject, with FLOODGATE_BUYER_ID_KEY).
    #[arg(long, env = "FLOODGATE_BUYER_ID", default_value = "subject")]
    pub buyer_id: String,
    /// The key of the `hash` form: at least 32 characters, the same on every service.
    #[arg(long, env = "FLOODGATE_BUYER_ID_KEY", hide_env_values = true)]
    pub buyer_id_key: Option<SecretString>,
}

impl IdentityArgs {
    /// The policy these settings describe, or `None` when no issuer is configured.
    pub fn policy(&self) -> Result<Option<IdentityPolicy>, String> {
        let Some(issuer) = self.identity_issuer.clone() else {
            return Ok(None);
        };
        let audience = self.identity_audience.clone().ok_or(
            "FLOODGATE_IDENTITY_AUDIENCE is required with FLOODGATE_IDENTITY_ISSUER".to_owned(),
        )?;
        let keys = match (&self.identity_jwks_url, &self.identity_jwks_file) {
            (Some(url), None) => KeySource::Url(url.clone()),
            (None, Some(path)) => KeySource::File(path.clone()),
            _ => {
                return Err("set one of FLOODGATE_IDENTITY_JWKS_URL and \
                     FLOODGATE_IDENTITY_JWKS_FILE"
                    .into())
            }
        };
        let buyer_id = match (self.buyer_id.as_str(), &self.buyer_id_key) {
            ("subject", _) => BuyerIdForm::Subject,
            ("hash", Some(key)) => {
                crate::secrets::check_secret("FLOODGATE_BUYER_ID_KEY", key)?;
                BuyerIdForm::KeyedHash(key.clone())
            }
            ("hash", None) => {
                return Err("FLOODGATE_BUYER_ID=hash needs FLOODGATE_BUYER_ID_KEY".into())
            }
            (other, _) => {
                return Err(format!(
                    "FLOODGATE_BUYER_ID is subject or hash, not {other}"
                ))
            }
        };
        Ok(Some(IdentityPolicy {
            issuer,
            audience,
            algorithms: parse_algorithms(&self.identity_algorithms)?,
            leeway: Duration::from_secs(self.identity_leeway_secs),
            buyer_id,
            keys,
        }))
    }

    /// The verifier these settings describe, with its keys loaded, or `None` without an issuer.
    pub async fn verifier(&self) -> Result<Option<Arc<IdentityVerifier>>, String> {
        match self.policy()? {
            Some(policy) => IdentityVerifier::new(policy).await.map(Some),
            None => Ok(None),
        }
    }
}
