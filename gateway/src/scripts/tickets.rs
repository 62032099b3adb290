//! A place in line: taking a new ticket (`lua/join.lua`), taking an earlier one back with a
//! resume token (`lua/resume.lua`, in [`super::takeback`]), and recording that its session
//! ended (`lua/leave.lua`, in [`super::departures`]).
//! Each script is called one way, here, and its reply read into a type in one impl beside the type.
//!
//! Joins and departures are what the rush is made of, and both land on the sale's slot, so each
//! is sent in batches ([`Lines`], `platform::batch`): the joins this gateway receives while its
//! previous join batch is in flight go together, as one `INCRBY n`, one `SADD`, one `RPUSH` of
//! their draw nonces and one committed link of the pre-queue's chain (protocol.md 1.6). A lone
//! join is sent at once; a join waits at most one batch's round trip before its own is sent.

use std::sync::Arc;
use std::time::Duration;

use floodgate_platform::batch::{Batcher, Flush};
use floodgate_platform::keys::SaleKeys;
use floodgate_platform::redis_conn::RedisConn;
use floodgate_protocol::api::code;
use floodgate_protocol::{lottery, UnixMillis};
use futures::future::{BoxFuture, FutureExt};

use floodgate_platform::script::{FromStrings, LuaScript as _};

use super::departures::{Departure, Leaves};
use super::{Line, SaleScope};
use crate::error::ApiError;

/// The most joins (or departures) one script run takes: far under Lua's `unpack` limit (about
/// 8,000 values), a pre-queue batch stays within one page of the published record (10,000
/// nonces), and one run keeps the sale's primary busy for well under a millisecond.
pub const MAX_BATCH: usize = 500;

/// A ticket this gateway now holds a session for.
#[derive(Debug, PartialEq, Eq)]
pub struct Taken {
    pub ticket: u64,
    pub opens_at_ms: UnixMillis,
    /// The draw nonce of a ticket taken before the opening (new tickets only).
    pub draw_nonce: Option<String>,
    /// The lottery commitment as the ticket was taken.
    pub commitment: String,
    /// The frontier when a ticket was taken back: its positions are computed from at least
    /// this (0 for a new ticket).
    pub frontier_floor: u64,
}

/// What `join.lua` answered for a whole batch: its tickets are `first`, `first + 1`, ... in the
/// order its joins arrived.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct JoinedBatch {
    first: u64,
    opens_at_ms: UnixMillis,
    in_prequeue: bool,
    commitment: String,
}

impl JoinedBatch {
    /// The ticket of the join at `position` of the batch, whose nonce was `nonce`.
    fn taken(&self, position: usize, nonce: String) -> Taken {
        Taken {
            ticket: self.first + position as u64,
            opens_at_ms: self.opens_at_ms,
            draw_nonce: self.in_prequeue.then_some(nonce),
            commitment: self.commitment.clone(),
            frontier_floor: 0,
        }
    }
}

/// The joins and departures of one sale on this gateway, each sent in batches.
pub struct Lines {
    joins: Batcher<Joins>,
    pub(super) leaves: Batcher<Leaves>,
}

impl Lines {
    pub fn new(redis: RedisConn, keys: SaleKeys, instance_id: Arc<str>, lease: Duration) -> Self {
        let line = Arc::new(Line {
            redis,
            keys,
            instance_id,
            lease,
        });
        Self {
            joins: Batcher::new(Joins(line.clone()), MAX_BATCH),
            leaves: Batcher::new(Leaves(line), MAX_BATCH),
        }
    }
}

struct Joins(Arc<Line>);

impl Flush for Joins {
    type Key = ();
    /// A join's draw nonce.
    type Item = String;
    type Answer = Result<JoinedBatch, ApiError>;

    fn flush(&self, _: &(), nonces: Vec<String>) -> BoxFuture<'static, Self::Answer> {
        let line = self.0.clone();
        async move { line.join(&nonces).await }.boxed()
    }

    /// A join that stopped waiting (its client hung up during the upgrade) has a ticket nobody
    /// holds: it leaves at once, with no grace, so the room skips it.
    fn abandoned(
        &self,
        _: &(),
        batch: &Self::Answer,
        positions: Vec<usize>,
    ) -> BoxFuture<'static, ()> {
        let Ok(batch) = batch else {
            return async {}.boxed();
        };
        let line = self.0.clone();
        let departures: Vec<Departure> = positions
            .iter()
            .map(|&p| Departure {
                ticket: batch.first + p as u64,
                session_id: String::new(),
                grace_ms: 0,
                place: 0,
            })
            .collect();
        metrics::counter!("floodgate_tickets_abandoned_total").increment(departures.len() as u64);
        async move {
            if let Err(e) = line.leave(&departures).await {
                tracing::warn!(error = %e, "could not give back the tickets of abandoned joins");
            }
        }
        .boxed()
    }
}

floodgate_platform::lua_script! {
    /// `lua/join.lua`: the next tickets of a sale, one per join of a batch, in the order of
    /// their draw nonces.
    pub(super) struct Join<'a> {
        file: "join.lua",
        helpers: Sale,
        reply: JoinReply,
        keys {
            meta: "sale meta hash",
            seq: "ticket sequence",
            prequeue: "pre-queue nonce list",
            sessions: "this gateway's session set",
            alive: "this gateway's liveness key",
            gateways: "the sale's gateway registry (set)",
            batches: "the pre-queue's batches (sorted set)",
        }
        args {
            root: String = "the batch's Merkle root",
            instance: &'a str = "this gateway's instance id",
            lease_ms: u64 = "the liveness key's lifetime (ms)",
        }
        rest { nonces: &'a [String] = "the draw nonces of the batch's joins" }
    }
}

impl Line {
    async fn join(&self, nonces: &[String]) -> Result<JoinedBatch, ApiError> {
        let keys = &self.keys;
        let leaves: Vec<_> = nonces.iter().map(|n| lottery::leaf_hash(n)).collect();
        let joined = Join {
            meta: keys.meta(),
            seq: keys.seq(),
            prequeue: keys.prequeue(),
            sessions: keys.gateway_sessions(&self.instance_id),
            alive: keys.gateway_alive(&self.instance_id),
            gateways: keys.gateways(),
            batches: keys.prequeue_batches(),
            root: hex::encode(lottery::merkle_root(&leaves)),
            instance: &self.instance_id,
            lease_ms: self.lease.as_millis() as u64,
            nonces,
        }
        .run(&mut self.redis.clone())
        .await?;
        let JoinReply::Joined(batch) = joined else {
            return Err(ApiError::unknown_sale());
        };
        metrics::counter!("floodgate_join_batches_total").increment(1);
        metrics::counter!("floodgate_tickets_issued_total").increment(nonces.len() as u64);
        Ok(batch)
    }
}

/// Takes the next ticket of `scope`'s sale for a client whose draw nonce is `nonce`, registered
/// to this gateway, in the next batch of joins.
pub async fn join(scope: &SaleScope, nonce: &str) -> Result<Taken, ApiError> {
    let _waiting = JoinInFlight::start();
    let (position, batch) = scope
        .lines
        .joins
        .submit((), nonce.to_owned())
        .await
        .map_err(|unanswered| {
            // Its batch's task panicked, or the gateway is stopping: nothing the client did.
            tracing::error!(error = %unanswered, "a join's batch was never answered");
            ApiError::new(
                code::REDIS_UNAVAILABLE,
                "the waiting room could not take this join; retry in a second".into(),
            )
        })?;
    Ok(batch?.taken(position, nonce.to_owned()))
}

/// Counts a join from its arrival at its batch until the batch is answered or the join gives up
/// (`floodgate_joins_in_flight`): joins piling up here mean the sale's primary is slow.
struct JoinInFlight;

impl JoinInFlight {
    fn start() -> Self {
        metrics::gauge!("floodgate_joins_in_flight").increment(1.0);
        Self
    }
}

impl Drop for JoinInFlight {
    fn drop(&mut self) {
        metrics::gauge!("floodgate_joins_in_flight").decrement(1.0);
    }
}

/// What `join.lua` answered.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum JoinReply {
    Joined(JoinedBatch),
    /// The sale is not armed: no ticket number was taken.
    UnknownSale,
}

/// `join.lua`'s reply: `{first ticket, opens_at_ms, in pre-queue, sold_out, commitment}`, or
/// `{}` for a sale that is not armed.
impl FromStrings for JoinReply {
    fn from_strings(reply: &[String]) -> Option<Self> {
        match reply {
            [first, opens, in_prequeue, _sold_out, commitment] => Some(Self::Joined(JoinedBatch {
                first: first.parse().ok()?,
                opens_at_ms: opens.parse().ok()?,
                in_prequeue: in_prequeue == "1",
                commitment: commitment.clone(),
            })),
            [] => Some(Self::UnknownSale),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use floodgate_platform::script::FromReply;

    use super::*;

    fn parse_join(reply: &[&str]) -> Result<JoinReply, String> {
        let reply = reply
            .iter()
            .map(|s| redis::Value::BulkString(s.as_bytes().to_vec()))
            .collect();
        JoinReply::from_reply(redis::Value::Array(reply))
    }

    fn joined(reply: &[&str]) -> JoinedBatch {
        match parse_join(reply) {
            Ok(JoinReply::Joined(batch)) => batch,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn join_replies_parse_into_tickets_or_an_unknown_sale() {
        let batch = joined(&["7", "1000", "1", "0", "c0ffee"]);
        // The third join of the batch has the batch's third ticket.
        assert_eq!(
            batch.taken(2, "ab12".into()),
            Taken {
                ticket: 9,
                opens_at_ms: 1000,
                draw_nonce: Some("ab12".into()),
                commitment: "c0ffee".into(),
                frontier_floor: 0,
            }
        );
        let late = joined(&["8", "1000", "0", "0", "c0ffee"]);
        assert_eq!(
            late.taken(0, "ab12".into()).draw_nonce,
            None,
            "after the opening no nonce is drawn"
        );
        assert_eq!(parse_join(&[]), Ok(JoinReply::UnknownSale));
        assert!(
            parse_join(&["x", "1000", "0", "0", ""]).is_err(),
            "an odd reply"
        );
        assert!(parse_join(&["7"]).is_err(), "an odd reply");
    }
}
