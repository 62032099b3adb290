//! The room's scripts: the controller lease (`lua/lease.lua`), and the leader's steps
//! (`bury.lua`, `sweep.lua`, `advance.lua`) and a room's goodbye (`retire.lua`), each declared
//! once and called one way, its reply decoded into a type.

use std::time::Duration;

use floodgate_platform::keys::SaleKeys;
use floodgate_platform::runtime::RedisConn;
use floodgate_platform::script::{FromReply, LuaScript as _};
use floodgate_platform::scripts::{Lease, Leased};
use floodgate_protocol::UnixMillis;
use redis::RedisResult;

use super::room::HOUSEKEEPING_BATCH;

/// What `advance.lua` did.
#[derive(Debug, PartialEq, Eq)]
pub enum Advanced {
    /// The caller's fencing token is not the lease's: nothing changed.
    NotLeader,
    /// The sale is not armed: nothing changed.
    NotArmed,
    /// `admitted` live tickets (maybe none) were admitted; the frontier is now `frontier`, and
    /// their tokens expire at `exp_ms` (0 if none).
    Moved {
        admitted: u64,
        frontier: u64,
        exp_ms: UnixMillis,
    },
}

/// What `sweep.lua` did with a gateway that looked dead.
#[derive(Debug, PartialEq, Eq)]
pub enum Swept {
    /// Its liveness came back: nothing was handed over.
    Alive,
    /// This many of its tickets started their grace.
    Handed(u64),
}

floodgate_platform::lua_script! {
    /// `lua/bury.lua`: the tickets whose grace ran out are dead, at their places in line.
    pub(super) struct Bury {
        file: "bury.lua",
        helpers: Sale,
        reply: u64,
        keys {
            meta: "sale meta hash",
            frontier: "frontier",
            gone: "gone (sorted set)",
            dead: "dead places",
            deaths: "deaths stream",
            away: "away (sorted set)",
        }
        args {}
        rest { due: Vec<(u64, u64)> = "pairs: ticket, its place in line" }
    }
}

floodgate_platform::lua_script! {
    /// `lua/sweep.lua`: a dead gateway's tickets handed to the grace period.
    pub(super) struct Sweep<'a> {
        file: "sweep.lua",
        helpers: Sale,
        reply: Swept,
        keys {
            alive: "the dead gateway's liveness key",
            sessions: "its session set",
            holders: "holders (hash)",
            gone: "gone (sorted set)",
            gateways: "the sale's gateway registry (set)",
            away: "away (sorted set)",
        }
        args {
            gateway: &'a str = "the dead gateway's id",
            grace_ms: u64 = "grace (ms)",
            most: usize = "most tickets to handle now",
        }
    }
}

floodgate_platform::lua_script! {
    /// `lua/advance.lua`: one step of the admission controller.
    pub(super) struct Advance<'a> {
        file: "advance.lua",
        helpers: Sale,
        reply: Advanced,
        keys {
            meta: "sale meta hash",
            seq: "ticket sequence",
            frontier: "frontier",
            leader: "leader key",
            dead: "dead places",
            admits: "admits stream",
            batches: "batches (sorted set)",
            tokens: "tokens",
            away: "away (sorted set)",
            away_admitted: "admitted away (sorted set)",
        }
        args {
            fence: &'a str = "the caller's fencing token",
            permits: u64 = "most live tickets to admit now",
            furthest: u64 = "the furthest place this call may pass",
        }
        rest { placed: &'a [(u64, u64)] = "pairs: ticket, its place in line" }
    }
}

floodgate_platform::lua_script! {
    /// `lua/retire.lua`: this gateway leaves a sale it has no session in.
    pub(super) struct Retire<'a> {
        file: "retire.lua",
        helpers: None,
        reply: Retired,
        keys {
            alive: "this gateway's liveness key",
            sessions: "its session set",
            gateways: "the sale's gateway registry (set)",
            lease: "the controller lease",
        }
        args {
            instance: &'a str = "this gateway's instance id",
        }
    }
}

/// Which of `gateways` of `keys`' sale have their liveness key.
pub async fn alive(
    conn: &mut RedisConn,
    keys: &SaleKeys,
    gateways: &[&str],
) -> RedisResult<Vec<bool>> {
    let mut pipe = redis::pipe();
    for gateway in gateways {
        pipe.exists(keys.gateway_alive(gateway));
    }
    pipe.query_async(conn).await
}

/// Takes or renews `keys`' sale's controller lease for `instance` (`lua/lease.lua`): the
/// fencing token if `instance` leads, `None` if another does.
pub async fn lease(
    conn: &mut RedisConn,
    keys: &SaleKeys,
    instance: &str,
    lease: Duration,
) -> RedisResult<Option<String>> {
    let leased = Lease {
        leader: keys.leader(),
        epoch: keys.epoch(),
        instance,
        lease_ms: lease.as_millis() as u64,
    }
    .run(conn)
    .await?;
    Ok(match leased {
        Leased::Held { fence } => Some(fence),
        Leased::Elsewhere => None,
    })
}

/// Declares the `(ticket, place)` pairs whose grace ran out dead (`lua/bury.lua`): how many
/// were (a ticket resumed meanwhile is not).
pub async fn bury(conn: &mut RedisConn, keys: &SaleKeys, due: &[(u64, u64)]) -> RedisResult<u64> {
    Ok(Bury {
        meta: keys.meta(),
        frontier: keys.frontier(),
        gone: keys.gone(),
        dead: keys.dead(),
        deaths: keys.deaths(),
        away: keys.away(),
        due: due.to_vec(),
    }
    .run(conn)
    .await?)
}

/// Hands the tickets of `gateway`, which looked dead, to the grace period (`lua/sweep.lua`),
/// at most [`HOUSEKEEPING_BATCH`] of them.
pub async fn sweep(
    conn: &mut RedisConn,
    keys: &SaleKeys,
    gateway: &str,
    grace: Duration,
) -> RedisResult<Swept> {
    Ok(Sweep {
        alive: keys.gateway_alive(gateway),
        sessions: keys.gateway_sessions(gateway),
        holders: keys.holders(),
        gone: keys.gone(),
        gateways: keys.gateways(),
        away: keys.away(),
        gateway,
        grace_ms: grace.as_millis() as u64,
        most: HOUSEKEEPING_BATCH,
    }
    .run(conn)
    .await?)
}

/// The away tickets a step places before it moves (those that left before their place was
/// known), and how far it may go while some remain unplaced.
#[derive(Debug, Default)]
pub struct Placing {
    pub placed: Vec<(u64, u64)>,
    /// The furthest place the step may pass (0: no bound).
    pub furthest: u64,
}

/// One step of the admission controller with fencing token `fence` (`lua/advance.lua`),
/// admitting at most `permits` live tickets, once the away tickets in `placed` (ticket, place)
/// have their places, and passing no place beyond `placing.furthest` (0: no bound); also
/// expires unspent tokens.
pub async fn advance(
    conn: &mut RedisConn,
    keys: &SaleKeys,
    (fence, permits): (&str, u64),
    placing: &Placing,
) -> RedisResult<Advanced> {
    Ok(Advance {
        meta: keys.meta(),
        seq: keys.seq(),
        frontier: keys.frontier(),
        leader: keys.leader(),
        dead: keys.dead(),
        admits: keys.admits(),
        batches: keys.batches(),
        tokens: keys.tokens(),
        away: keys.away(),
        away_admitted: keys.away_admitted(),
        fence,
        permits,
        furthest: placing.furthest,
        placed: &placing.placed,
    }
    .run(conn)
    .await?)
}

/// Removes `instance`'s liveness, its place in the sale's registry and any lease it holds
/// (`lua/retire.lua`): false if a session registered meanwhile (then nothing changed).
pub async fn retire(conn: &mut RedisConn, keys: &SaleKeys, instance: &str) -> RedisResult<bool> {
    let retired = Retire {
        alive: keys.gateway_alive(instance),
        sessions: keys.gateway_sessions(instance),
        gateways: keys.gateways(),
        lease: keys.leader(),
        instance,
    }
    .run(conn)
    .await?;
    Ok(retired == Retired::Retired)
}

/// `sweep.lua`'s count of tickets handed over, or -1 for a gateway alive after all.
impl FromReply for Swept {
    fn from_reply(value: redis::Value) -> Result<Self, String> {
        match i64::from_reply(value)? {
            -1 => Ok(Self::Alive),
            n => u64::try_from(n)
                .map(Self::Handed)
                .map_err(|_| n.to_string()),
        }
    }
}

/// What `retire.lua` did.
#[derive(Debug, PartialEq, Eq)]
pub enum Retired {
    /// This gateway's liveness, registry entry and any lease it held are gone.
    Retired,
    /// A session registered meanwhile: nothing changed.
    StillServing,
}

/// `1` or `0`.
impl FromReply for Retired {
    fn from_reply(value: redis::Value) -> Result<Self, String> {
        match i64::from_reply(value)? {
            1 => Ok(Self::Retired),
            0 => Ok(Self::StillServing),
            n => Err(n.to_string()),
        }
    }
}

/// `advance.lua`'s reply `{admitted, frontier, exp}`, with its negative markers.
impl FromReply for Advanced {
    fn from_reply(value: redis::Value) -> Result<Self, String> {
        <(i64, u64, i64)>::from_reply(value).map(advanced)
    }
}

fn advanced((admitted, frontier, exp_ms): (i64, u64, i64)) -> Advanced {
    match admitted {
        -1 => Advanced::NotLeader,
        n if n < 0 => Advanced::NotArmed,
        n => Advanced::Moved {
            admitted: n as u64,
            frontier,
            exp_ms,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweep_and_retire_replies_read_into_their_outcomes() {
        let swept = |n: i64| Swept::from_reply(redis::Value::Int(n));
        assert_eq!(swept(-1), Ok(Swept::Alive));
        assert_eq!(swept(0), Ok(Swept::Handed(0)));
        assert_eq!(swept(12), Ok(Swept::Handed(12)));
        assert!(swept(-2).is_err());
        let retired = |n: i64| Retired::from_reply(redis::Value::Int(n));
        assert_eq!(retired(1), Ok(Retired::Retired));
        assert_eq!(retired(0), Ok(Retired::StillServing));
        assert!(retired(2).is_err());
    }

    #[test]
    fn advance_replies_read_into_their_outcomes() {
        assert_eq!(advanced((-1, 0, 0)), Advanced::NotLeader);
        assert_eq!(advanced((-2, 0, 0)), Advanced::NotArmed);
        assert_eq!(
            advanced((3, 17, 9_000)),
            Advanced::Moved {
                admitted: 3,
                frontier: 17,
                exp_ms: 9_000
            }
        );
        assert_eq!(
            advanced((0, 17, 0)),
            Advanced::Moved {
                admitted: 0,
                frontier: 17,
                exp_ms: 0
            }
        );
    }
}
