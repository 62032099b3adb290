//! Resume tokens: a client's signed claim to its ticket, so it keeps its place when it reconnects
//! (to any gateway) within the grace period after a disconnect.
//!
//! A token is no skeleton key. It names its sale and its ticket, and the ticket's buyer once it
//! has one (a short keyed mark of the buyer id, so the token names nobody): only that buyer may
//! present it. It takes back a live ticket and nothing else: Redis decides whether the ticket is
//! alive (`lua/resume.lua`), and a dead one is never traded for a new place by a join that
//! skipped the door. A ticket taken before signing in carries no mark; the first buyer to present
//! its live token makes it theirs, and the sale's `owners` hash then refuses everyone else.
//!
//! Only gateways make and check resume tokens, so they are MACs (HMAC-SHA256, truncated to 128
//! bits) rather than signatures: short enough to travel in a WebSocket close reason (at most 123
//! bytes), which is how a draining gateway hands them back. The key is derived from the
//! admission signing key every gateway already holds, so there is no second secret to deploy.
//!
//! Format: `r2.<ticket>.<buyer mark or nothing>.<mac>.<sale>`, mark and MAC in unpadded
//! base64url. Every character is allowed in a WebSocket subprotocol (an RFC 6455 token has no
//! `:`), which is how a browser sends it: never in a URL, where it would land in every proxy's and
//! CDN's log. The sale comes last because a sale id may itself contain dots.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

use crate::ids::check_sale_id;

/// The header a non-browser client sends its resume token in (`Floodgate-Resume: <token>`).
pub const RESUME_HEADER: &str = "floodgate-resume";
/// Browsers cannot set headers on a WebSocket: the page offers the resume token as a
/// subprotocol, `floodgate-resume.<token>`, beside [`crate::ws::SUBPROTOCOL`].
pub const RESUME_SUBPROTOCOL_PREFIX: &str = "floodgate-resume.";
/// The longest token accepted, checked before any work (the longest genuine one is 123 bytes).
const MAX_TOKEN_LEN: usize = 123;

const VERSION: &str = "r2";
/// Bytes of the MAC kept: 128 bits resist forgery as well as the ticket space needs.
const MAC_BYTES: usize = 16;
/// Bytes of a buyer's mark: 64 bits, so that finding another identity with the same mark is out
/// of anyone's reach, and a token still fits in a close reason.
const MARK_BYTES: usize = 8;

/// Why a resume token was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResumeError {
    #[error("the resume token is malformed or its signature does not match")]
    Invalid,
    #[error("the resume token belongs to sale {0}")]
    OtherSale(String),
}

/// A buyer's mark in tokens and in the sale's `owners` hash: a keyed digest of the buyer id, so
/// neither names anyone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuyerMark(String);

impl BuyerMark {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// What a genuine token for the sale claims: its ticket, and the buyer it is bound to, if any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claim {
    pub ticket: u64,
    pub buyer: Option<BuyerMark>,
}

impl Claim {
    /// Whether `presenter` (the mark of the buyer who presents the token, if signed in) may take
    /// the ticket: a bound token only by its own buyer. A buyerless token passes here; Redis
    /// decides whether another buyer made the ticket theirs since.
    pub fn may_be_taken_by(&self, presenter: Option<&BuyerMark>) -> bool {
        match &self.buyer {
            None => true,
            Some(owner) => presenter == Some(owner),
        }
    }
}

/// Makes and checks resume tokens.
#[derive(Clone)]
pub struct ResumeKey {
    key: [u8; 32],
}

impl ResumeKey {
    /// Derives the resume key from the admission signing seed (domain-separated, so the MAC key
    /// reveals nothing about the signing key).
    pub fn derive(signing_seed: &[u8]) -> Self {
        let mut hasher = Sha256::new();
        hasher.update(b"floodgate resume token key v1\0");
        hasher.update(signing_seed);
        Self {
            key: hasher.finalize().into(),
        }
    }

    /// The mark of buyer `buyer_id`.
    pub fn buyer_mark(&self, buyer_id: &str) -> BuyerMark {
        let mut mac = self.keyed();
        mac.update(b"buyer\0");
        mac.update(buyer_id.as_bytes());
        let full = mac.finalize().into_bytes();
        BuyerMark(URL_SAFE_NO_PAD.encode(&full[..MARK_BYTES]))
    }

    /// The token of `ticket` of `sale`, bound to `buyer` (its mark) if the ticket has one.
    pub fn issue(&self, sale: &str, ticket: u64, buyer: Option<&BuyerMark>) -> String {
        let mark = buyer.map_or("", BuyerMark::as_str);
        let mac = URL_SAFE_NO_PAD.encode(self.mac(sale, ticket, mark));
        format!("{VERSION}.{ticket}.{mark}.{mac}.{sale}")
    }

    /// What `token` claims, if it is genuine and for `sale`.
    pub fn verify(&self, token: &str, sale: &str) -> Result<Claim, ResumeError> {
        // A token is given out sealed for the edge: the seal is no part of what is checked.
        let token = crate::unsealed(token);
        if token.len() > MAX_TOKEN_LEN {
            return Err(ResumeError::Invalid);
        }
        let mut parts = token.splitn(5, '.');
        let (Some(VERSION), Some(ticket), Some(mark), Some(mac), Some(token_sale)) = (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        ) else {
            return Err(ResumeError::Invalid);
        };
        // One spelling per token: digits, no sign, no leading zero. (The MAC covers the number,
        // not its text: `+42` or `042` would verify, and be a new credential to whatever counts
        // tokens by their text, the edge's zones among them.)
        let canonical = ticket.bytes().all(|b| b.is_ascii_digit())
            && !ticket.is_empty()
            && (ticket == "0" || !ticket.starts_with('0'));
        if !canonical {
            return Err(ResumeError::Invalid);
        }
        let ticket: u64 = ticket.parse().map_err(|_| ResumeError::Invalid)?;
        check_sale_id(token_sale).map_err(|_| ResumeError::Invalid)?;
        let mark_ok = mark.is_empty()
            || URL_SAFE_NO_PAD
                .decode(mark)
                .is_ok_and(|m| m.len() == MARK_BYTES);
        let mac = URL_SAFE_NO_PAD
            .decode(mac)
            .map_err(|_| ResumeError::Invalid)?;
        // Verify before comparing sales: only a genuine token may learn which sale it is for.
        if !mark_ok
            || mac.len() != MAC_BYTES
            || self
                .hmac(token_sale, ticket, mark)
                .verify_truncated_left(&mac)
                .is_err()
        {
            return Err(ResumeError::Invalid);
        }
        if token_sale != sale {
            return Err(ResumeError::OtherSale(token_sale.to_owned()));
        }
        Ok(Claim {
            ticket,
            buyer: (!mark.is_empty()).then(|| BuyerMark(mark.to_owned())),
        })
    }

    fn keyed(&self) -> Hmac<Sha256> {
        Hmac::<Sha256>::new_from_slice(&self.key).expect("any key length works")
    }

    fn hmac(&self, sale: &str, ticket: u64, mark: &str) -> Hmac<Sha256> {
        let mut mac = self.keyed();
        mac.update(b"r2\0");
        mac.update(sale.as_bytes());
        mac.update(b"\0");
        mac.update(&ticket.to_be_bytes());
        mac.update(mark.as_bytes());
        mac
    }

    fn mac(&self, sale: &str, ticket: u64, mark: &str) -> [u8; MAC_BYTES] {
        let full = self.hmac(sale, ticket, mark).finalize().into_bytes();
        full[..MAC_BYTES].try_into().expect("16 bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_rfc6455_token(s: &str) -> bool {
        s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
    }

    #[test]
    fn the_longest_token_fits_in_a_close_reason_and_a_subprotocol() {
        let key = ResumeKey::derive(&[7; 32]);
        let sale = "a.b".repeat(21) + "c";
        let mark = key.buyer_mark("someone");
        let token = key.issue(&sale, u64::MAX, Some(&mark));
        assert!(token.len() <= 123, "{} bytes", token.len());
        assert!(is_rfc6455_token(&token), "{token}");
        assert_eq!(
            key.verify(&token, &sale),
            Ok(Claim {
                ticket: u64::MAX,
                buyer: Some(mark)
            })
        );
        let buyerless = key.issue("s1", 3, None);
        assert_eq!(
            key.verify(&buyerless, "s1"),
            Ok(Claim {
                ticket: 3,
                buyer: None
            })
        );
    }

    #[test]
    fn a_bound_token_is_for_its_buyer_only() {
        let key = ResumeKey::derive(&[7; 32]);
        let (ada, bob) = (key.buyer_mark("ada"), key.buyer_mark("bob"));
        assert_ne!(ada, bob);
        assert_eq!(ada, key.buyer_mark("ada"), "a mark is stable");
        let claim = key.verify(&key.issue("s1", 1, Some(&ada)), "s1").unwrap();
        assert!(claim.may_be_taken_by(Some(&ada)));
        assert!(!claim.may_be_taken_by(Some(&bob)));
        assert!(!claim.may_be_taken_by(None));
        let buyerless = key.verify(&key.issue("s1", 1, None), "s1").unwrap();
        assert!(buyerless.may_be_taken_by(None) && buyerless.may_be_taken_by(Some(&bob)));
        // Another key marks buyers differently: a mark tells nothing across deployments.
        assert_ne!(ResumeKey::derive(&[8; 32]).buyer_mark("ada"), ada);
    }

    #[test]
    fn forged_altered_and_foreign_tokens_are_refused() {
        let key = ResumeKey::derive(&[7; 32]);
        let ada = key.buyer_mark("ada");
        let token = key.issue("s1", 42, Some(&ada));
        let other_key = ResumeKey::derive(&[8; 32]);
        assert_eq!(
            other_key.verify(&token, "s1"),
            Err(ResumeError::Invalid),
            "made with another key"
        );
        let altered = token.replace("r2.42.", "r2.41.");
        assert_eq!(key.verify(&altered, "s1"), Err(ResumeError::Invalid));
        // The same number spelt another way is refused: one spelling per token.
        for respelt in ["r2.+42.", "r2.042.", "r2.0042."] {
            let respelt = token.replace("r2.42.", respelt);
            assert_eq!(
                key.verify(&respelt, "s1"),
                Err(ResumeError::Invalid),
                "{respelt}"
            );
        }
        // Dropping the buyer's mark does not make a bound token buyerless.
        let unbound = token.replace(&format!(".{}.", ada.as_str()), "..");
        assert_eq!(key.verify(&unbound, "s1"), Err(ResumeError::Invalid));
        assert_eq!(
            key.verify(&token, "s2"),
            Err(ResumeError::OtherSale("s1".into()))
        );
        let long = format!("r2.1..{}.{}", "A".repeat(22), "s".repeat(200));
        for junk in [
            "",
            "r2",
            "r2.42..s1",
            "r2.x..abc.s1",
            "r1:s1:42:abc",
            "r2.42..!!.s1",
            "r2.42.short.AAAAAAAAAAAAAAAAAAAAAA.s1",
            long.as_str(),
        ] {
            assert_eq!(key.verify(junk, "s1"), Err(ResumeError::Invalid), "{junk}");
        }
    }
}
