//! The edge's seal on a credential: a mark the shipped edge (nginx, `deploy/nginx/cdn.conf`)
//! can check by itself, so a credential the services issued is told from a made-up one before
//! anything is proxied.
//!
//! Why: the edge holds every address to a ceiling of requests to the services, because it
//! cannot check a pass, a resume token or a reservation's secret, and without a ceiling one
//! address sending made-up ones could spend the services' CPU on checking them. But a ceiling
//! by address is shared by everyone behind a carrier's address: a stranger there flooding junk
//! credentials would have the edge refuse its neighbours' genuine ones with it. With a seal
//! the edge counts only what it cannot prove against the address, and a person's own
//! credential only against itself.
//!
//! The seal is what nginx's `secure_link_md5` computes: the MD5 of the credential followed by
//! the key, in unpadded base64url, appended after a `~` (a character no credential contains,
//! allowed in a header, a bearer token and a WebSocket subprotocol). It is a filter, not the
//! credential's proof: the services strip it and check the credential as before (a MAC or an
//! Ed25519 signature), so a seal forged by breaking MD5 would only take junk past the edge's
//! ceiling to the services' own per-address limits, which is where it went before seals. MD5
//! of the message then the key has no length extension, and the message is made by the
//! services (a ticket number, a MAC), so a collision cannot be chosen to fit.
//!
//! Without a key (`FLOODGATE_EDGE_KEY` unset) credentials are issued unsealed, and the edge
//! counts them against their address's ceiling, as an edge without the key does for sealed
//! ones: a deployment works with the key on either side only, it is just less fair.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use md5::{Digest, Md5};
use secrecy::{ExposeSecret, SecretString};

pub use floodgate_protocol::{unsealed, SEAL_LEN, SEAL_SEPARATOR as SEPARATOR};

/// Seals credentials with the edge's key, or leaves them as they are without one.
#[derive(Clone, Default)]
pub struct EdgeSeal(Option<Keyed>);

/// The key, and the edge's word made from it once (every request a service takes is checked
/// for it).
#[derive(Clone)]
struct Keyed {
    key: SecretString,
    word: SecretString,
}

impl std::fmt::Debug for EdgeSeal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "EdgeSeal(keyed)"
        } else {
            "EdgeSeal(none)"
        })
    }
}

impl EdgeSeal {
    /// The seal of `FLOODGATE_EDGE_KEY`: a real secret, and only of characters that go into
    /// nginx's configuration as they are (the edge writes it into its `secure_link_md5`).
    pub fn parse(key: Option<&SecretString>) -> Result<Self, String> {
        let Some(key) = key else {
            return Ok(Self(None));
        };
        crate::secrets::check_secret("FLOODGATE_EDGE_KEY", key)?;
        let plain = key
            .expose_secret()
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !plain {
            return Err(
                "FLOODGATE_EDGE_KEY may hold only letters, digits, `_` and `-` (the edge writes it into nginx's configuration)"
                    .to_owned(),
            );
        }
        Ok(Self(Some(Keyed {
            key: key.clone(),
            word: edge_word(key).into(),
        })))
    }

    /// Whether credentials are sealed at all.
    pub fn is_keyed(&self) -> bool {
        self.0.is_some()
    }

    /// `credential` with its seal, or as it is without a key.
    pub fn seal(&self, credential: &str) -> String {
        match &self.0 {
            None => credential.to_owned(),
            Some(Keyed { key, .. }) => {
                let digest = Md5::new()
                    .chain_update(credential.as_bytes())
                    .chain_update(key.expose_secret().as_bytes())
                    .finalize();
                format!("{credential}{SEPARATOR}{}", URL_SAFE_NO_PAD.encode(digest))
            }
        }
    }

    /// Whether `presented` carries this key's seal on its credential (`None` without a key:
    /// nothing is sealed then). A credential the services issued always does where they seal,
    /// so one that does not is a stranger's, or from before the key: a service may charge it
    /// before the costlier check of the credential itself.
    pub fn vouches_for(&self, presented: &str) -> Option<bool> {
        self.0.as_ref()?;
        let credential = floodgate_protocol::unsealed(presented);
        if credential.len() == presented.len() {
            return Some(false);
        }
        let expected = self.seal(credential);
        Some(floodgate_protocol::same_secret(
            presented.as_bytes(),
            expected.as_bytes(),
        ))
    }

    /// The edge's word: what the shipped edge sends with every request it forwards, in
    /// `X-Floodgate-Edge` (deploy/nginx/edge.sh computes it with `sha256sum` from the same key:
    /// the SHA-256 of `floodgate-edge:<key>`, in hex). A request carrying it comes from an edge
    /// (or a gateway forwarding a booking call), whatever its address: its `X-Forwarded-For`
    /// names the client, with no range of addresses to trust, which a cluster's Pod network
    /// would otherwise have to be. Nobody without the key can say it; the key itself never
    /// travels. `None` without a key.
    pub fn edge_word(&self) -> Option<&str> {
        self.0.as_ref().map(|keyed| keyed.word.expose_secret())
    }

    /// Whether `presented` is [`Self::edge_word`] (never, without a key).
    pub fn is_edge_word(&self, presented: &str) -> bool {
        self.edge_word().is_some_and(|word| {
            floodgate_protocol::same_secret(presented.trim().as_bytes(), word.as_bytes())
        })
    }

    /// [`Self::seal`], unless the sealed credential would be longer than `max` bytes (a resume
    /// token handed back in a WebSocket close reason: 123 at most), then the bare credential.
    pub fn seal_within(&self, credential: &str, max: usize) -> String {
        let sealed = self.seal(credential);
        if sealed.len() <= max {
            sealed
        } else {
            credential.to_owned()
        }
    }
}

/// The SHA-256 of `floodgate-edge:<key>`, in hex: what `deploy/nginx/edge.sh` computes.
fn edge_word(key: &SecretString) -> String {
    use sha2::{Digest as _, Sha256};
    let digest = Sha256::new()
        .chain_update(b"floodgate-edge:")
        .chain_update(key.expose_secret().as_bytes())
        .finalize();
    hex::encode(digest)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keyed(key: &str) -> EdgeSeal {
        EdgeSeal::parse(Some(&key.to_owned().into())).unwrap()
    }

    #[test]
    fn a_seal_is_what_nginx_secure_link_md5_computes() {
        // `echo -n 'r2.7..mac.s1edge_key_of_thirty_two_characters_x' | md5sum`, in base64url:
        // the edge's `secure_link_md5 "${credential}<key>"` compares against the same bytes.
        let seal = keyed("edge_key_of_thirty_two_characters_x");
        let sealed = seal.seal("r2.7..mac.s1");
        let digest = Md5::digest(b"r2.7..mac.s1edge_key_of_thirty_two_characters_x");
        assert_eq!(
            sealed,
            format!("r2.7..mac.s1~{}", URL_SAFE_NO_PAD.encode(digest))
        );
        assert_eq!(sealed.len(), "r2.7..mac.s1".len() + 1 + SEAL_LEN);
        assert_eq!(unsealed(&sealed), "r2.7..mac.s1");
    }

    #[test]
    fn the_edges_word_is_what_edge_sh_computes_and_only_the_key_says_it() {
        // `printf 'floodgate-edge:%s' edge_key_of_thirty_two_characters_x | sha256sum`, as
        // deploy/nginx/edge.sh runs it.
        let seal = keyed("edge_key_of_thirty_two_characters_x");
        let word = "3f879edd59cd56ea96f2f99df4d5fb66e70beaea2c3ccdef655dff808565c55d";
        assert_eq!(seal.edge_word(), Some(word));
        assert!(seal.is_edge_word(word));
        assert!(!seal.is_edge_word(&word[..63]));
        assert!(!seal.is_edge_word(""));
        assert!(!keyed("another_key_of_thirty_two_characters").is_edge_word(word));
        assert_eq!(EdgeSeal::default().edge_word(), None);
        assert!(!EdgeSeal::default().is_edge_word(word));
    }

    #[test]
    fn without_a_key_nothing_is_sealed_and_anything_unsealed_stays_as_it_is() {
        let none = EdgeSeal::parse(None).unwrap();
        assert!(!none.is_keyed());
        assert_eq!(none.seal("abc.def"), "abc.def");
        assert_eq!(unsealed("abc.def"), "abc.def");
        // Only a whole seal is taken off: a `~` with anything else after it is the credential's.
        assert_eq!(unsealed("abc~short"), "abc~short");
        assert_eq!(
            unsealed("abc~!!!!!!!!!!!!!!!!!!!!!!"),
            "abc~!!!!!!!!!!!!!!!!!!!!!!"
        );
    }

    #[test]
    fn a_key_must_be_a_secret_nginx_can_hold_as_it_is() {
        assert!(EdgeSeal::parse(Some(&"short".to_owned().into())).is_err());
        let quoted = EdgeSeal::parse(Some(
            &"a\"; return 200; #_thirty_two_chars".to_owned().into(),
        ));
        assert!(quoted.unwrap_err().contains("only letters"));
        assert!(keyed("ek_0123456789abcdef0123456789abcdef").is_keyed());
    }

    #[test]
    fn only_this_keys_seal_vouches_for_a_credential() {
        let seal = keyed("edge_key_of_thirty_two_characters_x");
        let sealed = seal.seal("p.claims.sig");
        assert_eq!(seal.vouches_for(&sealed), Some(true));
        assert_eq!(seal.vouches_for("p.claims.sig"), Some(false), "no seal");
        let other = keyed("another_key_of_thirty_two_chars_xx").seal("p.claims.sig");
        assert_eq!(seal.vouches_for(&other), Some(false), "another key's");
        let moved = format!("p.claims.sigX~{}", sealed.rsplit_once('~').unwrap().1);
        assert_eq!(
            seal.vouches_for(&moved),
            Some(false),
            "another credential's"
        );
        assert_eq!(EdgeSeal::parse(None).unwrap().vouches_for(&sealed), None);
    }

    #[test]
    fn a_seal_that_would_not_fit_is_left_off() {
        let seal = keyed("edge_key_of_thirty_two_characters_x");
        assert_eq!(
            seal.seal_within("x".repeat(110).as_str(), 123),
            "x".repeat(110)
        );
        assert_eq!(seal.seal_within("x", 123).len(), 1 + 1 + SEAL_LEN);
    }
}
