//! What a stranger's requests may cost on the gateway's public paths besides the join (which
//! has its own limits, `crate::limits`): each path that reaches Redis, or spends CPU per request,
//! goes through a [`Guard`]:
//!
//! - each client address (platform::clients: behind the edge, the client it forwards for; an
//!   IPv6 client as its prefix) has an allowance per second, in bursts of twice that: past it,
//!   429 with the path's code and `Retry-After`. The allowances are sized for carrier-grade NAT
//!   (docs/runbook.md, "Per-address limits"): many people share one mobile address, so they stop
//!   a script, not a household or a carrier. On `/place` only questions without a genuine token
//!   count (crate::standing): a genuine one is held to its place's allowance;
//! - a path that reads the sale's slot takes a token of the gateway's own budget per read: past
//!   it, 503 with the path's busy code, so however many ask, and from however many addresses,
//!   the Redis work of that path is bounded per gateway. No address may take more than a tenth
//!   of that budget ([`SHARE`]; past it, 429 with the path's code), nor may an IPv4 /24 or an
//!   IPv6 /48 (`floodgate_platform::clients::AddressRate::share`): a stranger holding thousands
//!   of genuine places (each within its own allowance) could otherwise spend the whole of it
//!   from one address, and everyone else's questions would be answered 503.
//!
//! The state is this process's memory (a map lookup per request), never Redis: the sale's slot is
//! the one place every join meets, and a limit must not add to it.

use std::net::IpAddr;
use std::num::NonZeroU32;

use floodgate_platform::clients::{AddressRate, Rate};
use floodgate_protocol::api::code;
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};

use crate::error::ApiError;
use crate::limits::Person;

/// The refusals of one path.
#[derive(Clone, Copy, Debug)]
pub struct Refusals {
    /// 429: this address asks too fast.
    pub limited: &'static str,
    pub limited_message: &'static str,
    /// 503: this gateway reads as fast as it may.
    pub busy: &'static str,
    pub busy_message: &'static str,
}

/// The part of a gateway's read budget one address may take: a tenth, so that a carrier's
/// address, with people polling every 30 s, is served for 1,500 of them a gateway at the default
/// budget, and one stranger leaves nine tenths to everyone else.
pub const SHARE: u32 = 10;

/// One path's limits on a gateway.
pub struct Guard {
    per_client: AddressRate,
    /// `None` for a path that reads nothing of Redis.
    reads: Option<DefaultDirectRateLimiter>,
    /// Each address's share of `reads`.
    share: Option<AddressRate>,
    refusals: Refusals,
}

impl Guard {
    /// `per_client` requests a second from each address, `reads` reads of Redis a second from
    /// this gateway (each in bursts of twice that).
    pub fn new(per_client: u32, reads: Option<u32>, refusals: Refusals) -> Self {
        let budget = |reads: u32| {
            let rate = NonZeroU32::new(reads.max(1)).expect("at least one");
            let burst = NonZeroU32::new(reads.max(1).saturating_mul(2)).expect("at least one");
            RateLimiter::direct(Quota::per_second(rate).allow_burst(burst))
        };
        Self {
            per_client: AddressRate::per_second(per_client),
            reads: reads.map(budget),
            share: reads.map(|reads| AddressRate::share((reads / SHARE).max(1))),
            refusals,
        }
    }

    /// Lets one request of `client` (as platform::clients counts it) in, or refuses it.
    pub fn admit(&self, client: IpAddr) -> Result<(), ApiError> {
        if self.per_client.allow(&client) {
            return Ok(());
        }
        metrics::counter!("floodgate_requests_limited_total", "code" => self.refusals.limited)
            .increment(1);
        Err(ApiError::new(
            self.refusals.limited,
            self.refusals.limited_message.into(),
        ))
    }

    /// Takes a token of the gateway's read budget for one read of the sale's slot, within
    /// `client`'s share of it.
    pub fn read(&self, client: IpAddr) -> Result<(), ApiError> {
        if self
            .share
            .as_ref()
            .is_some_and(|share| !share.allow(&client))
        {
            metrics::counter!("floodgate_requests_limited_total", "code" => self.refusals.limited)
                .increment(1);
            return Err(ApiError::new(
                self.refusals.limited,
                "this address asks for more than its share of what this gateway may ask of Redis; slow down"
                    .into(),
            ));
        }
        if self
            .reads
            .as_ref()
            .is_none_or(|reads| reads.check().is_ok())
        {
            return Ok(());
        }
        metrics::counter!("floodgate_requests_limited_total", "code" => self.refusals.busy)
            .increment(1);
        Err(ApiError::new(
            self.refusals.busy,
            self.refusals.busy_message.into(),
        ))
    }

    /// Forgets the addresses that have not asked lately (called every minute).
    pub fn prune(&self) {
        self.per_client.prune();
        if let Some(share) = &self.share {
            share.prune();
        }
    }
}

/// `GET /v1/sales/{sale}/place`'s limits: per address and the read budget ([`Guard`]), and per
/// place, whoever asks: an app polls every 30 s or so, so one place asked about more than once
/// every `FLOODGATE_PLACE_EVERY_MS` (three at once) is a script, and is refused before its
/// Redis read.
pub struct PlaceGuard {
    pub guard: Guard,
    /// `None` when the setting is 0 (no allowance per place).
    per_place: Option<Rate<Person>>,
}

const PLACE_REFUSALS: Refusals = Refusals {
    limited: code::PLACE_RATE_LIMITED,
    limited_message: "asking where places stand too fast from this address; poll every 30 s or so",
    busy: code::PLACE_BUSY,
    busy_message: "places are much asked about right now; retry in a few seconds",
};

impl PlaceGuard {
    pub fn new(per_client: u32, reads: u32, every: std::time::Duration) -> Self {
        Self {
            guard: Guard::new(per_client, Some(reads), PLACE_REFUSALS),
            per_place: (!every.is_zero()).then(|| Rate::every(every, 3)),
        }
    }

    /// Lets one more question about `ticket` of `sale` in, or refuses it.
    pub fn ask(&self, sale: &str, ticket: u64) -> Result<(), ApiError> {
        let Some(per_place) = &self.per_place else {
            return Ok(());
        };
        if per_place.allow(&Person::of((sale, ticket))) {
            return Ok(());
        }
        metrics::counter!("floodgate_requests_limited_total", "code" => code::PLACE_RATE_LIMITED)
            .increment(1);
        Err(ApiError::new(
            code::PLACE_RATE_LIMITED,
            "this place is asked about too often; poll every 30 s or so".into(),
        ))
    }

    pub fn prune(&self) {
        self.guard.prune();
        if let Some(per_place) = &self.per_place {
            per_place.prune();
        }
    }
}

/// Taking places back (`/ws` with a resume token): each runs a script in the sale's slot, one at
/// a time (a new place's join is batched, a return is not), so this gateway takes back at most
/// `resumes` a second (in bursts of twice that), and no address more than a tenth of them: a
/// stranger holding thousands of places, each within its own allowance, could otherwise send the
/// sale's slot tens of thousands of scripts a second from one address. Per address itself, a
/// return is held to its place's allowance and its sessions (crate::limits), not to this.
pub fn resumes(resumes: u32) -> Guard {
    Guard::new(
        u32::MAX,
        Some(resumes),
        Refusals {
            limited: code::JOIN_RATE_LIMITED,
            limited_message: "",
            busy: code::RESUME_BUSY,
            busy_message: "this gateway takes places back as fast as it may; retry after the delay, or another gateway",
        },
    )
}

/// `GET /v1/sales/{sale}/challenge`'s limit: per address, on asks for a sale this gateway has no
/// room for (its lookup reads Redis). A live sale's puzzle costs a MAC and is never refused: it
/// is the same for everyone for a few seconds (protocol::challenge).
pub fn challenges(per_client: u32) -> Guard {
    per_address(
        per_client,
        code::CHALLENGE_RATE_LIMITED,
        "asking for the puzzles of sales not open here too fast from this address",
    )
}

/// `GET /v1/sales/{sale}` and its seat counts' limit: per address, on asks about a sale this
/// gateway has no room for (made-up ids among them: each reads the sale's slot in Redis). A sale
/// open here is answered from its room's view, or its seat counts' snapshot, and never refused.
pub fn lookups(per_client: u32) -> Guard {
    per_address(
        per_client,
        code::SALE_LOOKUP_RATE_LIMITED,
        "asking about sales not open here too fast from this address",
    )
}

/// A path's limit per address alone (it reads nothing of Redis once past it): 429 `limited`.
fn per_address(per_client: u32, limited: &'static str, message: &'static str) -> Guard {
    Guard::new(
        per_client,
        None,
        Refusals {
            limited,
            limited_message: message,
            busy: limited,
            busy_message: "",
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const REFUSALS: Refusals = Refusals {
        limited: code::DRAW_RATE_LIMITED,
        limited_message: "slow down",
        busy: code::DRAW_BUSY,
        busy_message: "busy",
    };

    #[test]
    fn an_address_past_its_allowance_is_refused_and_others_are_not() {
        let guard = Guard::new(1, Some(100), REFUSALS);
        let a: IpAddr = "203.0.113.1".parse().unwrap();
        assert!(
            guard.admit(a).is_ok() && guard.admit(a).is_ok(),
            "a burst of two"
        );
        assert_eq!(
            guard.admit(a).map_err(|e| e.code()).err(),
            Some(code::DRAW_RATE_LIMITED)
        );
        assert!(guard.admit("203.0.113.2".parse().unwrap()).is_ok());
    }

    #[test]
    fn one_place_is_asked_about_at_most_so_often_whoever_asks() {
        let place = PlaceGuard::new(1_000, 1_000, std::time::Duration::from_secs(5));
        assert_eq!((0..10).filter(|_| place.ask("s", 7).is_ok()).count(), 3);
        assert_eq!(
            place.ask("s", 7).map_err(|e| e.code()).err(),
            Some(code::PLACE_RATE_LIMITED)
        );
        assert!(place.ask("s", 8).is_ok() && place.ask("t", 7).is_ok());
    }

    #[test]
    fn the_read_budget_runs_out_whoever_asks() {
        let guard = Guard::new(100, Some(1), REFUSALS);
        // Of three networks: each /24 takes one share of the budget.
        let [a, b]: [IpAddr; 2] = [
            "203.0.113.1".parse().unwrap(),
            "198.51.100.2".parse().unwrap(),
        ];
        assert!(
            guard.read(a).is_ok() && guard.read(b).is_ok(),
            "a burst of two"
        );
        assert_eq!(
            guard
                .read("192.0.2.3".parse().unwrap())
                .map_err(|e| e.code())
                .err(),
            Some(code::DRAW_BUSY)
        );
    }

    /// A stranger holding thousands of genuine places behind one address (each asked about
    /// within its own allowance) takes a tenth of the gateway's reads, and everyone else is
    /// still answered. Before, it took them all and everyone else heard 503.
    #[test]
    fn one_address_takes_at_most_its_share_of_the_reads() {
        let guard = Guard::new(100_000, Some(100), REFUSALS);
        let stranger: IpAddr = "203.0.113.1".parse().unwrap();
        let taken = (0..1_000).filter(|_| guard.read(stranger).is_ok()).count();
        assert!(taken <= 2 * 100 / SHARE as usize + 1, "{taken} reads");
        assert_eq!(
            guard.read(stranger).map_err(|e| e.code()).err(),
            Some(code::DRAW_RATE_LIMITED)
        );
        let others = (0..50u8)
            .filter(|i| guard.read(IpAddr::from([198, 51, *i, 1])).is_ok())
            .count();
        assert_eq!(others, 50, "everyone else is still answered");
        // An IPv4 /24 holds 256 addresses: asking from each of them takes one share too.
        let taken = (0..=255u8)
            .filter(|i| guard.read(IpAddr::from([192, 0, 2, *i])).is_ok())
            .count();
        assert!(
            taken <= 2 * 100 / SHARE as usize + 1,
            "a /24 took {taken} reads"
        );
        // An IPv6 /56 holds 256 /64s: asking from each of them takes one share all the same.
        let taken = (0..256u16)
            .filter(|i| {
                let host = std::net::Ipv6Addr::new(0x2001, 0xdb8, 7, *i, 0, 0, 0, 1);
                guard.read(IpAddr::V6(host)).is_ok()
            })
            .count();
        assert!(
            taken <= 2 * 100 / SHARE as usize + 1,
            "a /56 took {taken} reads"
        );
    }
}
