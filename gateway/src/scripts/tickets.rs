//! A place in line: taking a new ticket (`lua/join.lua`), taking an earlier one back with a
//! resume token (`lua/resume.lua`), and recording that its session ended (`lua/leave.lua`).
//! Each script is called one way, here, and its reply read into a type in one function.
//!
//! Joins and departures are what the rush is made of, and both land on the sale's slot, so each
//! is sent in batches ([`Lines`], `contract::batch`): the joins this gateway receives while its
//! previous join batch is in flight go together, as one `INCRBY n`, one `SADD`, one `RPUSH` of
//! their draw nonces and one committed link of the pre-queue's chain (protocol.md 1.6). A lone
//! join is sent at once; a join waits at most one batch's round trip before its own is sent.

use std::sync::Arc;
use std::time::Duration;

use floodgate_contract::api::code;
use floodgate_contract::batch::{Batcher, Flush};
use floodgate_contract::keys::SaleKeys;
use floodgate_contract::redis_conn::RedisConn;
use floodgate_contract::resume::BuyerMark;
use floodgate_contract::{lottery, UnixMillis};
use futures::future::{BoxFuture, FutureExt};

use super::Scripts;
use crate::error::ApiError;
use crate::session::Context;

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

/// Takes the next ticket of `ctx`'s sale for a client whose draw nonce is `nonce`, registered
/// to this gateway, in the next batch of joins.
pub async fn join(ctx: &Context, nonce: &str) -> Result<Taken, ApiError> {
    let _waiting = JoinInFlight::start();
    let (position, batch) = ctx
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

/// Who takes a ticket back.
#[derive(Clone, Copy)]
pub struct Taker<'a> {
    /// The mark of the buyer taking it (`None`: someone not signed in).
    pub buyer: Option<&'a BuyerMark>,
    /// The ticket was taken before its buyer signed in and becomes theirs now, unless another
    /// buyer made it theirs first.
    pub adopt: bool,
}

/// Takes `ticket` back on session `session_id` of this gateway, for `taker`.
pub async fn resume(
    ctx: &Context,
    ticket: u64,
    session_id: &str,
    taker: Taker<'_>,
) -> Result<Taken, ApiError> {
    let keys = &ctx.keys;
    let reply: Vec<String> = ctx
        .scripts
        .resume
        .key(keys.meta())
        .key(keys.seq())
        .key(keys.gone())
        .key(keys.holders())
        .key(keys.gateway_sessions(&ctx.instance_id))
        .key(keys.frontier())
        .key(keys.gateway_alive(&ctx.instance_id))
        .key(keys.gateways())
        .key(keys.owners())
        .arg(ticket)
        .arg(session_id)
        .arg(&*ctx.instance_id)
        .arg(ctx.lease.as_millis() as u64)
        .arg(taker.buyer.map_or("", BuyerMark::as_str))
        .arg(if taker.adopt { "adopt" } else { "" })
        .invoke_async(&mut ctx.redis.clone())
        .await?;
    let taken = parse_resume(ticket, &reply)?;
    metrics::counter!("floodgate_tickets_resumed_total").increment(1);
    Ok(taken)
}

/// `resume.lua`'s reply: `{"resumed", opens_at_ms, sold_out, commitment, frontier}`, or
/// `{"expired", ...}` / `{"foreign", ...}` / `{"unknown", ...}`.
fn parse_resume(ticket: u64, reply: &[String]) -> Result<Taken, ApiError> {
    match reply {
        [status, opens, _sold_out, commitment, frontier] if status == "resumed" => Ok(Taken {
            ticket,
            opens_at_ms: number(opens)?,
            draw_nonce: None,
            commitment: commitment.clone(),
            frontier_floor: number(frontier)?,
        }),
        [status, ..] if status == "expired" => Err(expired()),
        [status, ..] if status == "foreign" => Err(other_buyers()),
        _ => Err(unknown_ticket()),
    }
}

/// Whether a ticket still stands, as `standing.lua` reads it.
#[derive(Debug, PartialEq, Eq)]
pub struct Standing {
    /// When a departed holder's grace runs out (Unix ms); `None` while a session holds it.
    pub kept_until_ms: Option<UnixMillis>,
}

/// Whether `ticket` is alive for `taker` (read only: a poll keeps no place alive).
pub async fn standing(ctx: &Context, ticket: u64, taker: Taker<'_>) -> Result<Standing, ApiError> {
    let keys = &ctx.keys;
    let reply: Vec<String> = ctx
        .scripts
        .standing
        .key(keys.meta())
        .key(keys.seq())
        .key(keys.gone())
        .key(keys.owners())
        .arg(ticket)
        .arg(taker.buyer.map_or("", BuyerMark::as_str))
        .invoke_async(&mut ctx.redis.clone())
        .await?;
    parse_standing(&reply)
}

fn parse_standing(reply: &[String]) -> Result<Standing, ApiError> {
    match reply {
        [status, until] if status == "alive" => Ok(Standing {
            kept_until_ms: if until.is_empty() {
                None
            } else {
                // A sorted set's score comes back as a float's text.
                Some(until.parse::<f64>().map_err(|_| odd_standing(reply))? as UnixMillis)
            },
        }),
        [status] if status == "expired" => Err(expired()),
        [status] if status == "foreign" => Err(other_buyers()),
        [status] if status == "unknown" => Err(unknown_ticket()),
        _ => Err(odd_standing(reply)),
    }
}

fn odd_standing(reply: &[String]) -> ApiError {
    super::odd_reply("standing.lua", &reply.join(" "))
}

/// Whether a buyer made `ticket` theirs by taking it with its buyerless token (the sale's
/// `owners` hash): a session without that buyer's identity then gets no pass for it.
pub async fn owned(ctx: &Context, ticket: u64) -> Result<bool, ApiError> {
    let owned: bool = redis::cmd("HEXISTS")
        .arg(ctx.keys.owners())
        .arg(ticket)
        .query_async(&mut ctx.redis.clone())
        .await?;
    Ok(owned)
}

/// The refusal of a resume token whose ticket is another buyer's.
pub fn other_buyers() -> ApiError {
    ApiError::Forbidden(
        code::RESUME_OTHER_BUYER,
        "this place is another buyer's; join without the resume token for a place of your own"
            .into(),
    )
}

/// The refusal of a join that came back for a ticket that is dead, with no door passed for a
/// new place.
pub fn expired() -> ApiError {
    ApiError::Gone(
        code::TICKET_EXPIRED,
        "this ticket was given up after its grace period; join again for a new one".into(),
    )
}

/// The refusal of a resume token whose ticket this sale never handed out (or whose state was
/// lost).
fn unknown_ticket() -> ApiError {
    ApiError::NotFound(
        code::UNKNOWN_TICKET,
        "this sale has no such ticket; join again for a new one".into(),
    )
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
pub async fn leave(ctx: &Context, ticket: u64, session_id: &str, grace_ms: i64) {
    let departure = Departure {
        ticket,
        session_id: session_id.to_owned(),
        grace_ms,
    };
    let left = match ctx.lines.leaves.submit((), departure).await {
        Ok((_, left)) => left,
        Err(e) => Err(e.to_string()),
    };
    if let Err(error) = left {
        // The ticket stays registered to this gateway; it is handled if this gateway dies.
        tracing::warn!(%error, ticket, "could not record the departure");
    }
}

fn number<T: std::str::FromStr>(text: &str) -> Result<T, ApiError> {
    text.parse()
        .map_err(|_| super::odd_reply("a ticket script", text))
}

#[cfg(test)]
mod tests {
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

    #[test]
    fn standing_replies_parse_into_a_grace_or_refusals() {
        assert_eq!(
            parse_standing(&strings(&["alive", ""])).unwrap(),
            Standing {
                kept_until_ms: None
            }
        );
        assert_eq!(
            parse_standing(&strings(&["alive", "1700000000123"]))
                .unwrap()
                .kept_until_ms,
            Some(1_700_000_000_123)
        );
        for (reply, status) in [("expired", 410), ("foreign", 403), ("unknown", 404)] {
            let refused = parse_standing(&strings(&[reply])).unwrap_err();
            let answered = axum::response::IntoResponse::into_response(refused);
            assert_eq!(answered.status().as_u16(), status, "{reply}");
        }
        assert!(matches!(
            parse_standing(&strings(&["alive", "soon"])),
            Err(ApiError::Unavailable(..))
        ));
    }

    #[test]
    fn resume_replies_parse_into_tickets_or_refusals() {
        let taken = parse_resume(3, &strings(&["resumed", "1000", "0", "c0", "2"])).unwrap();
        assert_eq!((taken.ticket, taken.frontier_floor), (3, 2));
        assert!(matches!(
            parse_resume(3, &strings(&["expired", "1000", "0", ""])),
            Err(ApiError::Gone(code::TICKET_EXPIRED, _))
        ));
        assert!(matches!(
            parse_resume(3, &strings(&["foreign", "1000", "0", ""])),
            Err(ApiError::Forbidden(code::RESUME_OTHER_BUYER, _))
        ));
        assert!(matches!(
            parse_resume(3, &strings(&["unknown", "0", "0", ""])),
            Err(ApiError::NotFound(code::UNKNOWN_TICKET, _))
        ));
    }
}
