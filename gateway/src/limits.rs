//! Limits on the waiting room's front door: the gateway's connection budget, how many sessions
//! one client may hold at once, and how fast it may join. All are checked before a ticket is
//! taken, so a flood costs a counter or a map lookup, not a Redis round trip or a place in line.
//!
//! A join is charged to whoever it shows it is (crate::join), so that a stranger sending junk
//! from a carrier's address cannot spend the allowance of the people behind it:
//! - a person, once it names one with something genuine: the place of a resume token whose MAC
//!   checks, or a signed-in buyer. Each is held to [`PERSON_BURST`] joins at once, then one every
//!   [`PERSON_EVERY`] (a reconnect, a second tab), on its own, whatever address it comes from;
//! - nobody, for a solved proof of work: each solution is single-use and cost its own search;
//! - its address otherwise: an anonymous join to a sale that asks for nothing, a credential or an
//!   answer that fails, and a sale this gateway has no room for yet (its lookup reads Redis).
//!   Only those anonymous sessions count against the address's sessions too.
//!
//! A "client" here is an address as the limits see it ([`IpLimits::client_of`],
//! `floodgate_platform::clients::counted_as`): an IPv4 address (an IPv4-mapped IPv6 one counts as
//! its IPv4 address), or an IPv6 prefix, because one IPv6 host is routinely given a whole /64 and
//! could otherwise take a fresh address per join.

use std::hash::Hash;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use dashmap::DashMap;
use floodgate_platform::clients::{AddressRate, Rate};

/// Joins one person (a place, a signed-in buyer) may make at once on a gateway.
pub const PERSON_BURST: u32 = 3;
/// Then one every so often: a person reconnecting after a lost network does so once.
pub const PERSON_EVERY: Duration = Duration::from_secs(1);

pub struct IpLimits {
    max_connections: u32,
    /// Prefix length an IPv6 address is counted by.
    ipv6_prefix: u8,
    connections: DashMap<IpAddr, u32>,
    joins: AddressRate,
    /// Joins of each person, by a hash of who they are (`person`).
    people: Rate<u64>,
}

/// Why a join was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum LimitError {
    TooManyConnections,
    JoiningTooFast,
    /// This place, or this buyer, joins faster than a person does.
    PersonTooFast,
}

impl IpLimits {
    /// Limits counting IPv6 clients by [`DEFAULT_IPV6_PREFIX`].
    pub fn new(max_connections: u32, joins_per_sec: u32) -> Arc<Self> {
        Self::with_ipv6_prefix(
            max_connections,
            joins_per_sec,
            floodgate_platform::clients::DEFAULT_IPV6_PREFIX,
        )
    }

    /// Limits counting IPv6 clients by their first `ipv6_prefix` bits (clamped to 32..=128: a
    /// shorter prefix would lump whole providers together).
    pub fn with_ipv6_prefix(
        max_connections: u32,
        joins_per_sec: u32,
        ipv6_prefix: u8,
    ) -> Arc<Self> {
        Arc::new(Self {
            max_connections: max_connections.max(1),
            ipv6_prefix: ipv6_prefix.clamp(32, 128),
            connections: DashMap::new(),
            joins: AddressRate::per_second(joins_per_sec),
            people: Rate::every(PERSON_EVERY, PERSON_BURST),
        })
    }

    /// The client `ip` counts as: its IPv4 address, or its IPv6 network of the configured prefix.
    pub fn client_of(&self, ip: IpAddr) -> IpAddr {
        floodgate_platform::clients::counted_as(ip, self.ipv6_prefix)
    }

    /// Admits one more anonymous session from `ip` (its join charged, and a session slot held),
    /// or says why not. The slot is given back when the returned [`ConnectionSlot`] is dropped
    /// (the session ended, or the upgrade failed).
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<ConnectionSlot, LimitError> {
        self.charge(ip)?;
        self.hold(ip)
    }

    /// Charges one join to `ip`'s allowance.
    pub fn charge(&self, ip: IpAddr) -> Result<(), LimitError> {
        if !self.joins.allow(&self.client_of(ip)) {
            metrics::counter!("floodgate_joins_refused_total", "reason" => "join_rate_limited")
                .increment(1);
            return Err(LimitError::JoiningTooFast);
        }
        Ok(())
    }

    /// Charges one join to the person `who` names (a sale and its place, or a sale and a buyer).
    pub fn person(&self, who: impl Hash) -> Result<(), LimitError> {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        who.hash(&mut hasher);
        if self.people.allow(&std::hash::Hasher::finish(&hasher)) {
            return Ok(());
        }
        metrics::counter!("floodgate_joins_refused_total", "reason" => "person_rate_limited")
            .increment(1);
        Err(LimitError::PersonTooFast)
    }

    /// Holds one of `ip`'s session slots, or says the address holds as many as it may.
    pub fn hold(self: &Arc<Self>, ip: IpAddr) -> Result<ConnectionSlot, LimitError> {
        let ip = self.client_of(ip);
        let mut count = self.connections.entry(ip).or_insert(0);
        if *count >= self.max_connections {
            metrics::counter!("floodgate_joins_refused_total", "reason" => "too_many_connections")
                .increment(1);
            return Err(LimitError::TooManyConnections);
        }
        *count += 1;
        Ok(ConnectionSlot {
            limits: self.clone(),
            ip,
        })
    }

    /// Forgets rate-limit state of addresses and people not seen lately (bounded memory under
    /// churn).
    pub fn prune(&self) {
        self.joins.prune();
        self.people.prune();
    }

    #[cfg(test)]
    fn connections(&self, ip: IpAddr) -> u32 {
        self.connections.get(&self.client_of(ip)).map_or(0, |c| *c)
    }
}

/// One session's share of its address's connection count.
pub struct ConnectionSlot {
    limits: Arc<IpLimits>,
    ip: IpAddr,
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        // Remove the entry at zero so the map only holds addresses with live sessions.
        self.limits.connections.remove_if_mut(&self.ip, |_, count| {
            *count = count.saturating_sub(1);
            *count == 0
        });
    }
}

/// The gateway's connection budget: past it, new sessions are shed before the upgrade (503 with
/// `Retry-After`) instead of failing later for want of file descriptors or memory.
pub struct Budget {
    max: u64,
    open: AtomicU64,
    /// Sessions opened and closed since the start, each counted once: what the memory trimmer
    /// watches for the end of a ramp.
    churn: AtomicU64,
}

impl Budget {
    pub fn new(max: u64) -> Arc<Self> {
        Arc::new(Self {
            max: max.max(1),
            open: AtomicU64::new(0),
            churn: AtomicU64::new(0),
        })
    }

    /// A slot for one more session, or `None` if the gateway is full.
    pub fn take(self: &Arc<Self>) -> Option<BudgetSlot> {
        let taken = self
            .open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |open| {
                (open < self.max).then_some(open + 1)
            })
            .is_ok();
        if !taken {
            metrics::counter!("floodgate_joins_refused_total", "reason" => "gateway_full")
                .increment(1);
            return None;
        }
        self.churn.fetch_add(1, Ordering::Relaxed);
        Some(BudgetSlot {
            budget: self.clone(),
        })
    }

    pub fn max(&self) -> u64 {
        self.max
    }

    /// Sessions opened plus sessions closed so far.
    pub fn churn(&self) -> u64 {
        self.churn.load(Ordering::Relaxed)
    }
}

/// One session's share of the connection budget, given back on drop.
pub struct BudgetSlot {
    budget: Arc<Budget>,
}

impl Drop for BudgetSlot {
    fn drop(&mut self) {
        self.budget.open.fetch_sub(1, Ordering::AcqRel);
        self.budget.churn.fetch_add(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_are_counted_per_address_and_given_back() {
        let limits = IpLimits::new(2, 1_000);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let first = limits.admit(a).unwrap();
        let _second = limits.admit(a).unwrap();
        assert_eq!(limits.admit(a).err(), Some(LimitError::TooManyConnections));
        let _other = limits.admit(b).expect("another address is not affected");
        drop(first);
        assert_eq!(limits.connections(a), 1);
        assert!(limits.admit(a).is_ok());
    }

    #[test]
    fn the_budget_sheds_past_its_size_and_refills() {
        let budget = Budget::new(2);
        let a = budget.take().unwrap();
        let _b = budget.take().unwrap();
        assert!(budget.take().is_none());
        drop(a);
        assert!(budget.take().is_some());
    }

    #[test]
    fn joins_are_rate_limited_per_address() {
        let limits = IpLimits::new(1_000, 2);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let slots: Vec<_> = (0..4).map_while(|_| limits.admit(a).ok()).collect();
        assert_eq!(slots.len(), 4, "a burst of twice the rate");
        assert_eq!(limits.admit(a).err(), Some(LimitError::JoiningTooFast));
        assert!(limits.admit("10.0.0.9".parse().unwrap()).is_ok());
    }

    #[test]
    fn a_person_is_held_to_their_own_allowance_whatever_the_address() {
        let limits = IpLimits::new(1, 1);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        // The address's allowance spent by someone else...
        while limits.charge(a).is_ok() {}
        // ...is not this person's, who has their own.
        for _ in 0..PERSON_BURST {
            assert_eq!(limits.person(("s", 7u64)), Ok(()));
        }
        assert_eq!(limits.person(("s", 7u64)), Err(LimitError::PersonTooFast));
        assert_eq!(limits.person(("s", 8u64)), Ok(()), "another place");
        assert_eq!(limits.person(("t", 7u64)), Ok(()), "another sale");
    }

    #[test]
    fn defect_03_an_ipv6_client_counts_as_its_whole_64() {
        // One host gets a /64: every address in it is the same client to the limits.
        let limits = IpLimits::new(2, 1_000);
        let _a = limits.admit("2001:db8:1:2::1".parse().unwrap()).unwrap();
        let _b = limits
            .admit("2001:db8:1:2:ffff::9".parse().unwrap())
            .unwrap();
        assert_eq!(
            limits.admit("2001:db8:1:2:abcd::1".parse().unwrap()).err(),
            Some(LimitError::TooManyConnections)
        );
        assert!(
            limits.admit("2001:db8:1:3::1".parse().unwrap()).is_ok(),
            "the next /64 is someone else"
        );
        let rate = IpLimits::new(1_000, 1);
        let slots: Vec<_> = (1..=2)
            .map(|i| {
                rate.admit(format!("2001:db8::{i}").parse().unwrap())
                    .unwrap()
            })
            .collect();
        assert_eq!(slots.len(), 2);
        assert_eq!(
            rate.admit("2001:db8::3".parse().unwrap()).err(),
            Some(LimitError::JoiningTooFast),
            "the join rate counts the /64 too"
        );
    }

    #[test]
    fn defect_03_a_mapped_client_counts_as_its_ipv4_address() {
        let limits = IpLimits::new(1, 1_000);
        let _held = limits.admit("203.0.113.7".parse().unwrap()).unwrap();
        assert_eq!(
            limits.admit("::ffff:203.0.113.7".parse().unwrap()).err(),
            Some(LimitError::TooManyConnections)
        );
    }

    #[test]
    fn the_ipv6_prefix_is_configurable() {
        let per_48 = IpLimits::with_ipv6_prefix(1, 1_000, 48);
        let _held = per_48.admit("2001:db8:1:2::1".parse().unwrap()).unwrap();
        assert_eq!(
            per_48.admit("2001:db8:1:ffff::1".parse().unwrap()).err(),
            Some(LimitError::TooManyConnections)
        );
    }
}
