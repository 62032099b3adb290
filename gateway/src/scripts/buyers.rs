//! One place in line per buyer per sale (`lua/buyer_place.lua`): a buyer who joins again (another
//! tab, device or address) takes their ticket back instead of a new one, for as long as it can
//! still be admitted; once its turn has come and gone, or it was given up, the buyer's next join
//! takes a new place at the back.

use std::time::Duration;

use floodgate_contract::api::code;
use floodgate_contract::identity::BuyerId;

use super::tickets::{self, Taken};
use crate::error::ApiError;
use crate::session::Context;

/// How long a buyer's record lives after it last changed: longer than any sale's rush, so a
/// buyer keeps one place (and their seats count) for the whole sale.
pub const RECORD_LIFETIME: Duration = Duration::from_secs(7 * 24 * 3600);
/// How long one join may hold a buyer's record while it takes a ticket (the other joins of the
/// same buyer wait for it); if its gateway dies half-way, the mark lapses after this.
const JOIN_HOLD: Duration = Duration::from_secs(5);
/// How long a join waits for another join of the same buyer to finish, asking every
/// [`WAIT_STEP`].
const WAIT_FOR_OTHER: Duration = Duration::from_secs(6);
const WAIT_STEP: Duration = Duration::from_millis(50);
/// Rounds of [`take`] before it gives up (waiting takes at most `WAIT_FOR_OTHER / WAIT_STEP`).
const MAX_ROUNDS: usize = 200;

/// What `buyer_place.lua` answered.
#[derive(Debug, PartialEq, Eq)]
enum Place {
    /// The buyer's ticket.
    Ticket(u64),
    /// None yet: this join takes one.
    Take,
    /// Another join of this buyer is taking one.
    Wait,
    /// This join's ticket is the buyer's now.
    Bound,
}

/// The buyer's ticket, taken back (`resumed` is true), or a new one made theirs.
pub async fn take(
    ctx: &Context,
    buyer: &BuyerId,
    nonce: &str,
    session_id: &str,
) -> Result<(Taken, bool), ApiError> {
    let started = tokio::time::Instant::now();
    let mut dead = None;
    // Each round either ends the join or forgets a dead ticket (or waits, bounded by time):
    // a few rounds always suffice.
    for _ in 0..MAX_ROUNDS {
        match place(ctx, buyer, "find", session_id, dead.unwrap_or(0)).await? {
            Place::Ticket(ticket) => match tickets::resume(ctx, ticket, session_id).await {
                // Their turn came and went (admitted, and the admission expired): a buyer who
                // comes back after that joins at the back, as anyone does.
                Ok(_) if ctx.room.turn_over(ticket, floodgate_contract::now_millis()) => {
                    tickets::leave(ctx, ticket, session_id, -1).await;
                    dead = Some(ticket);
                }
                Ok(taken) => return Ok((taken, true)),
                // Given up after its grace, or lost with the sale's state: the buyer gets a new
                // place at the back, as anyone coming back late does.
                Err(ApiError::Gone(..) | ApiError::NotFound(code::UNKNOWN_TICKET, _)) => {
                    dead = Some(ticket);
                }
                Err(e) => return Err(e),
            },
            Place::Take => return take_new(ctx, buyer, nonce, session_id).await,
            Place::Wait | Place::Bound => {
                if started.elapsed() > WAIT_FOR_OTHER {
                    return Err(ApiError::Unavailable(
                        code::REDIS_UNAVAILABLE,
                        "another of your connections is joining this sale; retry in a second"
                            .into(),
                    ));
                }
                tokio::time::sleep(WAIT_STEP).await;
            }
        }
    }
    Err(odd("no place after many rounds"))
}

/// Takes a new ticket and makes it the buyer's; if another join of theirs bound one first (it
/// held the record past [`JOIN_HOLD`]), this one is given back and theirs taken instead.
async fn take_new(
    ctx: &Context,
    buyer: &BuyerId,
    nonce: &str,
    session_id: &str,
) -> Result<(Taken, bool), ApiError> {
    let taken = tickets::join(ctx, nonce).await?;
    match place(ctx, buyer, "bind", session_id, taken.ticket).await {
        Ok(Place::Bound) => Ok((taken, false)),
        Ok(Place::Ticket(theirs)) => {
            tickets::leave(ctx, taken.ticket, session_id, 0).await;
            Ok((tickets::resume(ctx, theirs, session_id).await?, true))
        }
        other => {
            // Not bound: the new ticket must not stay live with nobody's name on it.
            tickets::leave(ctx, taken.ticket, session_id, 0).await;
            other.and_then(|p| Err(odd(&format!("{p:?}"))))
        }
    }
}

async fn place(
    ctx: &Context,
    buyer: &BuyerId,
    op: &str,
    session_id: &str,
    ticket: u64,
) -> Result<Place, ApiError> {
    let reply: Vec<String> = ctx
        .scripts
        .buyer_place
        .key(ctx.root_keys.buyer(&ctx.sale, buyer))
        .arg(op)
        .arg(session_id)
        .arg(if ticket == 0 {
            String::new()
        } else {
            ticket.to_string()
        })
        .arg(RECORD_LIFETIME.as_millis() as u64)
        .arg(JOIN_HOLD.as_millis() as u64)
        .invoke_async(&mut ctx.redis.clone())
        .await?;
    parse_place(&reply)
}

fn parse_place(reply: &[String]) -> Result<Place, ApiError> {
    match reply {
        [ticket, n] if ticket == "ticket" => n
            .parse()
            .map(Place::Ticket)
            .map_err(|_| odd(&reply.join(" "))),
        [take] if take == "take" => Ok(Place::Take),
        [wait] if wait == "wait" => Ok(Place::Wait),
        [bound] if bound == "bound" => Ok(Place::Bound),
        _ => Err(odd(&reply.join(" "))),
    }
}

fn odd(reply: &str) -> ApiError {
    super::odd_reply("buyer_place.lua", reply)
}

#[cfg(test)]
mod tests {
    use super::super::strings;
    use super::*;

    #[test]
    fn place_replies_parse() {
        assert_eq!(
            parse_place(&strings(&["ticket", "12"])).unwrap(),
            Place::Ticket(12)
        );
        assert_eq!(parse_place(&strings(&["take"])).unwrap(), Place::Take);
        assert_eq!(parse_place(&strings(&["wait"])).unwrap(), Place::Wait);
        assert_eq!(parse_place(&strings(&["bound"])).unwrap(), Place::Bound);
        assert!(parse_place(&strings(&["ticket", "x"])).is_err());
        assert!(parse_place(&[]).is_err());
    }
}
