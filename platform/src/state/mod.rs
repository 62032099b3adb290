//! The Redis state as the services read it: the one place that knows a hash's field names and
//! the order of a pipeline's replies. Scripts change state (`lua/`, behind the gatekeeper and the
//! gateway's script modules); this module reads it, so the cluster work to come changes one layer.
//!
//! - [`SaleMeta`]: the sale's `meta` hash (settings, the lottery, counters).
//! - [`PoolCounts`]: one pool's counters and live holds; [`SaleCounts`]: all of a sale's.
//! - [`redis_time_ms`]: Redis' `TIME` in Unix milliseconds, the one clock of every decision.
//! - [`health`]: the services' health summaries for a sale's admission autopilot.

pub mod health;
mod pools;
pub mod writes;

pub use pools::{PoolCounts, SaleCounts};

use redis::Pipeline;

use crate::keys::SaleKeys;
use floodgate_protocol::settings::{ChallengeRule, Door, IdentityRule};
use floodgate_protocol::UnixMillis;

/// A sale's `meta` hash (`{s:<sale>}:meta`), every field of it. Written by arming
/// (`lua/arm_sale.lua`), the ops API (`rate`, `active_cap`, `paused`, `opens_at_ms`), the
/// controller (`sold_out`, counters, the pre-queue's close) and joins (`prequeue_chain`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SaleMeta {
    /// When admission starts, Unix ms (Redis' clock).
    pub opens_at_ms: UnixMillis,
    /// Admissions per second, as set.
    pub rate: f64,
    /// How long an admission token lives, ms.
    pub token_ttl_ms: i64,
    /// Most seats per reservation.
    pub max_seats: u32,
    /// Most unspent tokens plus live holds at once.
    pub active_cap: u64,
    /// Unspent tokens allowed per available seat.
    pub stock_factor: f64,
    /// An operator paused admission.
    pub paused: bool,
    /// Every pool is sold out and no hold can return: the room is closing.
    pub sold_out: bool,
    /// When the operator ended the sale (`floodgate-booking sale end`), Unix ms.
    pub ended_at_ms: Option<UnixMillis>,
    /// The sale's pools, in arming order.
    pub pools: Vec<String>,
    /// SHA-256 (hex) of the lottery's secret seed.
    pub lottery_commitment: String,
    /// The lottery's secret seed (hex); public once the pre-queue has closed.
    pub lottery_secret: Option<String>,
    /// The pre-queue's chain so far (1.6 of docs/protocol.md).
    pub prequeue_chain: Option<String>,
    /// Set when the pre-queue closes: its size, its digest, and when.
    pub prequeue_size: Option<u64>,
    pub prequeue_digest: Option<String>,
    pub prequeue_closed_at_ms: Option<UnixMillis>,
    /// Admission tokens handed out and not yet spent or expired.
    pub unspent: u64,
    /// Live tickets admitted so far, and dead tickets skipped.
    pub admitted_total: u64,
    pub dead_total: u64,
    /// Who may come in and what they must show (`identity`, `challenge`, `pow_difficulty`,
    /// `buyer_seats`: 0 for no per-buyer limit).
    pub door: Door,
    /// The admission autopilot's settings as ops set them (`autopilot::Settings` as JSON), kept
    /// as written: the leader's rate change applies only while the field is still exactly this
    /// (`lua/autopilot.lua`), so an operator's override always wins. `None`: off.
    pub autopilot: Option<String>,
}

impl SaleMeta {
    /// The hash's fields, in the order [`SaleMeta::from_fields`] reads them.
    pub const FIELDS: [&'static str; 25] = [
        "opens_at_ms",
        "rate",
        "token_ttl_ms",
        "max_seats",
        "active_cap",
        "stock_factor",
        "paused",
        "sold_out",
        "pools",
        "lottery_commitment",
        "lottery_secret",
        "prequeue_chain",
        "prequeue_size",
        "prequeue_digest",
        "prequeue_closed_at_ms",
        "unspent",
        "admitted_total",
        "dead_total",
        "identity",
        "challenge",
        "pow_difficulty",
        "buyer_seats",
        "ended_at_ms",
        "grace_secs",
        "autopilot",
    ];

    /// Adds the read of `keys`' meta to `pipe` (one reply, for [`SaleMeta::from_fields`]).
    pub fn query(pipe: &mut Pipeline, keys: &SaleKeys) {
        pipe.hget(keys.meta(), &Self::FIELDS);
    }

    /// Adds the read of the sale's pool list alone (one reply, for [`pool_list`]).
    pub fn query_pools(pipe: &mut Pipeline, keys: &SaleKeys) {
        pipe.hget(keys.meta(), "pools");
    }

    /// The meta from the values of [`SaleMeta::FIELDS`], or `None` if the sale is not armed
    /// (no `opens_at_ms`). Missing or unreadable settings read as arming would leave them when
    /// absent: no rate, no cap, one seat, a stock factor of 2, nothing paused or sold out.
    pub fn from_fields(values: &[Option<String>]) -> Option<Self> {
        let get = |name: &str| {
            let i = Self::FIELDS.iter().position(|f| *f == name)?;
            values.get(i).and_then(|v| v.as_deref())
        };
        let num = |name: &str| get(name).and_then(|v| v.parse::<f64>().ok());
        let count = |name: &str| num(name).map_or(0, |v| v.max(0.0) as u64);
        let opens_at_ms = num("opens_at_ms")? as UnixMillis;
        Some(SaleMeta {
            opens_at_ms,
            rate: num("rate").unwrap_or(0.0),
            token_ttl_ms: num("token_ttl_ms").map_or(0, |v| v as i64),
            max_seats: num("max_seats").map_or(1, |v| v as u32),
            // A missing cap is no cap (arming always writes one).
            active_cap: num("active_cap").map_or(u64::MAX, |v| v.max(0.0) as u64),
            stock_factor: num("stock_factor").unwrap_or(2.0),
            paused: get("paused") == Some("1"),
            sold_out: get("sold_out") == Some("1"),
            ended_at_ms: num("ended_at_ms").map(|v| v as UnixMillis),
            pools: pool_list(get("pools").unwrap_or_default()),
            lottery_commitment: get("lottery_commitment").unwrap_or_default().to_owned(),
            lottery_secret: get("lottery_secret").map(str::to_owned),
            prequeue_chain: get("prequeue_chain").map(str::to_owned),
            prequeue_size: num("prequeue_size").map(|v| v.max(0.0) as u64),
            prequeue_digest: get("prequeue_digest").map(str::to_owned),
            prequeue_closed_at_ms: num("prequeue_closed_at_ms").map(|v| v as UnixMillis),
            unspent: count("unspent"),
            admitted_total: count("admitted_total"),
            dead_total: count("dead_total"),
            door: door_from(&get, count("pow_difficulty"), count("buyer_seats")),
            autopilot: get("autopilot").map(str::to_owned),
        })
    }

    /// The autopilot's settings, if it is on and they read (a field a newer release wrote that
    /// this one cannot read is off: the rate stays as it is).
    pub fn autopilot_settings(&self) -> Option<crate::autopilot::Settings> {
        serde_json::from_str(self.autopilot.as_deref()?).ok()
    }

    /// Whether the pre-queue has closed and its draw can be made (size, digest and secret known).
    pub fn drawn(&self) -> bool {
        self.prequeue_size.is_some()
            && self.prequeue_digest.is_some()
            && self.lottery_secret.is_some()
    }
}

/// The door from the meta's fields; anything missing or unreadable reads as the default door
/// (what a sale armed before these settings existed has).
fn door_from<'a>(
    get: &impl Fn(&str) -> Option<&'a str>,
    difficulty: u64,
    buyer_seats: u64,
) -> Door {
    let default = Door::default();
    Door {
        identity: get("identity")
            .and_then(|v| IdentityRule::parse(v).ok())
            .unwrap_or(default.identity),
        challenge: get("challenge")
            .and_then(|v| ChallengeRule::parse(v).ok())
            .unwrap_or(default.challenge),
        pow_difficulty: u8::try_from(difficulty)
            .ok()
            .filter(|d| floodgate_protocol::settings::POW_DIFFICULTY.contains(d))
            .unwrap_or(default.pow_difficulty),
        max_seats_per_buyer: u32::try_from(buyer_seats).ok().filter(|s| *s > 0),
        grace_secs: get("grace_secs")
            .and_then(|v| v.parse().ok())
            .filter(|s| floodgate_protocol::settings::GRACE_SECS.contains(s)),
    }
}

/// Whether a sale is armed and whether its pre-queue has closed: the cheap read of endpoints that
/// need no more.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SaleStatus {
    pub armed: bool,
    pub closed: bool,
}

impl SaleStatus {
    /// Replies [`SaleStatus::query`] adds.
    pub const REPLIES: usize = 2;

    pub fn query(pipe: &mut Pipeline, keys: &SaleKeys) {
        pipe.hexists(keys.meta(), "opens_at_ms")
            .hexists(keys.meta(), "prequeue_size");
    }

    pub fn from_replies((armed, closed): (bool, bool)) -> Self {
        SaleStatus { armed, closed }
    }
}

/// The `pools` field: pool ids, comma-separated.
pub fn pool_list(field: &str) -> Vec<String> {
    field
        .split(',')
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
        .collect()
}

/// One entry of a sale's `admits` stream: the frontier passed places `from` (exclusive) to `to`
/// (inclusive), `n` of them live and admitted, with tokens expiring at `exp_ms`; written by
/// `lua/advance.lua` at `at_ms` (the entry id's time).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AdmitEntry {
    pub from: u64,
    pub to: u64,
    pub n: u64,
    pub exp_ms: UnixMillis,
    pub at_ms: UnixMillis,
}

impl AdmitEntry {
    /// Reads a stream entry (`id`, flat field/value list); `None` if it is not one.
    pub fn from_entry(id: &str, fields: &[String]) -> Option<Self> {
        Some(AdmitEntry {
            from: stream_field(fields, "from")?,
            to: stream_field(fields, "to")?,
            n: stream_field(fields, "n")?,
            exp_ms: stream_field(fields, "exp")?,
            at_ms: id.split('-').next()?.parse().ok()?,
        })
    }
}

/// The place an entry of a sale's `deaths` stream declares dead (`lua/bury.lua`).
pub fn death_place(fields: &[String]) -> Option<u64> {
    stream_field(fields, "p")
}

/// The change an entry of a sale's `autopilot_audit` stream queues (`lua/autopilot.lua`): its
/// JSON.
pub fn autopilot_change(fields: &[String]) -> Option<String> {
    stream_field(fields, "entry")
}

fn stream_field<T: std::str::FromStr>(fields: &[String], name: &str) -> Option<T> {
    fields
        .chunks_exact(2)
        .find(|kv| kv[0] == name)
        .and_then(|kv| kv[1].parse().ok())
}

/// Redis' `TIME` reply (seconds, microseconds) in Unix milliseconds.
pub fn redis_time_ms((secs, micros): (i64, i64)) -> UnixMillis {
    secs * 1000 + micros / 1000
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(pairs: &[(&str, &str)]) -> Vec<Option<String>> {
        SaleMeta::FIELDS
            .iter()
            .map(|f| {
                pairs
                    .iter()
                    .find(|(k, _)| k == f)
                    .map(|(_, v)| v.to_string())
            })
            .collect()
    }

    #[test]
    fn the_meta_reads_every_field_by_name() {
        let meta = SaleMeta::from_fields(&fields(&[
            ("opens_at_ms", "1000"),
            ("rate", "2.5"),
            ("token_ttl_ms", "120000"),
            ("max_seats", "4"),
            ("active_cap", "500"),
            ("stock_factor", "1.5"),
            ("paused", "1"),
            ("pools", "p1,p2,"),
            ("lottery_commitment", "c0"),
            ("prequeue_size", "7"),
            ("prequeue_digest", "ab"),
            ("lottery_secret", "s3"),
            ("unspent", "-3"),
            ("admitted_total", "9"),
        ]))
        .unwrap();
        assert_eq!(meta.opens_at_ms, 1000);
        assert_eq!(
            (meta.rate, meta.token_ttl_ms, meta.max_seats),
            (2.5, 120_000, 4)
        );
        assert_eq!((meta.active_cap, meta.stock_factor), (500, 1.5));
        assert!(meta.paused && !meta.sold_out);
        assert_eq!(meta.pools, ["p1", "p2"]);
        assert!(meta.drawn());
        assert_eq!(
            meta.unspent, 0,
            "a negative counter is read as nothing unspent"
        );
        assert_eq!((meta.admitted_total, meta.dead_total), (9, 0));
        assert_eq!(
            SaleMeta::from_fields(&fields(&[("rate", "2")])),
            None,
            "not armed"
        );
    }

    #[test]
    fn pool_counts_tell_missing_from_zero() {
        use redis::Value::{BulkString, Int, Nil};
        let counts = PoolCounts::all_from_replies(&[
            BulkString(b"10".to_vec()),
            BulkString(b"3".to_vec()),
            BulkString(b"2".to_vec()),
            BulkString(b"5".to_vec()),
            Int(2),
            Nil,
            Nil,
            BulkString(b"0".to_vec()),
            BulkString(b"0".to_vec()),
            Int(0),
        ]);
        assert_eq!(
            counts[0],
            PoolCounts {
                capacity: Some(10),
                available: Some(3),
                held: Some(2),
                sold: Some(5),
                holds: 2
            }
        );
        assert!(counts[0].armed());
        assert!(!counts[1].armed(), "a lost pool is never read as empty");
        assert_eq!(counts[1].available, None);
    }

    #[test]
    fn stream_entries_read_by_name() {
        let strings = |items: &[&str]| items.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            AdmitEntry::from_entry(
                "1700-0",
                &strings(&["from", "3", "to", "9", "n", "5", "exp", "99"])
            ),
            Some(AdmitEntry {
                from: 3,
                to: 9,
                n: 5,
                exp_ms: 99,
                at_ms: 1700
            })
        );
        assert_eq!(
            AdmitEntry::from_entry("1700-0", &strings(&["from", "3"])),
            None
        );
        assert_eq!(death_place(&strings(&["p", "12"])), Some(12));
        assert_eq!(death_place(&strings(&["q", "12"])), None);
        assert_eq!(
            autopilot_change(&strings(&["entry", "{\"to\":1}"])),
            Some("{\"to\":1}".to_owned())
        );
        assert_eq!(autopilot_change(&strings(&["entry"])), None);
    }

    #[test]
    fn redis_time_is_milliseconds() {
        assert_eq!(redis_time_ms((1_700_000_000, 123_456)), 1_700_000_000_123);
    }
}
