//! One place in line per buyer per sale (`lua/buyer_place.lua`): a buyer who joins again (another
//! tab, device or address) takes their ticket back instead of a new one, for as long as it can
//! still be admitted; once its turn has come and gone, or it was given up, the buyer's next join
//! takes a new place at the back. A join that came back with a resume token skipped the door's
//! bot check, so it only ever takes a live ticket back, never a new one.

use std::time::Duration;

use floodgate_platform::keys::Keys;
use floodgate_protocol::api::code;
use floodgate_protocol::identity::BuyerId;
use floodgate_protocol::resume::BuyerMark;

use floodgate_platform::script::{FromStrings, LuaScript as _, OddReply, ScriptError};

use super::departures;
use super::takeback::{self, Taker};
use super::tickets::{self, Taken};
use super::SaleScope;
use crate::error::ApiError;

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
pub(super) enum Place {
    /// The buyer's ticket.
    Ticket(u64),
    /// None yet: this join takes one.
    Take,
    /// Another join of this buyer is taking one.
    Wait,
    /// This join's ticket is the buyer's now.
    Bound,
    /// The join's mark on the record is gone.
    Released,
    /// The record names the session's ticket again.
    Restored,
    /// The record already named that ticket or a later one.
    Kept,
}

/// What writing a buyer's record again after a failover did (`crate::records`).
#[derive(Debug, PartialEq, Eq)]
pub enum Restored {
    /// The record named no ticket, or an earlier one: it names the session's now.
    Written,
    /// It named that ticket already, or a later one (the buyer joined again since).
    Kept,
}

/// Writes `ticket`, which a session of `buyer` still waits on, into the buyer's record again,
/// unless the record names it or a later ticket: after a failover that may have lost the
/// record's last write.
pub async fn restore(
    scope: &SaleScope,
    buyer: &BuyerId,
    ticket: u64,
) -> Result<Restored, ApiError> {
    match place(scope, buyer, "restore", "", ticket).await? {
        Place::Restored => Ok(Restored::Written),
        Place::Kept => Ok(Restored::Kept),
        other => Err(odd("restore", other)),
    }
}

/// A signed-in buyer's join.
pub struct Joining<'a> {
    pub scope: &'a SaleScope,
    /// Whether a ticket's turn has come and gone (admitted, and the admission expired), as the
    /// room sees it now.
    pub turn_over: &'a (dyn Fn(u64) -> bool + Sync),
    pub buyer: &'a BuyerId,
    /// The buyer's mark (`protocol::resume`), which their tickets are bound to.
    pub mark: &'a BuyerMark,
    /// The draw nonce for a new ticket.
    pub nonce: &'a str,
    pub session_id: &'a str,
    /// The ticket a genuine resume token came with (already checked to be this buyer's, or
    /// buyerless): a buyer who has no place yet makes it theirs (someone who joined, then signed
    /// in, keeps the place they had). A join with a token skipped the bot check: it takes no new
    /// place.
    pub resumed: Option<u64>,
}

impl Joining<'_> {
    fn taker(&self, adopt: bool) -> Taker<'_> {
        Taker {
            buyer: Some(self.mark),
            adopt,
        }
    }
}

/// The buyer's ticket, taken back (`resumed` is true), or one made theirs.
pub async fn take(join: &Joining<'_>) -> Result<(Taken, bool), ApiError> {
    let Joining {
        scope,
        buyer,
        session_id,
        ..
    } = *join;
    let started = tokio::time::Instant::now();
    let mut dead = None;
    // Each round either ends the join or forgets a dead ticket (or waits, bounded by time):
    // a few rounds always suffice.
    for _ in 0..MAX_ROUNDS {
        match place(scope, buyer, "find", session_id, dead.unwrap_or(0)).await? {
            Place::Ticket(ticket) => {
                match takeback::resume(scope, ticket, session_id, join.taker(false)).await {
                    // Their turn came and went (admitted, and the admission expired): a buyer who
                    // comes back after that joins at the back, as anyone does.
                    Ok(_) if (join.turn_over)(ticket) => {
                        departures::leave(scope, ticket, session_id, -1).await;
                        dead = Some(ticket);
                    }
                    Ok(taken) => return Ok((taken, true)),
                    // Given up after its grace, or lost with the sale's state: the buyer gets a new
                    // place at the back, as anyone coming back late does. A ticket another buyer
                    // made theirs (its owner's mark was lost in a failover and someone adopted it
                    // with its old buyerless token) is not this buyer's any more either: it is
                    // forgotten, so it never locks them out.
                    Err(e)
                        if matches!(
                            e.code(),
                            code::TICKET_EXPIRED | code::UNKNOWN_TICKET | code::RESUME_OTHER_BUYER
                        ) =>
                    {
                        dead = Some(ticket);
                    }
                    Err(e) => return Err(e),
                }
            }
            Place::Take => return take_new(join).await,
            // Answers of the other operations, never of `find`: a bug.
            other @ (Place::Bound | Place::Released | Place::Restored | Place::Kept) => {
                return Err(odd("find", other));
            }
            Place::Wait => {
                if started.elapsed() > WAIT_FOR_OTHER {
                    return Err(ApiError::new(
                        code::REDIS_UNAVAILABLE,
                        "another of your connections is joining this sale; retry in a second"
                            .into(),
                    ));
                }
                tokio::time::sleep(WAIT_STEP).await;
            }
        }
    }
    // Only a record that changes under every round (a bug between this loop and the script)
    // gets here.
    tracing::error!(
        rounds = MAX_ROUNDS,
        "a buyer's join found no place in its rounds"
    );
    Err(ApiError::new(
        code::REDIS_UNAVAILABLE,
        "the waiting room could not settle your place; retry in a second".into(),
    ))
}

/// Makes a ticket the buyer's: the one their resume token names if it is still in line, else a
/// new one, for a join that passed the door. If another join of theirs bound one first (it held
/// the record past [`JOIN_HOLD`]), this one is given back and theirs taken instead.
async fn take_new(join: &Joining<'_>) -> Result<(Taken, bool), ApiError> {
    let Joining {
        scope,
        buyer,
        session_id,
        ..
    } = *join;
    let adopted = match adoptable(join).await {
        Ok(adopted) => adopted,
        Err(e) => {
            let _ = place(scope, buyer, "release", session_id, 0).await;
            return Err(e);
        }
    };
    let (taken, resumed) = match adopted {
        Some(taken) => (taken, true),
        None if join.resumed.is_some() => {
            // A dead ticket is no way past the door: the client joins again without its token.
            let _ = place(scope, buyer, "release", session_id, 0).await;
            return Err(takeback::expired());
        }
        None => (tickets::join(scope, join.nonce).await?, false),
    };
    match place(scope, buyer, "bind", session_id, taken.ticket).await {
        Ok(Place::Bound) => Ok((taken, resumed)),
        Ok(Place::Ticket(theirs)) => {
            departures::leave(scope, taken.ticket, session_id, 0).await;
            Ok((
                takeback::resume(scope, theirs, session_id, join.taker(false)).await?,
                true,
            ))
        }
        other => {
            // Not bound: the new ticket must not stay live with nobody's name on it.
            departures::leave(scope, taken.ticket, session_id, 0).await;
            other.and_then(|p| Err(odd("bind", p)))
        }
    }
}

/// The ticket of the join's resume token, taken back and made the buyer's, if it can still be
/// admitted; refused if another buyer made it theirs first.
async fn adoptable(join: &Joining<'_>) -> Result<Option<Taken>, ApiError> {
    let Some(ticket) = join.resumed else {
        return Ok(None);
    };
    let taken = match takeback::resume(join.scope, ticket, join.session_id, join.taker(true)).await
    {
        Ok(taken) => taken,
        // Gone or unknown (410, 404): nothing to adopt.
        Err(e) if matches!(e.status().as_u16(), 404 | 410) => return Ok(None),
        Err(e) => return Err(e),
    };
    if (join.turn_over)(ticket) {
        departures::leave(join.scope, ticket, join.session_id, -1).await;
        return Ok(None);
    }
    Ok(Some(taken))
}

floodgate_platform::lua_script! {
    /// `lua/buyer_place.lua`: a buyer's one place in line (find, bind, release, restore).
    pub(super) struct BuyerPlace<'a> {
        file: "buyer_place.lua",
        helpers: Clock,
        reply: Place,
        keys {
            record: "the buyer's record",
        }
        args {
            op: &'a str = "\"find\", \"bind\", \"release\" or \"restore\"",
            session_id: &'a str = "the session's id",
            ticket: String = "find: a ticket the caller found dead",
            lifetime_ms: u64 = "the record's lifetime (ms)",
            join_hold_ms: u64 = "how long a join may hold the record (ms)",
        }
    }
}

async fn place(
    scope: &SaleScope,
    buyer: &BuyerId,
    op: &str,
    session_id: &str,
    ticket: u64,
) -> Result<Place, ApiError> {
    Ok(BuyerPlace {
        record: scope.root_keys.buyer(&scope.sale, buyer),
        op,
        session_id,
        ticket: if ticket == 0 {
            String::new()
        } else {
            ticket.to_string()
        },
        lifetime_ms: Keys::BUYER_RECORD_LIFETIME.as_millis() as u64,
        join_hold_ms: JOIN_HOLD.as_millis() as u64,
    }
    .run(&mut scope.redis.clone())
    .await?)
}

/// `{"ticket", n}`, `{"kept", n}` or a word.
impl FromStrings for Place {
    fn from_strings(reply: &[String]) -> Option<Self> {
        match reply {
            [ticket, n] if ticket == "ticket" => n.parse().ok().map(Self::Ticket),
            [kept, n] if kept == "kept" && n.parse::<u64>().is_ok() => Some(Self::Kept),
            [word] => match word.as_str() {
                "take" => Some(Self::Take),
                "wait" => Some(Self::Wait),
                "bound" => Some(Self::Bound),
                "released" => Some(Self::Released),
                "restored" => Some(Self::Restored),
                _ => None,
            },
            _ => None,
        }
    }
}

/// A reply `buyer_place.lua` documents, but not for the operation asked: a bug between the
/// script and this module, answered as any odd reply is.
fn odd(op: &str, place: Place) -> ApiError {
    ScriptError::Odd(OddReply {
        script: "buyer_place.lua",
        reply: format!("{op} answered {place:?}"),
    })
    .into()
}

#[cfg(test)]
mod tests {
    use super::super::strings;
    use super::*;

    #[test]
    fn place_replies_parse() {
        assert_eq!(
            Place::from_strings(&strings(&["ticket", "12"])).unwrap(),
            Place::Ticket(12)
        );
        assert_eq!(
            Place::from_strings(&strings(&["take"])).unwrap(),
            Place::Take
        );
        assert_eq!(
            Place::from_strings(&strings(&["wait"])).unwrap(),
            Place::Wait
        );
        assert_eq!(
            Place::from_strings(&strings(&["bound"])).unwrap(),
            Place::Bound
        );
        assert_eq!(
            Place::from_strings(&strings(&["released"])).unwrap(),
            Place::Released
        );
        assert_eq!(
            Place::from_strings(&strings(&["restored"])).unwrap(),
            Place::Restored
        );
        assert_eq!(
            Place::from_strings(&strings(&["kept", "7"])).unwrap(),
            Place::Kept
        );
        assert!(Place::from_strings(&strings(&["ticket", "x"])).is_none());
        assert!(Place::from_strings(&strings(&["kept"])).is_none());
        assert!(Place::from_strings(&[]).is_none());
    }
}
