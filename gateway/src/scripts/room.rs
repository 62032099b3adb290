//! The room's Redis reads: the per-tick read every gateway makes, the leader's read, and the
//! summary's; each one pipelined round trip with a typed answer. The leader's scripts are in
//! [`super::leader`].

use std::time::Duration;

use floodgate_platform::keys::{PoolKeys, SaleKeys};
use floodgate_platform::runtime::RedisConn;
use floodgate_platform::state::{self, AdmitEntry, PoolCounts, SaleMeta};
use floodgate_protocol::UnixMillis;
use redis::RedisResult;

use super::taken_over;

/// Stream entries read per tick: catching up on a long history takes a few ticks, during which
/// positions are overestimates.
const STREAM_BATCH: usize = 10_000;
/// Tickets handled per tick by the bury and sweep steps.
pub const HOUSEKEEPING_BATCH: usize = 5_000;
/// Away tickets placed per tick (`lua/advance.lua` takes them as arguments): 5,000 a second at
/// the default tick, a pre-queue's departures of the last grace placed within seconds.
pub const PLACING_BATCH: usize = 500;

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
    /// This gateway's sessions whose place a newer session took back, by number
    /// ([`super::taken_over`]).
    pub taken_over: Vec<u64>,
}

/// The leader's view of the stock and housekeeping, read in one round trip.
#[derive(Debug)]
pub struct LeaderRead {
    /// One per pool, in the order asked.
    pub pools: Vec<PoolCounts>,
    /// Tickets whose grace has run out, to be buried.
    pub due: Vec<u64>,
    /// Away tickets whose place was not known when their people left (before the draw), to be
    /// placed (`lua/advance.lua`).
    pub unplaced: Vec<u64>,
    /// Every gateway registered in the sale's room.
    pub gateways: Vec<String>,
}

/// The per-tick read of `keys`' sale: settings, frontier, tickets, the deaths and
/// admissions after `cursor` (which it moves on), the sessions of this gateway taken over
/// (taken from its list), and this gateway's liveness renewed for `lease`, in one pipelined
/// round trip.
pub async fn read_tick(
    conn: &mut RedisConn,
    keys: &SaleKeys,
    instance: &str,
    lease: Duration,
    cursor: &mut Cursor,
) -> RedisResult<TickRead> {
    type Entries = Vec<(String, Vec<String>)>;
    let mut pipe = redis::pipe();
    SaleMeta::query(&mut pipe, keys);
    /// What the pipeline answers, in order: the meta's fields, the frontier, the tickets handed
    /// out, the deaths, the admissions, and this gateway's sessions taken over.
    type Read = (
        Vec<Option<String>>,
        Option<u64>,
        Option<u64>,
        Entries,
        Entries,
        Option<Vec<String>>,
    );
    let (meta, frontier, issued, deaths, admits, taken): Read = pipe
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
        .cmd("LPOP")
        .arg(keys.gateway_taken_over(instance))
        .arg(taken_over::PER_TICK)
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
        taken_over: taken_over::numbers_of(instance, &taken.unwrap_or_default()),
    })
}

/// The leader's read: `pools`' counts, the tickets of `keys`' sale whose grace ended by
/// `now_ms`, the sale's registered gateways, and the away tickets not yet placed.
pub async fn read_for_leader(
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
        .smembers(keys.gateways())
        .cmd("ZRANGEBYSCORE")
        .arg(keys.away())
        .arg(0)
        .arg(0)
        .arg("LIMIT")
        .arg(0)
        .arg(PLACING_BATCH);
    let mut sale_conn = conn.clone();
    let ((due, gateways, unplaced), pools): ((Vec<u64>, Vec<String>, Vec<u64>), _) =
        tokio::try_join!(pipe.query_async(&mut sale_conn), counts)?;
    Ok(LeaderRead {
        pools,
        due,
        unplaced,
        gateways,
    })
}

/// Which of `tickets` are away with no place recorded yet (they left before the draw).
pub async fn unplaced_among(
    conn: &mut RedisConn,
    keys: &SaleKeys,
    tickets: &[u64],
) -> RedisResult<Vec<bool>> {
    if tickets.is_empty() {
        return Ok(Vec::new());
    }
    let scores: Vec<Option<f64>> = redis::cmd("ZMSCORE")
        .arg(keys.away())
        .arg(tickets)
        .query_async(conn)
        .await?;
    Ok(scores.into_iter().map(|s| s == Some(0.0)).collect())
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
    fn stream_reads_start_after_the_last_id() {
        assert_eq!(exclusive("-"), "-");
        assert_eq!(exclusive("17-0"), "(17-0");
    }
}
