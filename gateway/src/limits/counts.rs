//! The sessions a gateway holds, counted per address (and, for an IPv6 client, per wider
//! network around it) and per person, each under its cap (crate::limits): what a join's
//! [`SessionSlot`] takes and gives back when the session ends.

use std::hash::Hash;
use std::net::IpAddr;
use std::sync::Arc;

use dashmap::DashMap;
use floodgate_platform::clients::{counted_as, WIDER_IPV6};

use super::{IpLimits, Person};

/// Live counts per key, each under a cap; a key leaves the map at zero, so it holds only keys
/// with live sessions.
pub(super) struct Counts<K: Hash + Eq>(DashMap<K, u32>);

impl<K: Hash + Eq> Default for Counts<K> {
    fn default() -> Self {
        Self(DashMap::new())
    }
}

/// An address as counted, or a wider network around it, with its prefix's length: a /64 whose
/// last bits are zero is not its /56.
pub(super) type Network = (IpAddr, u8);

impl Counts<Network> {
    /// One more for `ip` and, for an IPv6 client, its wider networks, each under `cap` times its
    /// multiple in `wider`; none if one is full.
    pub(super) fn take_all(&self, ip: IpAddr, cap: u32, wider: &[(u8, u32)]) -> bool {
        let networks = networks(ip, wider);
        for (i, (network, times)) in networks.iter().enumerate() {
            if !self.take(*network, cap.saturating_mul(*times)) {
                for (taken, _) in &networks[..i] {
                    self.give(taken);
                }
                return false;
            }
        }
        true
    }

    pub(super) fn give_all(&self, ip: IpAddr, wider: &[(u8, u32)]) {
        for (network, _) in networks(ip, wider) {
            self.give(&network);
        }
    }
}

/// `ip` (a client as counted) and, for an IPv6 one, the wider networks of `wider` around it,
/// each with the multiple of a client's cap it may hold.
fn networks(ip: IpAddr, wider: &[(u8, u32)]) -> Vec<(Network, u32)> {
    let mut networks = vec![((ip, 128), 1)];
    if ip.is_ipv6() {
        networks.extend(
            wider
                .iter()
                .map(|(bits, times)| ((counted_as(ip, *bits), *bits), *times)),
        );
    }
    networks
}

impl<K: Hash + Eq> Counts<K> {
    /// One more for `key`, unless it has `cap` already.
    pub(super) fn take(&self, key: K, cap: u32) -> bool {
        let mut count = self.0.entry(key).or_insert(0);
        if *count >= cap {
            return false;
        }
        *count += 1;
        true
    }

    pub(super) fn give(&self, key: &K) {
        self.0.remove_if_mut(key, |_, count| {
            *count = count.saturating_sub(1);
            *count == 0
        });
    }

    #[cfg(test)]
    pub(super) fn get(&self, key: &K) -> u32 {
        self.0.get(key).map_or(0, |c| *c)
    }
}

/// Which of its address's counts a session is in.
#[derive(Clone, Copy, Debug)]
pub(super) enum Counted {
    /// Every session no person pays for.
    Session,
    /// The places coming back on a sale that asks for a proof of work.
    PlaceBack,
}

/// One session's share of its address's counts (and its person's), given back on drop.
pub struct SessionSlot {
    pub(super) limits: Arc<IpLimits>,
    pub(super) ip: IpAddr,
    /// Counted among the address's sessions, or its places coming back (a buyer's is neither).
    pub(super) counted: Option<Counted>,
    pub(super) anonymous: bool,
    pub(super) person: Option<Person>,
}

impl Drop for SessionSlot {
    fn drop(&mut self) {
        if let Some(counted) = self.counted {
            self.limits
                .counts(counted)
                .give_all(self.ip, super::WIDER_SESSIONS);
        }
        if self.anonymous {
            self.limits.anonymous.give_all(self.ip, &WIDER_IPV6);
        }
        if let Some(person) = self.person {
            self.limits.people_sessions.give(&person.0);
        }
    }
}
