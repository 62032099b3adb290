//! What the ops API reads and turns: a sale's live figures in two round trips, and the
//! settings an operator changes while the rush is on.

use floodgate_platform::autopilot::{Settings, Step};
use floodgate_platform::state::{
    autopilot_change, redis_time_ms, writes, AdmitEntry, PoolCounts, SaleMeta,
};
use floodgate_protocol::UnixMillis;

use super::Gatekeeper;

/// A sale's live figures, as Redis has them.
#[derive(Clone, Debug, PartialEq)]
pub struct SaleFigures {
    pub meta: SaleMeta,
    /// Redis' clock when read.
    pub now_ms: UnixMillis,
    /// Tickets handed out, and the frontier.
    pub issued: u64,
    pub frontier: u64,
    /// Tickets whose holders went away and are inside their grace.
    pub in_grace: u64,
    /// Sessions connected now, over every gateway serving the sale.
    pub live: u64,
    /// Dead places beyond the frontier (to be skipped).
    pub dead_ahead: u64,
    /// Live tickets admitted over the last ten seconds.
    pub admitted_lately: u64,
    /// Each pool's counts, in the sale's order.
    pub pools: Vec<(String, PoolCounts)>,
    /// The autopilot's last step, as the leader kept it (`None`: none lately, or one this
    /// release cannot read).
    pub autopilot_step: Option<Step>,
}

/// How far back `admitted_lately` looks.
pub const LATELY_MS: i64 = 10_000;

impl Gatekeeper {
    /// The sale's live figures, or `None` if it is not armed.
    pub async fn sale_figures(&self, sale: &str) -> redis::RedisResult<Option<SaleFigures>> {
        let keys = self.keys.sale(sale);
        let mut conn = self.redis.clone();
        let mut pipe = redis::pipe();
        SaleMeta::query(&mut pipe, &keys);
        type Reply = (
            Vec<Option<String>>,
            Option<u64>,
            Option<u64>,
            (i64, i64),
            u64,
            Vec<String>,
            Option<String>,
        );
        let (meta, issued, frontier, time, in_grace, gateways, step): Reply = pipe
            .get(keys.seq())
            .get(keys.frontier())
            .cmd("TIME")
            .cmd("ZCOUNT")
            .arg(keys.gone())
            .arg(1)
            .arg("+inf")
            .smembers(keys.gateways())
            .get(keys.autopilot())
            .query_async(&mut conn)
            .await?;
        let Some(meta) = SaleMeta::from_fields(&meta) else {
            return Ok(None);
        };
        let now_ms = redis_time_ms(time);
        let (issued, frontier) = (issued.unwrap_or(0), frontier.unwrap_or(0));

        // Sessions per gateway, dead places ahead and recent admissions (the sale's slot), and
        // every pool's counts (a slot each), at once.
        let pool_keys: Vec<_> = meta.pools.iter().map(|p| self.keys.pool(sale, p)).collect();
        let pools_conn = conn.clone();
        let counts = PoolCounts::read_each(&pools_conn, &pool_keys);
        let mut pipe = redis::pipe();
        for gateway in &gateways {
            pipe.scard(keys.gateway_sessions(gateway));
        }
        pipe.cmd("ZCOUNT")
            .arg(keys.dead())
            .arg(format!("({frontier}"))
            .arg("+inf");
        pipe.cmd("XRANGE")
            .arg(keys.admits())
            .arg(now_ms - LATELY_MS)
            .arg("+");
        let (replies, counts): (Vec<redis::Value>, _) =
            tokio::try_join!(pipe.query_async(&mut conn), counts)?;
        let (sessions, rest) = replies.split_at(gateways.len());
        let live = sessions
            .iter()
            .map(|v| redis::from_redis_value::<u64>(v).unwrap_or(0))
            .sum();
        let dead_ahead = redis::from_redis_value(&rest[0]).unwrap_or(0);
        let recent: Vec<(String, Vec<String>)> =
            redis::from_redis_value(&rest[1]).unwrap_or_default();
        let admitted_lately = recent
            .iter()
            .filter_map(|(id, fields)| AdmitEntry::from_entry(id, fields))
            .map(|a| a.n)
            .sum();
        let pools = meta.pools.iter().cloned().zip(counts).collect();
        Ok(Some(SaleFigures {
            meta,
            now_ms,
            issued,
            frontier,
            in_grace,
            live,
            dead_ahead,
            admitted_lately,
            pools,
            autopilot_step: step.and_then(|json| serde_json::from_str(&json).ok()),
        }))
    }

    /// Sets the admission rate and/or the active cap, and turns the autopilot on (`Some(Some)`)
    /// or off (`Some(None)`); every gateway's controller reads them on its next tick. Off goes
    /// first; on goes in the same command as the rate and cap, so no step of the leader comes
    /// between them (and the leader writes only while the settings and the rate it started
    /// from are still the sale's).
    pub async fn set_admission(
        &self,
        sale: &str,
        (rate, cap): (Option<f64>, Option<u32>),
        autopilot: Option<Option<&Settings>>,
    ) -> redis::RedisResult<()> {
        let keys = self.keys.sale(sale);
        let mut conn = self.redis.clone();
        if let Some(None) = autopilot {
            let _: i64 = writes::autopilot_off(&keys).query_async(&mut conn).await?;
        }
        if let Some(cmd) = writes::rate_and_cap(&keys, rate, cap, autopilot.flatten()) {
            let _: i64 = cmd.query_async(&mut conn).await?;
        }
        Ok(())
    }

    /// The autopilot's notable changes waiting for the audit trail (`lua/autopilot.lua` queues
    /// them), oldest first, at most `most`: each one's stream id and entry (JSON).
    pub async fn autopilot_audit_queue(
        &self,
        sale: &str,
        most: usize,
    ) -> redis::RedisResult<Vec<(String, String)>> {
        let entries: Vec<(String, Vec<String>)> = redis::cmd("XRANGE")
            .arg(self.keys.sale(sale).autopilot_audit())
            .arg("-")
            .arg("+")
            .arg("COUNT")
            .arg(most)
            .query_async(&mut self.redis.clone())
            .await?;
        Ok(entries
            .into_iter()
            .filter_map(|(id, fields)| Some((id, autopilot_change(&fields)?)))
            .collect())
    }

    /// Deletes the queued changes `ids`, written to the audit trail.
    pub async fn autopilot_audit_done(&self, sale: &str, ids: &[String]) -> redis::RedisResult<()> {
        if ids.is_empty() {
            return Ok(());
        }
        let _: i64 = redis::cmd("XDEL")
            .arg(self.keys.sale(sale).autopilot_audit())
            .arg(ids)
            .query_async(&mut self.redis.clone())
            .await?;
        Ok(())
    }

    /// Sets the bot check and/or its difficulty; gateways apply it on their next tick.
    pub async fn set_challenge(
        &self,
        sale: &str,
        challenge: Option<floodgate_protocol::settings::ChallengeRule>,
        difficulty: Option<u8>,
    ) -> redis::RedisResult<()> {
        if let Some(cmd) = writes::challenge(&self.keys.sale(sale), challenge, difficulty) {
            let _: i64 = cmd.query_async(&mut self.redis.clone()).await?;
        }
        Ok(())
    }

    /// Pauses or resumes admission.
    pub async fn set_paused(&self, sale: &str, paused: bool) -> redis::RedisResult<()> {
        let _: i64 = writes::paused(&self.keys.sale(sale), paused)
            .query_async(&mut self.redis.clone())
            .await?;
        Ok(())
    }

    /// Opens the sale now, by Redis' clock: the pools' armed opening moves first, then the
    /// sale's, so from the moment admission can start every pool already refuses a re-arm and
    /// no live counter can be reset. Returns the new opening.
    pub async fn open_now(&self, sale: &str, pools: &[String]) -> redis::RedisResult<UnixMillis> {
        let now_ms = self.now_ms().await?;
        let mut conn = self.redis.clone();
        for pool in pools {
            let _: i64 = writes::pool_opens_at(&self.keys.pool(sale, pool), now_ms)
                .query_async(&mut conn)
                .await?;
        }
        let _: i64 = writes::sale_opens_at(&self.keys.sale(sale), now_ms)
            .query_async(&mut conn)
            .await?;
        Ok(now_ms)
    }
}
