//! The allowances themselves: a rate per key ([`Rate`]), and per client address with the wider
//! networks around it ([`AddressRate`]).

use std::hash::Hash;
use std::net::{IpAddr, Ipv4Addr};

use ipnet::Ipv4Net;
use std::num::NonZeroU32;

use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

use super::counted_as;

/// A rate per key (an address, a pass): `per_sec` requests a second, in bursts of up to twice
/// that. In memory: a key that has not asked lately is forgotten by [`Rate::prune`].
pub struct Rate<K: Hash + Eq + Clone> {
    limiter: DefaultKeyedRateLimiter<K>,
    per_sec: u32,
}

impl<K: Hash + Eq + Clone> Rate<K> {
    pub fn per_second(per_sec: u32) -> Self {
        let per_sec = per_sec.max(1);
        let rate = NonZeroU32::new(per_sec).expect("at least one");
        let burst = NonZeroU32::new(per_sec.saturating_mul(2)).expect("at least one");
        Self {
            limiter: RateLimiter::keyed(Quota::per_second(rate).allow_burst(burst)),
            per_sec,
        }
    }

    /// One request every `period` per key, in bursts of up to `burst`.
    pub fn every(period: std::time::Duration, burst: u32) -> Self {
        let burst = NonZeroU32::new(burst.max(1)).expect("at least one");
        let quota = Quota::with_period(period.max(std::time::Duration::from_millis(1)))
            .expect("a period of at least a millisecond")
            .allow_burst(burst);
        Self {
            limiter: RateLimiter::keyed(quota),
            per_sec: (1.0 / period.as_secs_f64()).ceil() as u32,
        }
    }

    /// Takes one request of `key`'s allowance: `false` when it is used up.
    pub fn allow(&self, key: &K) -> bool {
        self.limiter.check_key(key).is_ok()
    }

    /// The configured rate.
    pub fn per_sec(&self) -> u32 {
        self.per_sec
    }

    /// Forgets the keys that have not asked lately (call it every minute or so), so the
    /// limiter does not grow with every key that ever asked.
    pub fn prune(&self) {
        self.limiter.retain_recent();
        self.limiter.shrink_to_fit();
    }

    /// How many keys it remembers now.
    pub fn len(&self) -> usize {
        self.limiter.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// How much more the wider IPv6 networks around a client's prefix may ask than one client: a
/// /56 sixteen times, a /48 256 times. Whoever holds a /48 (a hosting customer, a lab) could
/// otherwise take a fresh /64, and its allowance, per request: 65,536 of them. A mobile carrier
/// gives each phone a /64 and may put thousands of phones in one /48, so the wider allowances
/// are sized for a crowd, and a crowd that needs more is the one case to raise the limit for.
pub const WIDER_IPV6: [(u8, u32); 2] = [(56, 16), (WIDEST_IPV6, 256)];
/// The widest of them.
pub const WIDEST_IPV6: u8 = 48;

/// The IPv4 network a share of a budget is counted by too ([`AddressRate::share`]): whoever
/// holds a /24 would otherwise take 256 shares, a whole budget of tenths. (An allowance is not:
/// a carrier's addresses sit side by side, each with thousands of people behind it.)
pub const SHARE_IPV4: u8 = 24;

/// A rate per client address ([`Rate`]), and for an IPv6 client also per each wider network of
/// [`WIDER_IPV6`] around it (for a share, an IPv4 client's /24 too): a request is let through
/// only if every one of them has allowance left. The client's own is checked first, so one
/// client flooding spends only its own.
pub struct AddressRate {
    each: Rate<IpAddr>,
    wider: Vec<(u8, Rate<IpAddr>)>,
    /// A share's IPv4 /24 ([`SHARE_IPV4`]).
    wider_v4: Option<Rate<Ipv4Addr>>,
}

impl AddressRate {
    pub fn per_second(per_sec: u32) -> Self {
        Self {
            each: Rate::per_second(per_sec),
            wider: WIDER_IPV6
                .iter()
                .map(|(bits, times)| (*bits, Rate::per_second(per_sec.saturating_mul(*times))))
                .collect(),
            wider_v4: None,
        }
    }

    /// A share that no wider network multiplies: the client's prefix, its /56 and its /48 (an
    /// IPv4 client's /24) each get `per_sec`, so whoever holds a /56, a /48 or a /24 takes one
    /// share however many addresses it asks from (a part of a budget, where one client's
    /// allowance times 16 could be all).
    pub fn share(per_sec: u32) -> Self {
        Self {
            each: Rate::per_second(per_sec),
            wider: WIDER_IPV6
                .iter()
                .map(|(bits, _)| (*bits, Rate::per_second(per_sec)))
                .collect(),
            wider_v4: Some(Rate::per_second(per_sec)),
        }
    }

    /// Takes one request of `client`'s allowance (an address as [`counted_as`] gives it), and of
    /// its wider networks': `false` when one is used up.
    pub fn allow(&self, client: &IpAddr) -> bool {
        if !self.each.allow(client) {
            return false;
        }
        if let IpAddr::V4(v4) = client {
            return self.wider_v4.as_ref().is_none_or(|rate| {
                let network = Ipv4Net::new(*v4, SHARE_IPV4).expect("a valid prefix");
                rate.allow(&network.network())
            });
        }
        self.wider
            .iter()
            .all(|(bits, rate)| rate.allow(&counted_as(*client, *bits)))
    }

    /// The configured rate of one client.
    pub fn per_sec(&self) -> u32 {
        self.each.per_sec()
    }

    /// Forgets the clients and networks that have not asked lately.
    pub fn prune(&self) {
        self.each.prune();
        for (_, rate) in &self.wider {
            rate.prune();
        }
        if let Some(rate) = &self.wider_v4 {
            rate.prune();
        }
    }

    /// How many clients it remembers now.
    pub fn len(&self) -> usize {
        self.each.len()
    }

    pub fn is_empty(&self) -> bool {
        self.each.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_allows_bursts_of_twice_itself_per_key() {
        let rate = Rate::per_second(2);
        assert_eq!((0..10).filter(|_| rate.allow(&1u64)).count(), 4);
        assert!(rate.allow(&2u64), "another key has its own allowance");
        assert_eq!(rate.len(), 2);
        let slow = Rate::every(std::time::Duration::from_secs(60), 3);
        assert_eq!((0..10).filter(|_| slow.allow(&1u64)).count(), 3);
    }

    #[test]
    fn whoever_holds_a_48_cannot_take_a_fresh_64_per_request() {
        let rate = AddressRate::per_second(1);
        // Fresh /64s of one /48, one request each: each has its own allowance, the /56s and the
        // /48 around them do not. Without the wider networks, every one would pass.
        let passed = (0..2_000u32)
            .filter(|i| {
                let net: IpAddr = format!("2001:db8:7:{:x}::", i).parse().unwrap();
                rate.allow(&net)
            })
            .count();
        assert!(passed <= 2 * 256, "{passed} passed");
        assert!(passed >= 2 * 16, "more than one /56's worth: {passed}");
        // Another /48, and IPv4 clients, are someone else.
        assert!(rate.allow(&"2001:db8:8::".parse().unwrap()));
        assert!(rate.allow(&"203.0.113.9".parse().unwrap()));
        // One client flooding spends its own allowance only, not its /48's.
        let crowd = AddressRate::per_second(1);
        let flooder: IpAddr = "2001:db8:9:1::".parse().unwrap();
        assert_eq!((0..100).filter(|_| crowd.allow(&flooder)).count(), 2);
        // Its neighbours in its /56 (an allowance of 16, 32 at once) have all but its two.
        let neighbours = (2..100u32)
            .filter(|i| crowd.allow(&format!("2001:db8:9:{i:x}::").parse().unwrap()))
            .count();
        assert!((30..=32).contains(&neighbours), "{neighbours}");
    }

    #[test]
    fn whoever_holds_a_24_takes_one_share_of_a_budget() {
        let share = AddressRate::share(10);
        let passed = (1..=255u32)
            .filter(|i| share.allow(&format!("198.51.100.{i}").parse().unwrap()))
            .count();
        assert_eq!(passed, 20, "the /24's one share, in a burst of twice it");
        assert!(share.allow(&"198.51.101.1".parse().unwrap()), "another /24");
        // An allowance is each address's: a carrier's addresses side by side are not one.
        let allowance = AddressRate::per_second(10);
        let passed = (1..=255u32)
            .filter(|i| allowance.allow(&format!("198.51.100.{i}").parse().unwrap()))
            .count();
        assert_eq!(passed, 255);
    }
}
