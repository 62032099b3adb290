//! What the pool-keeping scripts answer (arming, ending, repair and rebuild, the sequence
//! check, the buyer's seat count), each read from its script's reply in one impl beside its
//! type; apart from the modules that call them, so the declarations (`scripts.rs`) can name
//! them without importing their callers.

use floodgate_platform::script::{FromReply, FromStrings};
use floodgate_protocol::UnixMillis;

/// What an arming script did.
#[derive(Debug, PartialEq, Eq)]
pub enum Armed {
    /// Written (again: arming is idempotent before the opening).
    Armed,
    /// Refused: the sale opened at this instant (as armed before, or as asked now).
    Opened(UnixMillis),
}

/// `{"armed"}` or `{"opened", at_ms}`.
impl FromStrings for Armed {
    fn from_strings(reply: &[String]) -> Option<Self> {
        match reply {
            [armed] if armed == "armed" => Some(Self::Armed),
            [opened, at] if opened == "opened" => at.parse().ok().map(Self::Opened),
            _ => None,
        }
    }
}

/// What ending one pool found (`lua/end_pool.lua`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PoolEnd {
    Ended {
        at_ms: UnixMillis,
    },
    /// Seats in live holds (reserved or being paid): they are paid or expire first.
    Holding {
        seats: i64,
    },
    /// Events still in the outbox: the relay publishes them first.
    Relaying {
        events: i64,
    },
    NotArmed,
}

/// `{"ended", at_ms}`, `{"holding", seats}`, `{"relaying", events}` or `{"not_armed"}`.
impl FromStrings for PoolEnd {
    fn from_strings(reply: &[String]) -> Option<Self> {
        let number = || reply.get(1)?.parse::<i64>().ok();
        Some(match reply.first()?.as_str() {
            "ended" => Self::Ended { at_ms: number()? },
            "holding" => Self::Holding { seats: number()? },
            "relaying" => Self::Relaying { events: number()? },
            "not_armed" => Self::NotArmed,
            _ => return None,
        })
    }
}

/// What `repair_pool.lua` did.
#[derive(Debug, PartialEq, Eq)]
pub enum Repaired {
    Repaired,
    /// The counters moved since they were read: nothing changed.
    Moved,
}

/// `"repaired"` or `"moved"`.
impl FromReply for Repaired {
    fn from_reply(value: redis::Value) -> Result<Self, String> {
        match String::from_reply(value)?.as_str() {
            "repaired" => Ok(Self::Repaired),
            "moved" => Ok(Self::Moved),
            other => Err(other.to_owned()),
        }
    }
}

/// What a rebuild did.
#[derive(Debug, PartialEq, Eq)]
pub enum Rebuild {
    /// Restored, with these counters.
    Rebuilt {
        available: i64,
        held: i64,
        sold: i64,
    },
    /// The pool has its state: nothing was written.
    Intact,
    /// The pool was refused for lost writes and still has events to relay: nothing was written
    /// (PostgreSQL does not know all of its decisions yet).
    Busy,
    /// Sold and held exceed the capacity: nothing was written, a person must look.
    Overcommitted,
}

/// `{"rebuilt", available, held, sold}`, `{"intact"}`, `{"busy"}` or
/// `{"overcommitted", available}`.
impl FromStrings for Rebuild {
    fn from_strings(reply: &[String]) -> Option<Self> {
        match reply {
            [rebuilt, available, held, sold] if rebuilt == "rebuilt" => Some(Self::Rebuilt {
                available: available.parse().ok()?,
                held: held.parse().ok()?,
                sold: sold.parse().ok()?,
            }),
            [intact] if intact == "intact" => Some(Self::Intact),
            [busy] if busy == "busy" => Some(Self::Busy),
            [over, ..] if over == "overcommitted" => Some(Self::Overcommitted),
            _ => None,
        }
    }
}

/// Whether a pool's Redis is in step with the event sequence Kafka delivered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sequence {
    InStep,
    /// It lost writes and is refused; `newly` if this check found it.
    Refused {
        newly: bool,
    },
    /// Not armed (a lost pool is refused anyway).
    NotArmed,
}

/// `diverge.lua`'s `1` (marked now), `2` (marked before), `0` (in step) or `-1` (not armed).
impl FromReply for Sequence {
    fn from_reply(value: redis::Value) -> Result<Self, String> {
        match i64::from_reply(value)? {
            0 => Ok(Self::InStep),
            1 => Ok(Self::Refused { newly: true }),
            2 => Ok(Self::Refused { newly: false }),
            -1 => Ok(Self::NotArmed),
            other => Err(other.to_string()),
        }
    }
}

/// What `buyer_seats.lua` did.
#[derive(Debug, PartialEq, Eq)]
pub enum BuyerCount {
    /// The token's seats count against the buyer (now, or already).
    Counted,
    /// The buyer holds or bought `counted` seats, and these would pass the limit: the token's
    /// attempts stamped below `fence` (this one's stamp) are refused from now on.
    Over { counted: u32, fence: i64 },
    /// A later attempt of the token was over first, and fenced this one off below `fence`: it
    /// takes nothing. `counted_here`: a later attempt's seats count now, and its answer settles
    /// the token.
    Fenced {
        counted: u32,
        fence: i64,
        counted_here: bool,
    },
    /// The token's seats no longer count.
    Given,
}

/// `{"ok"}`, `{"over", counted, fence}`, `{"fenced", counted, fence, 0|1}` or `{"given"}`.
impl FromStrings for BuyerCount {
    fn from_strings(reply: &[String]) -> Option<Self> {
        match reply {
            [ok] if ok == "ok" => Some(Self::Counted),
            [over, counted, fence] if over == "over" => Some(Self::Over {
                counted: counted.parse().ok()?,
                fence: fence.parse().ok()?,
            }),
            [fenced, counted, fence, here] if fenced == "fenced" => Some(Self::Fenced {
                counted: counted.parse().ok()?,
                fence: fence.parse().ok()?,
                counted_here: match here.as_str() {
                    "1" => true,
                    "0" => false,
                    _ => return None,
                },
            }),
            [given] if given == "given" => Some(Self::Given),
            _ => None,
        }
    }
}
