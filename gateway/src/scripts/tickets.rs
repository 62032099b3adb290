//! A place in line: taking a new ticket (`lua/join.lua`), taking an earlier one back with a
//! resume token (`lua/resume.lua`, in [`super::takeback`]), and recording that its session
//! ended (`lua/leave.lua`).
//! Each script is called one way, here, and its reply read into a type in one function.
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
use floodgate_protocol::{lottery, UnixMillis};
use futures::future::{BoxFuture, FutureExt};

use super::{SaleScope, Scripts};
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
struct JoinedBatch {
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

/// What the batches of one sale on this gateway send with: the sale's keys and this gateway's.
struct Line {
    redis: RedisConn,
    scripts: Arc<Scripts>,
    keys: SaleKeys,
    instance_id: Arc<str>,
    lease: Duration,
}

/// The joins and departures of one sale on this gateway, each sent in batches.
pub struct Lines {
    joins: Batcher<Joins>,
    leaves: Batcher<Leaves>,
}

impl Lines {
    pub fn new(
        redis: RedisConn,
        scripts: Arc<Scripts>,
        keys: SaleKeys,
        instance_id: Arc<str>,
        lease: Duration,
    ) -> Self {
        let line = Arc::new(Line {
            redis,
            scripts,
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

impl Line {
    async fn join(&self, nonces: &[String]) -> Result<JoinedBatch, ApiError> {
        let keys = &self.keys;
        let leaves: Vec<_> = nonces.iter().map(|n| lottery::leaf_hash(n)).collect();
        let root = hex::encode(lottery::merkle_root(&leaves));
        let reply: Vec<String> = self
            .scripts
            .join
            .key(keys.meta())
            .key(keys.seq())
            .key(keys.prequeue())
            .key(keys.gateway_sessions(&self.instance_id))
            .key(keys.gateway_alive(&self.instance_id))
            .key(keys.gateways())
            .key(keys.prequeue_batches())
            .arg(root)
            .arg(&*self.instance_id)
            .arg(self.lease.as_millis() as u64)
            .arg(nonces)
            .invoke_async(&mut self.redis.clone())
            .await?;
        let batch = parse_join(&reply)?;
        metrics::counter!("floodgate_join_batches_total").increment(1);
        metrics::counter!("floodgate_tickets_issued_total").increment(nonces.len() as u64);
        Ok(batch)
    }

    async fn leave(&self, departures: &[Departure]) -> redis::RedisResult<i64> {
        let keys = &self.keys;
        let mut call = self.scripts.leave.prepare_invoke();
        call.key(keys.gone())
            .key(keys.holders())
            .key(keys.gateway_sessions(&self.instance_id));
        for d in departures {
            call.arg(d.ticket).arg(&d.session_id).arg(d.grace_ms);
        }
        call.invoke_async(&mut self.redis.clone()).await
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
        .map_err(|e| super::odd_reply("join.lua", &e.to_string()))?;
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

/// `join.lua`'s reply: `{first ticket, opens_at_ms, in pre-queue, sold_out, commitment}`, or
/// `{}` for a sale that is not armed.
fn parse_join(reply: &[String]) -> Result<JoinedBatch, ApiError> {
    let [first, opens, in_prequeue, _sold_out, commitment] = reply else {
        return Err(ApiError::unknown_sale());
    };
    Ok(JoinedBatch {
        first: number(first)?,
        opens_at_ms: number(opens)?,
        in_prequeue: in_prequeue == "1",
        commitment: commitment.clone(),
    })
}

/// A session that ended, as `leave.lua` takes it.
struct Departure {
    ticket: u64,
    session_id: String,
    grace_ms: i64,
}

struct Leaves(Arc<Line>);

impl Flush for Leaves {
    type Key = ();
    type Item = Departure;
    /// Redis' error, as text (the departures are only logged when they fail).
    type Answer = Result<(), String>;

    fn flush(&self, _: &(), departures: Vec<Departure>) -> BoxFuture<'static, Self::Answer> {
        let line = self.0.clone();
        async move {
            line.leave(&departures)
                .await
                .map(drop)
                .map_err(|e| e.to_string())
        }
        .boxed()
    }
}

/// Records that the session `session_id` holding `ticket` ended. With `grace_ms >= 0` the ticket
/// keeps its place that long (0: it is skipped as soon as the controller sees it); with -1 its
/// business is done (admitted, or the sale is over for it).
pub async fn leave(scope: &SaleScope, ticket: u64, session_id: &str, grace_ms: i64) {
    let departure = Departure {
        ticket,
        session_id: session_id.to_owned(),
        grace_ms,
    };
    let left = match scope.lines.leaves.submit((), departure).await {
        Ok((_, left)) => left,
        Err(e) => Err(e.to_string()),
    };
    if let Err(error) = left {
        // The ticket stays registered to this gateway; it is handled if this gateway dies.
        tracing::warn!(%error, ticket, "could not record the departure");
    }
}

pub(super) fn number<T: std::str::FromStr>(text: &str) -> Result<T, ApiError> {
    text.parse()
        .map_err(|_| super::odd_reply("a ticket script", text))
}

#[cfg(test)]
mod tests {
    use floodgate_protocol::api::code;

    use super::super::strings;
    use super::*;

    #[test]
    fn join_replies_parse_into_tickets_or_an_unknown_sale() {
        let batch = parse_join(&strings(&["7", "1000", "1", "0", "c0ffee"])).unwrap();
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
        let late = parse_join(&strings(&["8", "1000", "0", "0", "c0ffee"])).unwrap();
        assert_eq!(
            late.taken(0, "ab12".into()).draw_nonce,
            None,
            "after the opening no nonce is drawn"
        );
        assert!(matches!(
            parse_join(&[]),
            Err(ApiError::NotFound(code::UNKNOWN_SALE, _))
        ));
        assert!(matches!(
            parse_join(&strings(&["x", "1000", "0", "0", ""])),
            Err(ApiError::Unavailable(..))
        ));
    }
}
