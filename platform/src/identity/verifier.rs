//! Checking identity tokens against the issuer's published keys.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use tokio::time::Instant;

use super::key_set::{self, KeyRing, KeySource};
use super::BuyerIdForm;
use floodgate_protocol::identity::{
    BuyerId, IdentityError, MAX_IDENTITY_TOKEN_LEN, MAX_SUBJECT_LEN,
};

/// What a valid identity token must say, and how it becomes a buyer.
#[derive(Clone)]
pub struct IdentityPolicy {
    pub issuer: String,
    pub audience: String,
    pub algorithms: Vec<Algorithm>,
    /// Clock skew allowed on `exp` and `nbf`.
    pub leeway: Duration,
    pub buyer_id: BuyerIdForm,
    pub keys: KeySource,
}

/// Parses a comma-separated list of JWS algorithm names, refusing any symmetric one.
pub fn parse_algorithms(list: &str) -> Result<Vec<Algorithm>, String> {
    let mut out = Vec::new();
    for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let alg: Algorithm = name
            .parse()
            .map_err(|_| format!("{name} is not a JWS algorithm name"))?;
        if matches!(alg, Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512) {
            return Err(format!(
                "{name} is symmetric: whoever can verify could also mint identities"
            ));
        }
        out.push(alg);
    }
    if out.is_empty() {
        return Err("name at least one algorithm".into());
    }
    Ok(out)
}

/// The registered claims every identity token must carry.
const REQUIRED_CLAIMS: &[&str] = &[
    // expiry, issuer, audience, subject
    "exp", "iss", "aud", "sub",
];

/// The claims an identity token must carry (the rest are ignored).
#[derive(Deserialize)]
struct Claims {
    sub: Option<String>,
}

/// Checks identity tokens. Cheap to share: one per process, behind an `Arc`.
pub struct IdentityVerifier {
    policy: IdentityPolicy,
    ring: RwLock<Arc<KeyRing>>,
    /// When the keys were last fetched (or a fetch last tried); held while a fetch runs.
    fetched: tokio::sync::Mutex<Option<Instant>>,
    http: reqwest::Client,
}

/// Least time between two fetches of the issuer's keys prompted by an unknown key id: a flood of
/// tokens naming made-up key ids costs the issuer one fetch per process per interval, and a key
/// the issuer just started signing with is picked up within it.
const REFETCH_INTERVAL: Duration = Duration::from_secs(2);
/// Keys older than this are fetched again (in the background; the old ones serve meanwhile).
const KEYS_MAX_AGE: Duration = Duration::from_secs(600);
impl IdentityVerifier {
    /// A verifier for `policy`, with its keys loaded. An unreachable issuer is not fatal (it is
    /// logged, and tokens are refused as [`IdentityError::Unavailable`] until a fetch succeeds);
    /// a key file that cannot be read is.
    pub async fn new(policy: IdentityPolicy) -> Result<Arc<Self>, String> {
        let verifier = Arc::new(Self {
            policy,
            ring: RwLock::new(Arc::new(KeyRing::default())),
            fetched: tokio::sync::Mutex::new(None),
            http: key_set::client()?,
        });
        match (&verifier.policy.keys, verifier.refresh().await) {
            (_, Ok(())) => {}
            (KeySource::File(path), Err(e)) => {
                return Err(format!("identity keys from {}: {e}", path.display()))
            }
            // The URL is not logged: it may carry credentials (FLOODGATE_IDENTITY_JWKS_URL
            // names it for whoever runs the service).
            (KeySource::Url(_), Err(e)) => {
                tracing::error!(error = %e, "the identity issuer's keys (FLOODGATE_IDENTITY_JWKS_URL) could not be fetched; identities are refused until they can");
            }
        }
        Ok(verifier)
    }

    /// Fetches the issuer's keys now and replaces the ones held.
    pub async fn refresh(&self) -> Result<(), String> {
        let mut fetched = self.fetched.lock().await;
        *fetched = Some(Instant::now());
        self.load().await
    }

    /// Reads the JWKS document and replaces the keys held (the caller holds `fetched`, so one
    /// fetch runs at a time and those waiting see its result).
    async fn load(&self) -> Result<(), String> {
        let doc = match &self.policy.keys {
            KeySource::File(path) => tokio::fs::read(path).await.map_err(|e| e.to_string())?,
            KeySource::Url(url) => key_set::fetch(&self.http, url).await?,
        };
        let ring = KeyRing::from_jwks(&doc, &self.policy.algorithms)?;
        tracing::info!(keys = ring.keys.len(), "identity keys loaded");
        *self.ring.write().expect("key ring lock") = Arc::new(ring);
        Ok(())
    }

    /// The buyer an identity token names, if it is genuine, current and for this service.
    pub async fn verify(self: &Arc<Self>, token: &str) -> Result<BuyerId, IdentityError> {
        if token.is_empty() || token.len() > MAX_IDENTITY_TOKEN_LEN {
            return Err(IdentityError::Malformed);
        }
        let header = jsonwebtoken::decode_header(token).map_err(|_| unreadable_header(token))?;
        if !self.policy.algorithms.contains(&header.alg) {
            return Err(IdentityError::Algorithm);
        }
        let kid = header.kid.ok_or(IdentityError::UnknownKey)?;
        let (key, key_alg) = self.key(&kid).await?;
        if key_alg.is_some_and(|a| a != header.alg) {
            return Err(IdentityError::Algorithm);
        }
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&self.policy.issuer]);
        validation.set_audience(&[&self.policy.audience]);
        validation.set_required_spec_claims(REQUIRED_CLAIMS);
        validation.leeway = self.policy.leeway.as_secs();
        validation.validate_nbf = true;
        let data = jsonwebtoken::decode::<Claims>(token, &key, &validation).map_err(refusal)?;
        let subject = data
            .claims
            .sub
            .filter(|s| !s.is_empty() && s.len() <= MAX_SUBJECT_LEN)
            .ok_or(IdentityError::NoSubject)?;
        Ok(self.policy.buyer_id.buyer(&self.policy.issuer, &subject))
    }

    /// The key `kid`, fetching the issuer's keys again if it is not held (at most once per
    /// [`REFETCH_INTERVAL`]) and in the background when they are old.
    async fn key(
        self: &Arc<Self>,
        kid: &str,
    ) -> Result<(DecodingKey, Option<Algorithm>), IdentityError> {
        let held = |ring: &KeyRing| ring.keys.get(kid).cloned();
        let ring = self.ring.read().expect("key ring lock").clone();
        if let Some(found) = held(&ring) {
            self.refresh_if_old();
            return Ok(found);
        }
        let never_loaded = ring.keys.is_empty();
        drop(ring);
        self.refetch().await;
        let ring = self.ring.read().expect("key ring lock").clone();
        match held(&ring) {
            Some(found) => Ok(found),
            None if never_loaded && ring.keys.is_empty() => Err(IdentityError::Unavailable),
            None => Err(IdentityError::UnknownKey),
        }
    }

    /// Fetches the keys unless a fetch was made within [`REFETCH_INTERVAL`].
    async fn refetch(&self) {
        let mut fetched = self.fetched.lock().await;
        if fetched.is_some_and(|at| at.elapsed() < REFETCH_INTERVAL) {
            return;
        }
        *fetched = Some(Instant::now());
        if let Err(e) = self.load().await {
            tracing::warn!(error = %e, "fetching the identity issuer's keys failed");
        }
    }

    fn refresh_if_old(self: &Arc<Self>) {
        let Ok(fetched) = self.fetched.try_lock() else {
            return;
        };
        if fetched.is_some_and(|at| at.elapsed() < KEYS_MAX_AGE) {
            return;
        }
        drop(fetched);
        let me = self.clone();
        tokio::spawn(async move { me.refetch().await });
    }
}

/// The refusal a decoding error stands for.
fn refusal(e: jsonwebtoken::errors::Error) -> IdentityError {
    match e.kind() {
        ErrorKind::ExpiredSignature => IdentityError::Expired,
        ErrorKind::ImmatureSignature => IdentityError::NotYetValid,
        ErrorKind::InvalidIssuer => IdentityError::WrongIssuer,
        ErrorKind::InvalidAudience => IdentityError::WrongAudience,
        ErrorKind::InvalidSignature => IdentityError::BadSignature,
        ErrorKind::InvalidAlgorithm
        | ErrorKind::MissingAlgorithm
        | ErrorKind::InvalidKeyFormat
        | ErrorKind::InvalidEcdsaKey
        | ErrorKind::InvalidEddsaKey
        | ErrorKind::InvalidRsaKey(_) => IdentityError::Algorithm,
        ErrorKind::MissingRequiredClaim(claim) => match claim.as_str() {
            "sub" => IdentityError::NoSubject,
            "iss" => IdentityError::WrongIssuer,
            "aud" => IdentityError::WrongAudience,
            "exp" => IdentityError::Expired,
            _ => IdentityError::Malformed,
        },
        _ => IdentityError::Malformed,
    }
}

/// Why a token's header could not be read: one that is a JSON object naming an algorithm anyway
/// (`none`, an unsigned token, or one the verifier does not know) is refused for its algorithm,
/// as the protocol says (1.12); anything else is malformed.
fn unreadable_header(token: &str) -> IdentityError {
    use base64::Engine as _;
    let mut parts = token.split('.');
    let header = parts.next().filter(|_| token.split('.').count() == 3);
    let names_one = header
        .and_then(|h| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(h)
                .ok()
        })
        .and_then(|json| serde_json::from_slice::<serde_json::Value>(&json).ok())
        .is_some_and(|header| header.get("alg").is_some_and(serde_json::Value::is_string));
    if names_one {
        IdentityError::Algorithm
    } else {
        IdentityError::Malformed
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    use crate::identity::{IssuedIdentity, IssuerKey, DEFAULT_ALGORITHMS};
    use secrecy::SecretString;

    const ISS: &str = "https://signin.example";
    const AUD: &str = "floodgate-demo";

    /// A token with `alg: none` and no signature, claiming the issuer's key id.
    fn unsigned(key: &IssuerKey) -> String {
        use base64::Engine as _;
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let header = serde_json::json!({ "alg": "none", "typ": "JWT", "kid": key.kid() });
        let claims = IssuedIdentity::new(ISS, AUD, "a", Duration::from_secs(60));
        format!(
            "{}.{}.",
            b64.encode(header.to_string()),
            b64.encode(serde_json::to_string(&claims).unwrap())
        )
    }

    async fn verifier(keys: &[&IssuerKey], form: BuyerIdForm) -> (Arc<IdentityVerifier>, PathBuf) {
        let path = std::env::temp_dir().join(format!("jwks-{}.json", uuid::Uuid::new_v4()));
        std::fs::write(&path, IssuerKey::jwks(keys).to_string()).unwrap();
        let policy = IdentityPolicy {
            issuer: ISS.into(),
            audience: AUD.into(),
            algorithms: parse_algorithms(DEFAULT_ALGORITHMS).unwrap(),
            leeway: Duration::from_secs(0),
            buyer_id: form,
            keys: KeySource::File(path.clone()),
        };
        (IdentityVerifier::new(policy).await.unwrap(), path)
    }

    fn token(key: &IssuerKey, iss: &str, aud: &str, sub: &str) -> String {
        key.sign(&IssuedIdentity::new(
            iss,
            aud,
            sub,
            Duration::from_secs(300),
        ))
    }

    #[tokio::test]
    async fn a_genuine_token_names_its_subject_and_every_flaw_has_its_refusal() {
        let key = IssuerKey::generate("k1");
        let (v, _) = verifier(&[&key], BuyerIdForm::Subject).await;
        let buyer = v.verify(&token(&key, ISS, AUD, "alice")).await.unwrap();
        assert_eq!(buyer.as_str(), "alice");

        let other = IssuerKey::generate("k1");
        let forged = token(&other, ISS, AUD, "alice");
        assert_eq!(v.verify(&forged).await, Err(IdentityError::BadSignature));
        let stranger = IssuerKey::generate("k9");
        let unknown = token(&stranger, ISS, AUD, "alice");
        assert_eq!(v.verify(&unknown).await, Err(IdentityError::UnknownKey));
        assert_eq!(
            v.verify(&token(&key, "https://evil.example", AUD, "a"))
                .await,
            Err(IdentityError::WrongIssuer)
        );
        assert_eq!(
            v.verify(&token(&key, ISS, "someone-else", "a")).await,
            Err(IdentityError::WrongAudience)
        );
        let mut old = IssuedIdentity::new(ISS, AUD, "a", Duration::from_secs(1));
        old.exp -= 120;
        assert_eq!(v.verify(&key.sign(&old)).await, Err(IdentityError::Expired));
        assert_eq!(
            v.verify(&token(&key, ISS, AUD, "")).await,
            Err(IdentityError::NoSubject)
        );
        let hs = jsonwebtoken::encode(
            &jsonwebtoken::Header {
                kid: Some("k1".into()),
                ..jsonwebtoken::Header::new(Algorithm::HS256)
            },
            &IssuedIdentity::new(ISS, AUD, "a", Duration::from_secs(60)),
            &jsonwebtoken::EncodingKey::from_secret(b"the public key, as a secret"),
        )
        .unwrap();
        assert_eq!(v.verify(&hs).await, Err(IdentityError::Algorithm));
        // An unsigned token (`alg: none`) names an algorithm too, one never accepted.
        assert_eq!(
            v.verify(&unsigned(&key)).await,
            Err(IdentityError::Algorithm)
        );
        assert_eq!(v.verify("not.a.jwt").await, Err(IdentityError::Malformed));
        assert_eq!(
            v.verify(&"a".repeat(9000)).await,
            Err(IdentityError::Malformed)
        );
    }

    #[tokio::test]
    async fn the_hashed_form_names_nobody_and_is_stable() {
        let key = IssuerKey::generate("k1");
        let form = BuyerIdForm::KeyedHash(SecretString::from("k".repeat(32)));
        let (v, _) = verifier(&[&key], form).await;
        let a = v.verify(&token(&key, ISS, AUD, "alice")).await.unwrap();
        let again = v.verify(&token(&key, ISS, AUD, "alice")).await.unwrap();
        let b = v.verify(&token(&key, ISS, AUD, "bob")).await.unwrap();
        assert_eq!(a, again);
        assert_ne!(a, b);
        assert!(!a.as_str().contains("alice"));
        assert_eq!(a.as_str().len(), 32);
        assert_eq!(a.key_tag().len(), 64);
    }

    #[tokio::test]
    async fn a_rotated_key_is_picked_up_from_the_published_set() {
        let old = IssuerKey::generate("2026-11");
        let (v, path) = verifier(&[&old], BuyerIdForm::Subject).await;
        let new = IssuerKey::generate("2026-12");
        let by_new = token(&new, ISS, AUD, "alice");
        // Not published yet: an unknown key.
        assert_eq!(v.verify(&by_new).await, Err(IdentityError::UnknownKey));
        std::fs::write(&path, IssuerKey::jwks(&[&old, &new]).to_string()).unwrap();
        // Within the refetch interval the set is not read again; a refresh (as after the
        // interval) picks the new key up, and the old one still verifies.
        v.refresh().await.unwrap();
        assert_eq!(v.verify(&by_new).await.unwrap().as_str(), "alice");
        assert!(v.verify(&token(&old, ISS, AUD, "bob")).await.is_ok());
    }

    #[test]
    fn symmetric_algorithms_cannot_be_configured() {
        assert!(parse_algorithms("EdDSA,HS256").is_err());
        assert!(parse_algorithms("").is_err());
        assert!(parse_algorithms("none").is_err());
        assert_eq!(parse_algorithms("ES256").unwrap(), vec![Algorithm::ES256]);
    }
}
