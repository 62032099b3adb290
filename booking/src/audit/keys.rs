//! The keys the audit chain is made with. Each row names the key that made its MAC by the key's
//! id (a fingerprint: an HMAC of a fixed label under the key, so it says nothing of the key), and
//! one key is **in force** at each position of the chain: the key the first named row names, then
//! the one each rotation row hands over to. A process appends only with the key in force; one
//! that holds only a retired key writes nothing, so a retired key signs nothing new.
//!
//! A rotation is itself a row (action [`ROTATE`]): made with the new key, it names the key it
//! takes over from and carries a handover, a MAC under that old key of the row before and the new
//! key's id. So only a holder of both keys can rotate, and every row before a rotation is sealed
//! by a key the retired one cannot forge.

use hmac::{Hmac, Mac as _};
use secrecy::{ExposeSecret as _, SecretString};
use sha2::Sha256;

/// The action of a rotation row.
pub const ROTATE: &str = "rotate_key";
/// The sale a rotation row is filed under: no sale's, since a key serves them all.
pub const NO_SALE: &str = "";
/// What a key's id is the MAC of.
const ID_LABEL: &[u8] = b"floodgate audit key id";

/// One key the chain may be made with, checked to be a real secret.
#[derive(Clone)]
pub struct AuditKey {
    secret: SecretString,
    id: String,
}

impl AuditKey {
    /// `secret`, if it is a usable key (at least 32 characters, not a placeholder).
    pub fn new(secret: &SecretString) -> Result<Self, String> {
        floodgate_platform::secrets::check_secret("FLOODGATE_AUDIT_KEY", secret)?;
        let id = hex::encode(&Self::keyed(secret, &[ID_LABEL])[..8]);
        Ok(Self {
            secret: secret.clone(),
            id,
        })
    }

    /// The key's public name, 16 hex digits: what a row made with it names.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// HMAC-SHA256 under this key of `parts`, newline-separated, as hex.
    pub(crate) fn mac(&self, parts: &[&[u8]]) -> String {
        hex::encode(Self::keyed(&self.secret, parts))
    }

    fn keyed(secret: &SecretString, parts: &[&[u8]]) -> Vec<u8> {
        let mut mac = Hmac::<Sha256>::new_from_slice(secret.expose_secret().as_bytes())
            .expect("HMAC takes a key of any length");
        for (i, part) in parts.iter().enumerate() {
            if i > 0 {
                mac.update(b"\n");
            }
            mac.update(part);
        }
        mac.finalize().into_bytes().to_vec()
    }

    /// The handover a rotation from this key to `to` carries, after the row whose MAC is
    /// `previous`.
    pub(crate) fn handover(&self, previous: &str, to: &str) -> String {
        self.mac(&[ROTATE.as_bytes(), previous.as_bytes(), to.as_bytes()])
    }
}

impl std::fmt::Debug for AuditKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AuditKey({})", self.id)
    }
}

/// The keys a process holds: the current one (`FLOODGATE_AUDIT_KEY`), which new rows are made
/// with once it is in force, and those it replaced (`FLOODGATE_AUDIT_PREVIOUS_KEYS`), to append
/// with until a rotation hands over and to verify old rows with.
#[derive(Clone, Debug)]
pub struct AuditKeys {
    pub current: AuditKey,
    pub previous: Vec<AuditKey>,
}

impl AuditKeys {
    /// The current key alone.
    pub fn single(current: AuditKey) -> Self {
        Self {
            current,
            previous: Vec::new(),
        }
    }

    /// The current key and the comma-separated `previous` ones, each checked.
    pub fn parse(current: &SecretString, previous: Option<&SecretString>) -> Result<Self, String> {
        let current = AuditKey::new(current)?;
        let mut keys = Self::single(current);
        for key in previous
            .map(|p| {
                p.expose_secret()
                    .split(',')
                    .map(str::trim)
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
            .into_iter()
            .filter(|k| !k.is_empty())
        {
            let key = AuditKey::new(&SecretString::from(key.to_owned()))
                .map_err(|e| format!("FLOODGATE_AUDIT_PREVIOUS_KEYS: {e}"))?;
            if key.id() != keys.current.id() {
                keys.previous.push(key);
            }
        }
        Ok(keys)
    }

    /// The key named `id`, if this process holds it.
    pub fn by_id(&self, id: &str) -> Option<&AuditKey> {
        std::iter::once(&self.current)
            .chain(&self.previous)
            .find(|key| key.id() == id)
    }

    /// Every key held, the current one first.
    pub fn all(&self) -> impl Iterator<Item = &AuditKey> {
        std::iter::once(&self.current).chain(&self.previous)
    }

    /// The ids of the keys held, for an error that says which were tried.
    pub fn ids(&self) -> String {
        self.all().map(AuditKey::id).collect::<Vec<_>>().join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(fill: &str) -> SecretString {
        SecretString::from(fill.repeat(32) + "-k")
    }

    #[test]
    fn a_keys_id_is_stable_distinct_and_not_the_key() {
        let a = AuditKey::new(&key("a")).unwrap();
        assert_eq!(a.id(), AuditKey::new(&key("a")).unwrap().id());
        assert_ne!(a.id(), AuditKey::new(&key("b")).unwrap().id());
        assert_eq!(a.id().len(), 16);
        assert!(!a.id().contains("aaaa"));
    }

    #[test]
    fn previous_keys_are_parsed_checked_and_found_by_id() {
        let previous = SecretString::from(format!(
            " {} ,{}",
            key("b").expose_secret(),
            key("a").expose_secret()
        ));
        let keys = AuditKeys::parse(&key("a"), Some(&previous)).unwrap();
        // The current key named again among the previous ones is not held twice.
        assert_eq!(keys.previous.len(), 1);
        let b = AuditKey::new(&key("b")).unwrap();
        assert_eq!(keys.by_id(b.id()).map(AuditKey::id), Some(b.id()));
        assert!(keys.by_id("0000000000000000").is_none());
        let short = SecretString::from("short".to_owned());
        let refused = AuditKeys::parse(&key("a"), Some(&short)).unwrap_err();
        assert!(
            refused.contains("FLOODGATE_AUDIT_PREVIOUS_KEYS"),
            "{refused}"
        );
    }
}
