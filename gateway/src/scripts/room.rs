//! The room's Redis calls: the per-tick read every gateway makes, and the leader's reads and
//! scripts (`lua/lease.lua`, `bury.lua`, `sweep.lua`, `advance.lua`, `retire.lua`), each one way
//! with a typed answer.

use std::time::Duration;

use floodgate_platform::keys::{PoolKeys, SaleKeys};
use floodgate_platform::runtime::RedisConn;
use floodgate_platform::state::{self, AdmitEntry, PoolCounts, SaleMeta};
use floodgate_protocol::UnixMillis;
use redis::RedisResult;

use super::Scripts;

/// Stream entries read per tick: catching up on a long history takes a few ticks, during which
/// positions are overestimates.
const STREAM_BATCH: usize = 10_000;
/// Tickets handled per tick by the bury and sweep steps.
pub const HOUSEKEEPING_BATCH: usize = 5_000;

/// Where a gateway has read a sale's deaths and admits streams up to.
#[derive(Debug)]
pub struct Cursor {
    deaths: String,
    admits: String,
}

impl Default for Cursor {
    fn default() -> Self {
        Self {
            deaths: "-".into(),
            admits: "-".into(),
        }
    }
}

/// What a tick's read found.
#[derive(Debug, Default)]
pub struct TickRead {
    /// `None`: the sale is not armed.
    pub meta: Option<SaleMeta>,
    pub frontier: u64,
    pub issued: u64,
    /// Places declared dead since the last read.
    pub deaths: Vec<u64>,
    /// Admission batches since the last read.
    pub admits: Vec<AdmitEntry>,
}

/// The leader's view of the stock and housekeeping, read in one round trip.
#[derive(Debug)]
pub struct LeaderRead {
    /// One per pool, in the order asked.
    pub pools: Vec<PoolCounts>,
    /// Tickets whose grace has run out, to be buried.
    pub due: Vec<u64>,
    /// Every gateway registered in the sale's room.
    pub gateways: Vec<String>,
}

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

impl Scripts {
    /// The per-tick read of `keys`' sale: settings, frontier, tickets, the deaths and
    /// admissions after `cursor` (which it moves on), and this gateway's liveness renewed for
    /// `lease`, in one pipelined round trip.
    pub async fn read_tick(
        &self,
        conn: &mut RedisConn,
        keys: &SaleKeys,
        instance: &str,
        lease: Duration,
        cursor: &mut Cursor,
    ) -> RedisResult<TickRead> {
        type Entries = Vec<(String, Vec<String>)>;
        let mut pipe = redis::pipe();
        SaleMeta::query(&mut pipe, keys);
        let (meta, frontier, issued, deaths, admits): (
            Vec<Option<String>>,
            Option<u64>,
            Option<u64>,
            Entries,
            Entries,
        ) = pipe
            .get(keys.frontier())
            .get(keys.seq())
            .cmd("XRANGE")
            .arg(keys.deaths())
            .arg(exclusive(&cursor.deaths))
            .arg("+")
            .arg("COUNT")
            .arg(STREAM_BATCH)
            .cmd("XRANGE")
            .arg(keys.admits())
            .arg(exclusive(&cursor.admits))
            .arg("+")
            .arg("COUNT")
            .arg(STREAM_BATCH)
            .cmd("SADD")
            .arg(keys.gateways())
            .arg(instance)
            .ignore()
            .cmd("SET")
            .arg(keys.gateway_alive(instance))
            .arg(1)
            .arg("PX")
            .arg(lease.as_millis() as u64)
            .ignore()
            .query_async(conn)
            .await?;
        if let Some((last, _)) = deaths.last() {
            cursor.deaths.clone_from(last);
        }
        if let Some((last, _)) = admits.last() {
            cursor.admits.clone_from(last);
        }
        Ok(TickRead {
            meta: SaleMeta::from_fields(&meta),
            frontier: frontier.unwrap_or(0),
            issued: issued.unwrap_or(0),
            deaths: deaths
                .iter()
                .filter_map(|(_, fields)| state::death_place(fields))
                .collect(),
            admits: admits
                .iter()
                .filter_map(|(id, fields)| AdmitEntry::from_entry(id, fields))
                .collect(),
        })
    }

    /// The leader's read: `pools`' counts, the tickets of `keys`' sale whose grace ended by
    /// `now_ms`, and the sale's registered gateways.
    pub async fn read_for_leader(
        &self,
        conn: &mut RedisConn,
        keys: &SaleKeys,
        pools: &[PoolKeys],
        now_ms: UnixMillis,
    ) -> RedisResult<LeaderRead> {
        // The pools' counts (a slot each) and the sale's housekeeping (its slot), at once.
        let counts = PoolCounts::read_each(conn, pools);
        let mut pipe = redis::pipe();
        pipe.cmd("ZRANGEBYSCORE")
            .arg(keys.gone())
            .arg(1)
            .arg(now_ms)
            .arg("LIMIT")
            .arg(0)
            .arg(HOUSEKEEPING_BATCH)
            .smembers(keys.gateways());
        let mut sale_conn = conn.clone();
        let ((due, gateways), pools): ((Vec<u64>, Vec<String>), _) =
            tokio::try_join!(pipe.query_async(&mut sale_conn), counts)?;
        Ok(LeaderRead {
            pools,
            due,
            gateways,
        })
    }
}

/// A sale's meta, frontier and tickets handed out, in one round trip (for the summary
/// endpoint, which needs no streams).
pub async fn read_sale(conn: &mut RedisConn, keys: &SaleKeys) -> RedisResult<TickRead> {
    let mut pipe = redis::pipe();
    SaleMeta::query(&mut pipe, keys);
    let (meta, frontier, issued): (Vec<Option<String>>, Option<u64>, Option<u64>) = pipe
        .get(keys.frontier())
        .get(keys.seq())
        .query_async(conn)
        .await?;
    Ok(TickRead {
        meta: SaleMeta::from_fields(&meta),
        frontier: frontier.unwrap_or(0),
        issued: issued.unwrap_or(0),
        ..TickRead::default()
    })
}

impl Scripts {
    /// Which of `gateways` of `keys`' sale have their liveness key.
    pub async fn alive(
        &self,
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
        &self,
        conn: &mut RedisConn,
        keys: &SaleKeys,
        instance: &str,
        lease: Duration,
    ) -> RedisResult<Option<String>> {
        let fence: String = self
            .lease
            .key(keys.leader())
            .key(keys.epoch())
            .arg(instance)
            .arg(lease.as_millis() as u64)
            .invoke_async(conn)
            .await?;
        Ok(Some(fence).filter(|f| !f.is_empty()))
    }

    /// Declares the `(ticket, place)` pairs whose grace ran out dead (`lua/bury.lua`): how many
    /// were (a ticket resumed meanwhile is not).
    pub async fn bury(
        &self,
        conn: &mut RedisConn,
        keys: &SaleKeys,
        due: &[(u64, u64)],
    ) -> RedisResult<u64> {
        let mut bury = self.bury.prepare_invoke();
        bury.key(keys.meta())
            .key(keys.frontier())
            .key(keys.gone())
            .key(keys.dead())
            .key(keys.deaths());
        for (ticket, place) in due {
            bury.arg(ticket).arg(place);
        }
        bury.invoke_async(conn).await
    }

    /// Hands the tickets of `gateway`, which looked dead, to the grace period (`lua/sweep.lua`),
    /// at most [`HOUSEKEEPING_BATCH`] of them.
    pub async fn sweep(
        &self,
        conn: &mut RedisConn,
        keys: &SaleKeys,
        gateway: &str,
        grace: Duration,
    ) -> RedisResult<Swept> {
        let swept: i64 = self
            .sweep
            .key(keys.gateway_alive(gateway))
            .key(keys.gateway_sessions(gateway))
            .key(keys.holders())
            .key(keys.gone())
            .key(keys.gateways())
            .arg(gateway)
            .arg(grace.as_millis() as u64)
            .arg(HOUSEKEEPING_BATCH)
            .invoke_async(conn)
            .await?;
        Ok(u64::try_from(swept).map_or(Swept::Alive, Swept::Handed))
    }

    /// One step of the admission controller with fencing token `fence` (`lua/advance.lua`),
    /// admitting at most `permits` live tickets; also expires unspent tokens.
    pub async fn advance(
        &self,
        conn: &mut RedisConn,
        keys: &SaleKeys,
        fence: &str,
        permits: u64,
    ) -> RedisResult<Advanced> {
        let reply: (i64, u64, i64) = self
            .advance
            .key(keys.meta())
            .key(keys.seq())
            .key(keys.frontier())
            .key(keys.leader())
            .key(keys.dead())
            .key(keys.admits())
            .key(keys.batches())
            .key(keys.tokens())
            .arg(fence)
            .arg(permits)
            .invoke_async(conn)
            .await?;
        Ok(advanced(reply))
    }

    /// Removes `instance`'s liveness, its place in the sale's registry and any lease it holds
    /// (`lua/retire.lua`): false if a session registered meanwhile (then nothing changed).
    pub async fn retire(
        &self,
        conn: &mut RedisConn,
        keys: &SaleKeys,
        instance: &str,
    ) -> RedisResult<bool> {
        let retired: i64 = self
            .retire
            .key(keys.gateway_alive(instance))
            .key(keys.gateway_sessions(instance))
            .key(keys.gateways())
            .key(keys.leader())
            .arg(instance)
            .invoke_async(conn)
            .await?;
        Ok(retired == 1)
    }
}

/// `advance.lua`'s reply `{admitted, frontier, exp}`, with its negative markers.
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

/// The XRANGE start just after stream id `id` (or the very start).
fn exclusive(id: &str) -> String {
    if id == "-" {
        "-".into()
    } else {
        format!("({id}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn stream_reads_start_after_the_last_id() {
        assert_eq!(exclusive("-"), "-");
        assert_eq!(exclusive("17-0"), "(17-0");
    }
}
