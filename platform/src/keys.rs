//! The Redis key layout.
//!
//! Every key is `<prefix><{hash tag}>:<name>`. The prefix (default `fg:`) is configuration so tests
//! can run side by side on one Redis with a random prefix each. The hash tag decides the Redis
//! Cluster slot, and there are exactly two kinds of slot:
//!
//! | slot | hash tag | keys |
//! |---|---|---|
//! | sale-wide | `{s:<sale>}` | `meta`, `seq`, `frontier`, `leader`, `epoch`, `tok:<jti>`, the waiting room's `prequeue`, `gone`, `holders`, `owners`, `dead`, `deaths`, `admits`, `batches`, `tokens`, `gateways`, `gw:<id>`, `gw:<id>:sessions`, `gw:<id>:taken` |
//! | per pool | `{p:<sale>/<pool>}` | `cfg`, `avail`, `held`, `sold`, `holds`, `expiries`, `outbox`, `relay`, `relay_epoch`, `rsv:<id>`, `tok:<jti>`, `whk:<event>` |
//! | per buyer | `{b:<sale>/<buyer tag>}` | `rec` (the buyer's place in line and seats) |
//! | per answer | `{c:<answer id>}` | `spent` (a solved proof of work, until its puzzle expires) |
//! | global | none | `sales` (the armed sales, for the relay and the reaper) |
//!
//! A Lua script only ever receives keys from one of these builders, so no script can touch two
//! slots. Pools of one sale spread over the cluster; the sale's own queue state stays together.
//!
//! Sale and pool ids are validated by [`floodgate_protocol::ids`] before they get here; they cannot contain
//! `{`, `}` or `:`, so a tag can never be closed early.

use std::sync::Arc;

/// Builds every Redis key Floodgate uses, under one configurable prefix.
#[derive(Clone, Debug)]
pub struct Keys {
    prefix: Arc<str>,
}

impl Keys {
    /// # Panics
    /// If `prefix` contains a brace: it would become the hash tag of every key and put the whole
    /// system in one Redis Cluster slot. Configuration checks this first with [`check_prefix`].
    pub fn new(prefix: impl Into<String>) -> Self {
        let prefix = prefix.into();
        assert!(check_prefix(&prefix), "key prefix must not contain a brace");
        Self {
            prefix: Arc::from(prefix),
        }
    }

    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Set: ids of every armed sale that has not ended. Read by background workers (relay,
    /// reaper) to find pools;
    /// never by a script, so it may live in any slot.
    pub fn sales(&self) -> String {
        format!("{}sales", self.prefix)
    }

    /// Set: ids of the sales that ended (`floodgate-booking sale end`) and whose Redis state is
    /// not purged yet. The relay looks at their outboxes now and then (a late webhook still
    /// writes events there); the reaper never does (they hold no seats).
    pub fn ended_sales(&self) -> String {
        format!("{}sales:ended", self.prefix)
    }

    /// Keys in the sale-wide slot of `sale`.
    pub fn sale(&self, sale: &str) -> SaleKeys {
        SaleKeys {
            base: format!("{}{{s:{}}}", self.prefix, sale),
        }
    }

    /// Keys in the slot of one inventory pool of `sale`.
    pub fn pool(&self, sale: &str, pool: &str) -> PoolKeys {
        PoolKeys {
            base: format!("{}{{p:{}/{}}}", self.prefix, sale, pool),
        }
    }
}

impl Keys {
    /// The record of one buyer in one sale, in a slot of its own: buyers spread over the
    /// cluster instead of adding to the sale's slot, which every join already meets.
    pub fn buyer(&self, sale: &str, buyer: &floodgate_protocol::identity::BuyerId) -> String {
        format!("{}{{b:{}/{}}}:rec", self.prefix, sale, buyer.key_tag())
    }

    /// How long a buyer's record lives after it last changed (its place in line and its seats
    /// count): longer than any sale's rush, so a buyer keeps one place and one count per sale.
    pub const BUYER_RECORD_LIFETIME: std::time::Duration =
        std::time::Duration::from_secs(7 * 24 * 3600);

    /// The mark of a solved proof-of-work answer (a puzzle and its nonce; the id is hex), kept
    /// until the puzzle expires so the answer joins once.
    pub fn spent_puzzle(&self, id: &str) -> String {
        format!("{}{{c:{}}}:spent", self.prefix, id)
    }
}

/// Keys of one sale's waiting room and token use, all in one slot.
#[derive(Clone, Debug)]
pub struct SaleKeys {
    base: String,
}

impl SaleKeys {
    /// Hash: the armed sale's settings (`opens_at`, `rate`, `token_ttl_ms`, `max_seats`,
    /// `active_cap`, `pools`), written by arming and read by gateways and booking.
    pub fn meta(&self) -> String {
        format!("{}:meta", self.base)
    }
    /// Integer: the last ticket number handed out (tickets start at 1).
    pub fn seq(&self) -> String {
        format!("{}:seq", self.base)
    }
    /// Integer: the highest ticket admitted so far (0 before the first admission).
    pub fn frontier(&self) -> String {
        format!("{}:frontier", self.base)
    }
    /// String with a TTL: the id of the gateway instance currently running the admission controller.
    pub fn leader(&self) -> String {
        format!("{}:leader", self.base)
    }
    /// Hash: the use of one admission token (`idem`, `fp` of the request that claimed it).
    pub fn token(&self, jti: &str) -> String {
        format!("{}:tok:{}", self.base, jti)
    }
    /// Integer: incremented each time the controller lease changes hands (the fencing epoch).
    pub fn epoch(&self) -> String {
        format!("{}:epoch", self.base)
    }
    /// Hash with a TTL: the services' health summaries for the sale's admission autopilot, a
    /// field each (`booking:<instance>`: an `autopilot::Health` as JSON), every one rewritten
    /// each second and the hash's TTL with it, so a sale nobody serves loses it.
    pub fn health(&self) -> String {
        format!("{}:health", self.base)
    }
    /// String with a TTL: the admission autopilot's last step (an `autopilot::Step` as JSON:
    /// what it decided, on which signal, and when), written by the sale's leader each second
    /// the autopilot is on, for the console.
    pub fn autopilot(&self) -> String {
        format!("{}:autopilot", self.base)
    }
    /// Stream, capped: the autopilot's notable rate changes waiting for the booking service to
    /// write them into the audit trail (the gateway that decides them has no database), each
    /// deleted once written.
    pub fn autopilot_audit(&self) -> String {
        format!("{}:autopilot_audit", self.base)
    }
    /// List: the draw nonce of every pre-queue ticket, in ticket order (published for verifiers).
    pub fn prequeue(&self) -> String {
        format!("{}:prequeue", self.base)
    }
    /// Sorted set: the pre-queue's batches of joins, scored by their first ticket, each
    /// `<first>:<count>:<Merkle root>:<chain after it>` (published for verifiers).
    pub fn prequeue_batches(&self) -> String {
        format!("{}:prequeue_batches", self.base)
    }
    /// Sorted set: tickets whose client went away, scored by the end of their grace (Unix ms);
    /// score 0 once the grace has passed and the ticket is dead for good.
    pub fn gone(&self) -> String {
        format!("{}:gone", self.base)
    }
    /// Sorted set: tickets whose person left inside their grace before their turn (leave.lua,
    /// sweep.lua), scored by their place in line, 0 until the leader knows it (left before the
    /// draw, or swept): let in without holding stock should their turn come before they are
    /// back (advance.lua); forgotten when they come back (resume.lua) or die (bury.lua), and
    /// once placed behind the frontier.
    pub fn away(&self) -> String {
        format!("{}:away", self.base)
    }
    /// Sorted set: tickets let in while their person was away, scored by their batch's token
    /// expiry (Unix ms): their token counts as unspent only once its person comes back.
    pub fn away_admitted(&self) -> String {
        format!("{}:away_admitted", self.base)
    }
    /// Hash: ticket -> session id, for tickets resumed on a new session (the newest holder).
    pub fn holders(&self) -> String {
        format!("{}:holders", self.base)
    }
    /// Hash: ticket -> buyer mark (`protocol::resume`), for tickets taken before their buyer
    /// signed in and made theirs by a resume: the buyerless token they were taken with is then
    /// refused to anyone else. Tickets taken by a signed-in buyer need no entry (their tokens
    /// carry the mark).
    pub fn owners(&self) -> String {
        format!("{}:owners", self.base)
    }
    /// Sorted set: places in line, beyond the frontier, whose tickets are dead (the controller
    /// skips them).
    pub fn dead(&self) -> String {
        format!("{}:dead", self.base)
    }
    /// Stream: every place declared dead, in order; gateways follow it to count live tickets.
    pub fn deaths(&self) -> String {
        format!("{}:deaths", self.base)
    }
    /// Stream: admission batches (`to` place, `n` live tickets admitted, token `exp`), trimmed to
    /// the token lifetime; gateways follow it for token expiry and the measured admission rate.
    pub fn admits(&self) -> String {
        format!("{}:admits", self.base)
    }
    /// Sorted set: the token expiry (Unix ms) of each admission batch whose unspent tokens still
    /// hold stock, scored by when they stop (the expiry, or sooner: the sale's `stock_hold_ms`).
    pub fn batches(&self) -> String {
        format!("{}:batches", self.base)
    }
    /// Hash: token expiry -> admitted tokens of that batch not yet spent.
    pub fn tokens(&self) -> String {
        format!("{}:tokens", self.base)
    }
    /// Set: the gateway instances that have served this sale (for the sweep of dead ones).
    pub fn gateways(&self) -> String {
        format!("{}:gateways", self.base)
    }
    /// String with a TTL: present while gateway `id` is alive (renewed every tick).
    pub fn gateway_alive(&self, id: &str) -> String {
        format!("{}:gw:{}", self.base, id)
    }
    /// Set: tickets with a session open on gateway `id`.
    pub fn gateway_sessions(&self, id: &str) -> String {
        format!("{}:gw:{}:sessions", self.base, id)
    }
    /// List with a TTL: the sessions of gateway `id` (`<id>/<n>`) whose ticket a newer session
    /// took back, for it to close at its next tick.
    pub fn gateway_taken_over(&self, id: &str) -> String {
        format!("{}:gw:{}:taken", self.base, id)
    }
}

/// Keys of one inventory pool, all in one slot.
#[derive(Clone, Debug)]
pub struct PoolKeys {
    base: String,
}

impl PoolKeys {
    /// Hash: `capacity`, `hold_ttl_ms`, `opens_at` as armed. Its absence means "not armed".
    pub fn config(&self) -> String {
        format!("{}:cfg", self.base)
    }
    /// Integer: seats available now.
    pub fn available(&self) -> String {
        format!("{}:avail", self.base)
    }
    /// Integer: seats in live holds (reserved, not yet paid).
    pub fn held(&self) -> String {
        format!("{}:held", self.base)
    }
    /// Integer: seats sold (paid).
    pub fn sold(&self) -> String {
        format!("{}:sold", self.base)
    }
    /// Hash: reservation id -> seats, for every live hold.
    pub fn holds(&self) -> String {
        format!("{}:holds", self.base)
    }
    /// Sorted set: reservation id scored by hold expiry (Unix ms), for the reaper.
    pub fn expiries(&self) -> String {
        format!("{}:expiries", self.base)
    }
    /// Hash: one reservation (its token, key, secret, seats, state, payment).
    pub fn reservation(&self, reservation_id: &str) -> String {
        format!("{}:rsv:{}", self.base, reservation_id)
    }
    /// String: the reservation an admission token made in this pool (the idempotency pointer).
    pub fn token_reservation(&self, jti: &str) -> String {
        format!("{}:tok:{}", self.base, jti)
    }
    /// Stream: events of this pool not yet acknowledged by Kafka, written by the same script
    /// as the change they describe.
    pub fn outbox(&self) -> String {
        format!("{}:outbox", self.base)
    }
    /// String with a TTL: the booking instance currently draining this pool's outbox.
    pub fn relay(&self) -> String {
        format!("{}:relay", self.base)
    }
    /// Integer: the relay lease's epoch (lease.lua counts hand-overs there).
    pub fn relay_epoch(&self) -> String {
        format!("{}:relay_epoch", self.base)
    }
    /// String with a TTL: the outcome of one payment-provider webhook event, for idempotency.
    pub fn webhook(&self, event_id: &str) -> String {
        format!("{}:whk:{}", self.base, event_id)
    }
}

/// Whether `prefix` is usable as a key prefix (no braces, at most 32 bytes).
pub fn check_prefix(prefix: &str) -> bool {
    prefix.len() <= 32 && !prefix.contains(['{', '}'])
}

/// The Kafka message key of a pool: one pool's events share a partition and so stay ordered.
pub fn pool_partition_key(sale: &str, pool: &str) -> String {
    format!("{sale}/{pool}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The part of a key Redis Cluster hashes: the first `{...}` with something inside.
    fn hash_tag(key: &str) -> &str {
        let open = key.find('{').expect("key has a hash tag");
        let close = key[open..].find('}').expect("hash tag is closed") + open;
        &key[open + 1..close]
    }

    #[test]
    fn sale_keys_share_one_slot_and_pool_keys_another() {
        let keys = Keys::new("t:");
        let sale = keys.sale("s1");
        let tags: Vec<_> = [
            sale.meta(),
            sale.seq(),
            sale.frontier(),
            sale.token("j"),
            sale.epoch(),
            sale.prequeue(),
            sale.prequeue_batches(),
            sale.gone(),
            sale.away(),
            sale.away_admitted(),
            sale.holders(),
            sale.owners(),
            sale.dead(),
            sale.deaths(),
            sale.admits(),
            sale.batches(),
            sale.tokens(),
            sale.gateways(),
            sale.gateway_alive("g"),
            sale.gateway_sessions("g"),
            sale.gateway_taken_over("g"),
        ]
        .iter()
        .map(|k| hash_tag(k).to_owned())
        .collect();
        assert!(tags.iter().all(|t| t == "s:s1"), "{tags:?}");

        let pool = keys.pool("s1", "p1");
        for key in [
            pool.config(),
            pool.available(),
            pool.held(),
            pool.sold(),
            pool.holds(),
            pool.expiries(),
            pool.reservation("r"),
            pool.token_reservation("j"),
            pool.outbox(),
            pool.relay(),
            pool.relay_epoch(),
            pool.webhook("e"),
        ] {
            assert_eq!(hash_tag(&key), "p:s1/p1");
        }
    }

    #[test]
    #[should_panic(expected = "brace")]
    fn a_prefix_with_a_brace_is_refused() {
        let _ = Keys::new("bad{x}:");
    }
}
