//! Limits on the waiting room's front door: how many sessions one client may hold at once, and
//! how fast it may join (the gateway's own budget: crate::budget). All are checked before a
//! ticket is taken, so a flood costs a counter or a map lookup, not a Redis round trip or a place
//! in line.
//!
//! A join is charged to whoever it shows it is (crate::join), so that a stranger sending junk
//! from a carrier's address cannot spend the allowance of the people behind it:
//! - a person, once it names one with something paid for: a signed-in buyer, or the place of a
//!   resume token whose MAC checks on a sale that asks for a proof of work (the place cost one).
//!   Each is held to [`PERSON_BURST`] joins at once, then one every [`PERSON_EVERY`] (a
//!   reconnect, a second tab), and to [`PERSON_SESSIONS`] sessions at once, whatever address it
//!   comes from;
//! - nobody, for a solved proof of work (each answer is single-use and cost its own search);
//! - its address otherwise: a new place on a sale that asks for nothing by someone not signed
//!   in, a credential or an answer that fails, and a sale this gateway has no room for yet (its
//!   lookup reads Redis). Those anonymous sessions count against the address's
//!   `max_connections`. On such a sale a place coming back pays with its own allowance and may
//!   hold twice the anonymous sessions (they move from a draining gateway to the rest).
//!
//! A place coming back that no buyer signed in to, on any sale, also spends its address's
//! allowance of returns, [`RETURNS_PER_JOIN`] times its joins (a gateway's drain sends a whole
//! carrier address's people back at once): each return is a script in the sale's slot, and a
//! machine's solved places coming back as often as each may would spend the gateway's budget of
//! returns (crate::guards::resumes) for everyone.
//!
//! Every session of an address that no person pays for (anonymous ones, and new places paid for
//! by a puzzle) counts against a wider cap, [`PAID_SESSIONS_PER_ANONYMOUS`] times the anonymous
//! one: a machine solving puzzles a thousand times faster than a phone cannot fill the gateway
//! from one address. A person's sessions (a buyer's, a place's coming back) are held to the
//! person's cap instead, so filling the address's cap shuts none of its people out of their
//! places. A place coming back that no buyer signed in to is a person too, but a machine can
//! make places (a solved puzzle each) and bring each back within its grace: its address's places
//! coming back are held to a cap of their own, as large as every session's, so a stranger who
//! leaves and takes back its places holds no more of a gateway than its new places would, and
//! its new places shut out no one coming back. Like the allowances, every cap of an IPv6 client
//! holds for its /56 and /48 too, at
//! `WIDER_IPV6` times it, but the cap of every session at [`WIDER_SESSIONS`] times (a /48's
//! would otherwise be more than a gateway holds).
//!
//! A "client" here is an address as the limits see it ([`IpLimits::client_of`],
//! `floodgate_platform::clients::counted_as`): an IPv4 address (an IPv4-mapped IPv6 one counts as
//! its IPv4 address), or an IPv6 prefix, because one IPv6 host is routinely given a whole /64 and
//! could otherwise take a fresh address per join.

use std::hash::{Hash, Hasher as _};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use floodgate_platform::clients::{AddressRate, Rate, WIDER_IPV6};
use floodgate_protocol::api::code;

use crate::error::ApiError;

/// Joins one person (a place, a signed-in buyer) may make at once on a gateway.
pub const PERSON_BURST: u32 = 3;
/// Then one every so often: a person reconnecting after a lost network does so once.
pub const PERSON_EVERY: Duration = Duration::from_secs(1);
/// A place coming back (its resume token, no buyer signed in) may do so [`PERSON_BURST`] times
/// at once, then once in this long: a lost network comes back once, a drain sends it once, and
/// each return is a script of its own in the sale's slot, charged to its address's share of the
/// gateway's returns (crate::guards::resumes), which a stranger's places coming back every
/// second would spend for everyone behind that address.
pub const PLACE_RETURN_EVERY: Duration = Duration::from_secs(10);
/// Sessions one person may hold at once on a gateway: tabs, and a reconnect before the old
/// socket's end was noticed.
pub const PERSON_SESSIONS: u32 = 4;
/// Every session of an address, over the anonymous ones' cap.
pub const PAID_SESSIONS_PER_ANONYMOUS: u32 = 32;
/// An address's places coming back (no buyer signed in), over its joins.
pub const RETURNS_PER_JOIN: u32 = 10;
/// How much more of every session (the cap above the anonymous one) the wider IPv6 networks
/// around a client's /64 may hold: a /56 4 times, a /48 16 times, 16,384 sessions a gateway.
/// Not `WIDER_IPV6`'s 16 and 256: a /48's 262,144 would be more than a gateway holds, and
/// whoever holds a /48 and a GPU solving puzzles could fill every gateway with places of its
/// own. A carrier's /48 of phones spread over a fleet's gateways stays well under it.
pub const WIDER_SESSIONS: &[(u8, u32)] = &[(56, 4), (48, 16)];

/// What pays for a session, as the address's caps count it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Payer {
    /// A new place on a sale that asks for nothing, by someone not signed in.
    Anonymous,
    /// Such a place coming back: the anonymous cap, twice over.
    Returning,
    /// A sign-in, or a sale's proof of work.
    Paid,
    /// A place coming back on a sale that asks for a proof of work, no buyer signed in: its own
    /// caps, and its address's places coming back.
    Place,
}

pub struct IpLimits {
    max_connections: u32,
    /// Prefix length an IPv6 address is counted by.
    ipv6_prefix: u8,
    /// Anonymous sessions per address (and per wider network: `networks`).
    anonymous: Counts<Network>,
    /// The sessions no person pays for, per address (likewise).
    sessions: Counts<Network>,
    /// Places coming back, no buyer signed in, on a sale that asks for a proof of work, per
    /// address (likewise).
    places_back: Counts<Network>,
    /// Sessions per person (`Person`).
    people_sessions: Counts<u64>,
    joins: AddressRate,
    /// Places coming back to a sale without a proof of work, per address.
    returns: AddressRate,
    /// Joins of each person.
    people: Rate<u64>,
    /// Returns of each place no buyer signed in to.
    places: Rate<u64>,
}

/// Someone a join names, as the limits know them: a hash of the sale and who they are (a place,
/// a buyer, a puzzle's answer).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Person(u64);

impl Person {
    pub fn of(who: impl Hash) -> Self {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        who.hash(&mut hasher);
        Self(hasher.finish())
    }
}

/// Why a join was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum LimitError {
    TooManyConnections,
    JoiningTooFast,
    /// This place, this buyer or this answer joins faster than a person does.
    PersonTooFast,
    /// This place or this buyer holds as many sessions as a person may.
    PersonTooMany,
}

impl From<LimitError> for ApiError {
    fn from(e: LimitError) -> Self {
        let (code, message) = match e {
            LimitError::TooManyConnections => (
                code::TOO_MANY_CONNECTIONS,
                "too many open connections from this address",
            ),
            LimitError::PersonTooMany => (
                code::TOO_MANY_CONNECTIONS,
                "this place is open in too many sessions; close one",
            ),
            LimitError::JoiningTooFast => (
                code::JOIN_RATE_LIMITED,
                "joining too fast from this address; retry in a second",
            ),
            LimitError::PersonTooFast => (
                code::JOIN_RATE_LIMITED,
                "this place, sign-in or answer is joining too often; retry in a second",
            ),
        };
        ApiError::new(code, message.into())
    }
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
            anonymous: Counts::default(),
            sessions: Counts::default(),
            places_back: Counts::default(),
            people_sessions: Counts::default(),
            joins: AddressRate::per_second(joins_per_sec),
            returns: AddressRate::per_second(joins_per_sec.saturating_mul(RETURNS_PER_JOIN)),
            people: Rate::every(PERSON_EVERY, PERSON_BURST),
            places: Rate::every(PLACE_RETURN_EVERY, PERSON_BURST),
        })
    }

    /// The client `ip` counts as: its IPv4 address, or its IPv6 network of the configured prefix.
    pub fn client_of(&self, ip: IpAddr) -> IpAddr {
        floodgate_platform::clients::counted_as(ip, self.ipv6_prefix)
    }

    /// Admits one more anonymous session from `ip` (its join charged, and a session slot held),
    /// or says why not.
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<SessionSlot, LimitError> {
        self.charge(ip)?;
        self.hold(ip, Payer::Anonymous, None)
    }

    /// Charges one join to `ip`'s allowance.
    pub fn charge(&self, ip: IpAddr) -> Result<(), LimitError> {
        self.take(&self.joins, ip)
    }

    fn take(&self, rate: &AddressRate, ip: IpAddr) -> Result<(), LimitError> {
        if rate.allow(&self.client_of(ip)) {
            return Ok(());
        }
        metrics::counter!("floodgate_joins_refused_total", "reason" => "join_rate_limited")
            .increment(1);
        Err(LimitError::JoiningTooFast)
    }

    /// Charges one join to `person`'s own allowance.
    pub fn person(&self, person: Person) -> Result<(), LimitError> {
        charge(&self.people, person, "person_rate_limited")
    }

    /// Charges a place coming back, no buyer signed in, to its own allowance of returns, then
    /// (within it) to `ip`'s: a place refused for coming back too often spends nothing of its
    /// address's, so one token sent again and again costs the people behind its address no
    /// more than its own allowance lets it.
    pub fn place_comes_back(&self, ip: IpAddr, place: Person) -> Result<(), LimitError> {
        charge(&self.places, place, "place_returns_too_fast")?;
        self.take(&self.returns, ip)
    }

    /// Holds a session of `ip`'s (as `payer` counts), and of `person`'s if it names one, or says
    /// which cap it would pass. Each is given back when the returned [`SessionSlot`] is dropped
    /// (the session ended, or the upgrade failed).
    pub fn hold(
        self: &Arc<Self>,
        ip: IpAddr,
        payer: Payer,
        person: Option<Person>,
    ) -> Result<SessionSlot, LimitError> {
        let ip = self.client_of(ip);
        let refused = |reason: &'static str, e: LimitError| {
            metrics::counter!("floodgate_joins_refused_total", "reason" => reason).increment(1);
            Err(e)
        };
        // From here on, dropping the slot gives back what it holds so far.
        let mut slot = SessionSlot {
            limits: self.clone(),
            ip,
            counted: None,
            anonymous: false,
            person: None,
        };
        // A signed-in buyer alone is not counted by address: one place an identity, and an
        // identity is the provider's to hand out.
        let counted = match (payer, person) {
            (Payer::Paid, Some(_)) => None,
            (Payer::Place, _) => Some(Counted::PlaceBack),
            _ => Some(Counted::Session),
        };
        if let Some(counted) = counted {
            let every = self
                .max_connections
                .saturating_mul(PAID_SESSIONS_PER_ANONYMOUS);
            if !self.counts(counted).take_all(ip, every, WIDER_SESSIONS) {
                return refused("too_many_connections", LimitError::TooManyConnections);
            }
            slot.counted = Some(counted);
        }
        let anonymous_cap = match payer {
            Payer::Anonymous => Some(self.max_connections),
            Payer::Returning => Some(self.max_connections.saturating_mul(2)),
            Payer::Paid | Payer::Place => None,
        };
        if let Some(cap) = anonymous_cap {
            if !self.anonymous.take_all(ip, cap, &WIDER_IPV6) {
                return refused("too_many_connections", LimitError::TooManyConnections);
            }
            slot.anonymous = true;
        }
        if let Some(person) = person {
            if !self.people_sessions.take(person.0, PERSON_SESSIONS) {
                return refused("person_sessions", LimitError::PersonTooMany);
            }
            slot.person = Some(person);
        }
        Ok(slot)
    }

    fn counts(&self, counted: Counted) -> &Counts<Network> {
        match counted {
            Counted::Session => &self.sessions,
            Counted::PlaceBack => &self.places_back,
        }
    }

    /// Forgets rate-limit state of addresses and people not seen lately (bounded memory under
    /// churn).
    pub fn prune(&self) {
        self.joins.prune();
        self.returns.prune();
        self.people.prune();
        self.places.prune();
    }

    #[cfg(test)]
    fn connections(&self, ip: IpAddr) -> u32 {
        self.anonymous.get(&(self.client_of(ip), 128))
    }
}

/// One join of `person` against `rate`, or its refusal, counted under `reason`.
fn charge(rate: &Rate<u64>, person: Person, reason: &'static str) -> Result<(), LimitError> {
    if rate.allow(&person.0) {
        return Ok(());
    }
    metrics::counter!("floodgate_joins_refused_total", "reason" => reason).increment(1);
    Err(LimitError::PersonTooFast)
}

mod counts;

pub use counts::SessionSlot;
use counts::{Counted, Counts, Network};

#[cfg(test)]
#[path = "limits_tests.rs"]
mod tests;
