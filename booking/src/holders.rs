//! Who may read and pay a reservation: its holder, who proves it with the secret the 201 gave.
//!
//! A reservation's secret is made from the reservation itself: an HMAC of its sale and id under
//! `FLOODGATE_RESERVATION_KEY`, which every booking instance holds. So a presented secret is
//! checked in this process's memory before anything else, and the two kinds of caller pay apart:
//!
//! - a secret the key proves is the holder's, held to the reservation's own allowance
//!   ([`Limits::holder`](crate::limits::Limits::holder)) and never to its address's, so a
//!   stranger sending junk from a carrier's address cannot make the people behind it wait to
//!   pay;
//! - anything else counts against its address (writes or reads) and is answered 404 at once,
//!   with no Redis work: a stranger's guesses, from however many addresses, never reach the
//!   pool's primary, where every reservation's script runs and the autopilot measures them. So
//!   a key rotated out must stay listed (`FLOODGATE_RESERVATION_PREVIOUS_KEYS`) until every sale
//!   with reservations made under it has ended (docs/runbook.md).
//!
//! A proven secret is still compared with the stored one before anything is answered
//! (`paying`): the key decides who may ask, the record who may see the reservation.

use std::marker::PhantomData;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine as _;
use floodgate_platform::clients::ClientAddress;
use floodgate_protocol::same_secret;
use hmac::{Hmac, Mac};
use secrecy::{ExposeSecret, SecretString};
use sha2::Sha256;

use crate::error::ApiError;
use crate::extract::{ReservationRef, ReservationSecret};
use crate::AppState;

/// What a reservation's secret is made with, the same on every booking instance: the current
/// key, then those it replaced (whose secrets are still proven until their holds end).
#[derive(Clone)]
pub struct ReservationKey(std::sync::Arc<[SecretString]>);

/// Keeps secrets made for one purpose from being taken for another's, should the key ever be
/// shared by mistake.
const LABEL: &[u8] = b"floodgate reservation secret v1";

impl ReservationKey {
    /// The key `FLOODGATE_RESERVATION_KEY` names, and the comma-separated ones of
    /// `FLOODGATE_RESERVATION_PREVIOUS_KEYS`; each a real secret.
    pub fn parse(current: &SecretString, previous: Option<&SecretString>) -> Result<Self, String> {
        use floodgate_platform::secrets::check_secret;
        check_secret("FLOODGATE_RESERVATION_KEY", current)?;
        let mut keys = vec![current.clone()];
        for key in previous.iter().flat_map(|p| p.expose_secret().split(',')) {
            let key = SecretString::from(key.trim().to_owned());
            check_secret("FLOODGATE_RESERVATION_PREVIOUS_KEYS", &key)?;
            keys.push(key);
        }
        Ok(Self(keys.into()))
    }

    /// The secret of reservation `id` of `sale`: 256 bits, as the random ones before were.
    pub fn secret(&self, sale: &str, id: &str) -> String {
        Self::made_with(&self.0[0], sale, id)
    }

    fn made_with(key: &SecretString, sale: &str, id: &str) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(key.expose_secret().as_bytes())
            .expect("HMAC takes a key of any length");
        // Lengths first, so no two (sale, id) pairs feed the same bytes.
        for part in [LABEL, sale.as_bytes(), id.as_bytes()] {
            mac.update(&(part.len() as u64).to_be_bytes());
            mac.update(part);
        }
        B64.encode(mac.finalize().into_bytes())
    }

    /// Whether `presented` is the secret one of the keys makes for `id` of `sale` (each
    /// compared in constant time, and every key tried).
    pub fn proves(&self, sale: &str, id: &str, presented: &str) -> bool {
        self.0.iter().fold(false, |proven, key| {
            proven
                | same_secret(
                    presented.as_bytes(),
                    Self::made_with(key, sale, id).as_bytes(),
                )
        })
    }
}

/// Which of the address's allowances an unproven caller of a reservation's route spends.
pub trait Asking {
    fn charge(state: &AppState, client: std::net::IpAddr) -> Result<(), ApiError>;
}

/// Reading a reservation: the address's allowance of reads.
pub struct Reading;

/// Starting a payment: the address's allowance of writes.
pub struct Paying;

impl Asking for Reading {
    fn charge(state: &AppState, client: std::net::IpAddr) -> Result<(), ApiError> {
        state.limits.read(client)
    }
}

impl Asking for Paying {
    fn charge(state: &AppState, client: std::net::IpAddr) -> Result<(), ApiError> {
        state.limits.address(client)
    }
}

/// A caller of a reservation's own routes, let through the allowance it pays with: the
/// reservation it names and the secret it presents, not yet compared with the stored one.
pub struct Holder<A> {
    pub at: ReservationRef,
    pub secret: String,
    asking: PhantomData<A>,
}

impl<A: Asking> FromRequestParts<AppState> for Holder<A> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let ClientAddress(client) = ClientAddress::from_request_parts(parts, state).await?;
        let unproven = |refused: ApiError| A::charge(state, client).err().unwrap_or(refused);
        let at = ReservationRef::from_request_parts(parts, state)
            .await
            .map_err(unproven)?;
        let ReservationSecret(secret) = ReservationSecret::from_request_parts(parts, state)
            .await
            .map_err(unproven)?;
        if !state.reservation_key.proves(&at.sale, &at.id, &secret) {
            A::charge(state, client)?;
            return Err(ReservationRef::not_found());
        }
        state.limits.holder(&at.sale, &at.id)?;
        Ok(Self {
            at,
            secret,
            asking: PhantomData,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::ReservationKey;

    fn key(text: &str) -> ReservationKey {
        ReservationKey::parse(&text.to_owned().into(), None).unwrap()
    }

    #[test]
    fn a_secret_is_its_reservations_under_its_key_alone() {
        let k = key("rk_0123456789abcdef0123456789abcdef");
        let secret = k.secret("s1", "p1.0190");
        assert_eq!(
            secret,
            k.secret("s1", "p1.0190"),
            "the same on every instance"
        );
        assert_eq!(secret.len(), 43, "256 bits, unpadded base64url");
        assert!(k.proves("s1", "p1.0190", &secret));
        assert!(!k.proves("s1", "p1.0191", &secret), "another reservation's");
        assert!(!k.proves("s2", "p1.0190", &secret), "another sale's");
        assert!(!k.proves("s1", "p1.0190", &secret[..42]));
        let other = key("rk_fedcba9876543210fedcba9876543210");
        assert!(!other.proves("s1", "p1.0190", &secret), "another key's");
        // Where the sale ends and the id begins is part of what is signed.
        assert_ne!(k.secret("s1p", "1.0190"), secret);
    }

    #[test]
    fn after_a_rotation_the_old_keys_secrets_are_still_proven_and_new_ones_are_the_new_keys() {
        let old = "rk_0123456789abcdef0123456789abcdef";
        let new = "rk_fedcba9876543210fedcba9876543210";
        let rotated =
            ReservationKey::parse(&new.to_owned().into(), Some(&old.to_owned().into())).unwrap();
        let made_before = key(old).secret("s1", "p1.0190");
        assert!(rotated.proves("s1", "p1.0190", &made_before));
        assert_eq!(
            rotated.secret("s1", "p1.0190"),
            key(new).secret("s1", "p1.0190")
        );
        assert!(!key(new).proves("s1", "p1.0190", &made_before));
        let short = ReservationKey::parse(&new.to_owned().into(), Some(&"short".to_owned().into()));
        assert!(short.is_err_and(|e| e.contains("FLOODGATE_RESERVATION_PREVIOUS_KEYS")));
    }
}
