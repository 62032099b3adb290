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
    /// Test mode only: fetch the key set over plain http from a host that is not this one's
    /// loopback (the sandbox's sign-in in the compose file or a local cluster). Never for a real
    /// issuer: whoever sits on the path could replace the keys that decide who every buyer is.
    #[arg(
        long,
        env = "FLOODGATE_IDENTITY_JWKS_ALLOW_HTTP",
        default_value_t = false
    )]
    pub identity_jwks_allow_http: bool,
    /// A JWKS file instead of a URL (re-read when a token names a key it does not hold).
    #[arg(long, env = "FLOODGATE_IDENTITY_JWKS_FILE")]
    pub identity_jwks_file: Option<PathBuf>,
    /// The signature algorithms accepted, comma-separated; symmetric ones are refused.
    #[arg(long, env = "FLOODGATE_IDENTITY_ALGORITHMS", default_value = DEFAULT_ALGORITHMS)]
    pub identity_algorithms: String,
    /// Clock skew allowed on a token's `exp` and `nbf`, seconds.
    #[arg(
        long = "identity-leeway-secs",
        env = "FLOODGATE_IDENTITY_LEEWAY_SECS",
        default_value = "30",
        value_parser = crate::settings::secs
    )]
    pub identity_leeway: Duration,
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
            (Some(url), None) => {
                KeySource::Url(check_key_set_url(url, self.identity_jwks_allow_http)?)
            }
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
            leeway: self.identity_leeway,
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

/// The key set's URL, if it is https, or plain http to a loopback issuer (one on this host,
/// which nobody on a network path can answer for) or, in test mode (`allow_http`), to any. The
/// refusal names the setting, not the URL, which may carry credentials.
/// Whether `url`'s host is this machine's loopback (`localhost`, 127.0.0.0/8, `::1`): nobody on
/// a network path can answer for it, so plain http there is as good as https.
pub fn on_loopback(url: &reqwest::Url) -> bool {
    let host = url.host_str().unwrap_or_default();
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

fn check_key_set_url(url: &str, allow_http: bool) -> Result<String, String> {
    let parsed = reqwest::Url::parse(url)
        .map_err(|_| "FLOODGATE_IDENTITY_JWKS_URL is not a URL".to_owned())?;
    let loopback = on_loopback(&parsed);
    match parsed.scheme() {
        "https" => Ok(url.to_owned()),
        "http" if loopback || allow_http => Ok(url.to_owned()),
        _ => Err(
            "FLOODGATE_IDENTITY_JWKS_URL must be an https:// URL (plain http only to an issuer \
             on this host's loopback, or with FLOODGATE_IDENTITY_JWKS_ALLOW_HTTP=true in test \
             mode): the keys decide who every buyer is"
                .to_owned(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::check_key_set_url;

    #[test]
    fn the_key_set_is_fetched_over_https_or_from_loopback_only() {
        for good in [
            "https://login.example/.well-known/jwks.json",
            "http://127.0.0.1:8082/.well-known/jwks.json",
            "http://localhost:8082/jwks",
            "http://[::1]:8082/jwks",
        ] {
            assert!(check_key_set_url(good, false).is_ok(), "{good}");
        }
        for bad in [
            "http://login.example/jwks",
            "http://10.0.0.1/jwks",
            "ftp://login.example/jwks",
            "not a url",
        ] {
            let refused = check_key_set_url(bad, false).unwrap_err();
            assert!(refused.contains("FLOODGATE_IDENTITY_JWKS_URL"), "{refused}");
            assert!(
                !refused.contains("login.example"),
                "the URL stays out: {refused}"
            );
        }
        // A sandbox on the compose network, asked for by name.
        assert!(check_key_set_url("http://sandbox:8082/jwks", true).is_ok());
        assert!(check_key_set_url("ftp://sandbox/jwks", true).is_err());
    }
}
