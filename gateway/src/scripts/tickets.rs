//! A place in line: taking a new ticket (`lua/join.lua`), taking an earlier one back with a
//! resume token (`lua/resume.lua`), and recording that its session ended (`lua/leave.lua`).
//! Each script is called one way, here, and its reply read into a type in one function.

use floodgate_contract::api::code;
use floodgate_contract::{lottery, UnixMillis};

use crate::error::ApiError;
use crate::session::Context;

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

/// Takes the next ticket of `ctx`'s sale for a client whose draw nonce is `nonce`, registered
/// to this gateway: a batch of one join (`lua/join.lua` takes any number, one link of the
/// pre-queue's chain for all of them).
pub async fn join(ctx: &Context, nonce: &str) -> Result<Taken, ApiError> {
    let keys = &ctx.keys;
    let root = hex::encode(lottery::merkle_root(&[lottery::leaf_hash(nonce)]));
    let reply: Vec<String> = ctx
        .scripts
        .join
        .key(keys.meta())
        .key(keys.seq())
        .key(keys.prequeue())
        .key(keys.gateway_sessions(&ctx.instance_id))
        .key(keys.gateway_alive(&ctx.instance_id))
        .key(keys.gateways())
        .key(keys.prequeue_batches())
        .arg(root)
        .arg(&*ctx.instance_id)
        .arg(ctx.lease.as_millis() as u64)
        .arg(nonce)
        .invoke_async(&mut ctx.redis.clone())
        .await?;
    let taken = parse_join(&reply, nonce)?;
    metrics::counter!("floodgate_tickets_issued_total").increment(1);
    Ok(taken)
}

/// `join.lua`'s reply for a batch of one with `nonce`: `{ticket, opens_at_ms, in pre-queue,
/// sold_out, commitment}`, or `{}` for a sale that is not armed.
fn parse_join(reply: &[String], nonce: &str) -> Result<Taken, ApiError> {
    let [ticket, opens, in_prequeue, _sold_out, commitment] = reply else {
        return Err(ApiError::unknown_sale());
    };
    Ok(Taken {
        ticket: number(ticket)?,
        opens_at_ms: number(opens)?,
        draw_nonce: (in_prequeue == "1").then(|| nonce.to_owned()),
        commitment: commitment.clone(),
        frontier_floor: 0,
    })
}

/// Takes `ticket` back on session `session_id` of this gateway.
pub async fn resume(ctx: &Context, ticket: u64, session_id: &str) -> Result<Taken, ApiError> {
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
        .arg(ticket)
        .arg(session_id)
        .arg(&*ctx.instance_id)
        .arg(ctx.lease.as_millis() as u64)
        .invoke_async(&mut ctx.redis.clone())
        .await?;
    let taken = parse_resume(ticket, &reply)?;
    metrics::counter!("floodgate_tickets_resumed_total").increment(1);
    Ok(taken)
}

/// `resume.lua`'s reply: `{"resumed", opens_at_ms, sold_out, commitment, frontier}`, or
/// `{"expired", ...}` / `{"unknown", ...}`.
fn parse_resume(ticket: u64, reply: &[String]) -> Result<Taken, ApiError> {
    match reply {
        [status, opens, _sold_out, commitment, frontier] if status == "resumed" => Ok(Taken {
            ticket,
            opens_at_ms: number(opens)?,
            draw_nonce: None,
            commitment: commitment.clone(),
            frontier_floor: number(frontier)?,
        }),
        [status, ..] if status == "expired" => Err(ApiError::Gone(
            code::TICKET_EXPIRED,
            "this ticket was given up after its grace period; join again for a new one".into(),
        )),
        _ => Err(ApiError::NotFound(
            code::UNKNOWN_TICKET,
            "this sale has no such ticket; join again for a new one".into(),
        )),
    }
}

/// Records that the session `session_id` holding `ticket` ended. With `grace_ms >= 0` the ticket
/// keeps its place that long (0: it is skipped as soon as the controller sees it); with -1 its
/// business is done (admitted, or the sale is over for it).
pub async fn leave(ctx: &Context, ticket: u64, session_id: &str, grace_ms: i64) {
    let keys = &ctx.keys;
    let left: redis::RedisResult<i64> = ctx
        .scripts
        .leave
        .key(keys.gone())
        .key(keys.holders())
        .key(keys.gateway_sessions(&ctx.instance_id))
        .arg(ticket)
        .arg(session_id)
        .arg(grace_ms)
        .invoke_async(&mut ctx.redis.clone())
        .await;
    if let Err(e) = left {
        // The ticket stays registered to this gateway; it is handled if this gateway dies.
        tracing::warn!(error = %e, ticket, "could not record the departure");
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
        let taken = parse_join(&strings(&["7", "1000", "1", "0", "c0ffee"]), "ab12").unwrap();
        assert_eq!(
            taken,
            Taken {
                ticket: 7,
                opens_at_ms: 1000,
                draw_nonce: Some("ab12".into()),
                commitment: "c0ffee".into(),
                frontier_floor: 0,
            }
        );
        let late = parse_join(&strings(&["8", "1000", "0", "0", "c0ffee"]), "ab12").unwrap();
        assert_eq!(late.draw_nonce, None, "after the opening no nonce is drawn");
        assert!(matches!(
            parse_join(&[], "ab12"),
            Err(ApiError::NotFound(code::UNKNOWN_SALE, _))
        ));
        assert!(matches!(
            parse_join(&strings(&["x", "1000", "0", "0", ""]), "ab12"),
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
            parse_resume(3, &strings(&["unknown", "0", "0", ""])),
            Err(ApiError::NotFound(code::UNKNOWN_TICKET, _))
        ));
    }
}
