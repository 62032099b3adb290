//! Background work of every booking instance: the outbox relay and the hold reaper.
//!
//! - The **relay** publishes what is in each pool's outbox to Kafka, in order, and deletes what
//!   the broker acknowledged. Requests publish their own `SeatReserved` at once; the relay is
//!   the path for every other event and the safety net for a request that died before its
//!   publish. It leaves a `SeatReserved` alone for a grace period (longer than a request waits
//!   for its ack) so it does not race the request that wrote it. One instance at a time drains a
//!   pool (a lease per pool), which keeps a pool's events in order on its partition.
//! - The **reaper** expires holds whose time has passed (`expire.lua`). Any number of instances
//!   may reap the same pool: the script only expires a hold that is still held and due.

use std::sync::Arc;
use std::time::Duration;

use floodgate_contract::events::Envelope;
use floodgate_contract::now_millis;
use redis::streams::StreamRangeReply;
use redis::Script;
use tokio_util::sync::CancellationToken;

use crate::gatekeeper::Gatekeeper;
use crate::publish::Publisher;

/// Most entries one relay pass sends for one pool, and most holds one reaper pass expires: keeps
/// a pass short so every pool gets its turn.
const BATCH: usize = 256;

pub struct Workers {
    pub gatekeeper: Gatekeeper,
    pub publisher: Publisher,
    pub instance_id: Arc<str>,
    pub relay_interval: Duration,
    pub reaper_interval: Duration,
    pub relay_grace_ms: u64,
}

impl Workers {
    pub async fn run(self, shutdown: CancellationToken) {
        let lease = Script::new(include_str!("../../lua/lease.lua"));
        let mut relay = tokio::time::interval(self.relay_interval);
        let mut reap = tokio::time::interval(self.reaper_interval);
        relay.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        reap.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        let mut failing = false;
        loop {
            let relaying = tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = relay.tick() => true,
                _ = reap.tick() => false,
            };
            let result = match self.pools().await {
                Ok(pools) => {
                    let mut result = Ok(());
                    for (sale, pool) in &pools {
                        let pass = if relaying {
                            self.relay_pool(&lease, sale, pool).await
                        } else {
                            self.reap_pool(sale, pool).await
                        };
                        if let Err(e) = pass {
                            result = Err(e);
                        }
                    }
                    result
                }
                Err(e) => Err(e.to_string()),
            };
            match result {
                Ok(()) if failing => {
                    tracing::info!("relay and reaper recovered");
                    failing = false;
                }
                Err(e) if !failing => {
                    tracing::warn!(error = %e, "relay or reaper pass failed; retrying");
                    failing = true;
                }
                _ => {}
            }
        }
    }

    /// Every pool of every armed sale.
    async fn pools(&self) -> redis::RedisResult<Vec<(String, String)>> {
        let keys = self.gatekeeper.keys();
        let mut conn = self.gatekeeper.redis();
        let sales: Vec<String> = redis::cmd("SMEMBERS")
            .arg(keys.sales())
            .query_async(&mut conn)
            .await?;
        let mut pools = Vec::new();
        for sale in sales {
            let list: Option<String> = redis::cmd("HGET")
                .arg(keys.sale(&sale).meta())
                .arg("pools")
                .query_async(&mut conn)
                .await?;
            for pool in list
                .unwrap_or_default()
                .split(',')
                .filter(|p| !p.is_empty())
            {
                pools.push((sale.clone(), pool.to_owned()));
            }
        }
        Ok(pools)
    }

    #[tracing::instrument(skip_all, level = "debug", fields(%sale, %pool))]
    async fn relay_pool(&self, lease: &Script, sale: &str, pool: &str) -> Result<(), String> {
        let keys = self.gatekeeper.keys().pool(sale, pool);
        let mut conn = self.gatekeeper.redis();
        let pending: usize = redis::cmd("XLEN")
            .arg(keys.outbox())
            .query_async(&mut conn)
            .await
            .map_err(|e| e.to_string())?;
        if pending == 0 {
            return Ok(());
        }
        // Several intervals long, so a slow pass keeps it; another instance takes over a pool
        // whose relay died within this time.
        let lease_ms = (self.relay_interval.as_millis() as u64 * 10).max(2_000);
        let fence: String = lease
            .key(keys.relay())
            .key(keys.relay_epoch())
            .arg(&*self.instance_id)
            .arg(lease_ms)
            .invoke_async(&mut conn)
            .await
            .map_err(|e| e.to_string())?;
        if fence.is_empty() {
            return Ok(());
        }
        let entries: StreamRangeReply = redis::cmd("XRANGE")
            .arg(keys.outbox())
            .arg("-")
            .arg("+")
            .arg("COUNT")
            .arg(BATCH)
            .query_async(&mut conn)
            .await
            .map_err(|e| e.to_string())?;
        let young_after = now_millis() - self.relay_grace_ms as i64;
        let mut acked = Vec::new();
        for entry in &entries.ids {
            let Some(event) = entry.get::<String>("e") else {
                acked.push(entry.id.clone());
                continue;
            };
            if is_young_reservation(&entry.id, &event, young_after) {
                // The request that wrote it may still be publishing it; come back later. Later
                // entries may go first: every event carries its whole reservation and the
                // consumer never moves a booking backwards, so their order does not matter.
                continue;
            }
            if let Err(e) = self.publisher.publish(sale, pool, &event).await {
                // Stop here so this pool's later events do not overtake the failed one.
                self.delete(&keys.outbox(), &acked).await?;
                return Err(e.to_string());
            }
            match seat_reserved(&event) {
                // A hold whose event is acknowledged is durable: no request may abort it now
                // (ack.lua also removes the entry).
                Some(reservation) => {
                    self.gatekeeper
                        .ack(sale, pool, &reservation, &entry.id)
                        .await
                        .map_err(|e| e.to_string())?;
                }
                None => acked.push(entry.id.clone()),
            }
        }
        if !acked.is_empty() {
            tracing::debug!(count = acked.len(), "relayed outbox events");
            metrics::counter!("floodgate_outbox_relayed_total").increment(acked.len() as u64);
        }
        self.delete(&keys.outbox(), &acked).await
    }

    async fn delete(&self, outbox: &str, ids: &[String]) -> Result<(), String> {
        if ids.is_empty() {
            return Ok(());
        }
        let _: i64 = redis::cmd("XDEL")
            .arg(outbox)
            .arg(ids)
            .query_async(&mut self.gatekeeper.redis())
            .await
            .map_err(|e| e.to_string())?;
        Ok(())
    }

    #[tracing::instrument(skip_all, level = "debug", fields(%sale, %pool))]
    async fn reap_pool(&self, sale: &str, pool: &str) -> Result<(), String> {
        let keys = self.gatekeeper.keys().pool(sale, pool);
        // The local clock only picks candidates; the script decides by Redis' clock.
        let due: Vec<String> = redis::cmd("ZRANGEBYSCORE")
            .arg(keys.expiries())
            .arg("-inf")
            .arg(now_millis())
            .arg("LIMIT")
            .arg(0)
            .arg(BATCH)
            .query_async(&mut self.gatekeeper.redis())
            .await
            .map_err(|e| e.to_string())?;
        for reservation in due {
            if self
                .gatekeeper
                .expire(sale, pool, &reservation)
                .await
                .map_err(|e| e.to_string())?
            {
                tracing::debug!(%reservation, "hold expired");
                metrics::counter!("floodgate_holds_expired_total").increment(1);
            }
        }
        Ok(())
    }
}

/// The reservation a `SeatReserved` event is about; `None` for any other event.
fn seat_reserved(event: &str) -> Option<String> {
    let envelope = Envelope::from_json(event.as_bytes()).ok()?;
    (envelope.event.kind() == "SeatReserved").then(|| envelope.event.data().reservation_id.clone())
}

/// A `SeatReserved` written less than the grace period ago (stream ids start with their Unix ms).
fn is_young_reservation(entry_id: &str, event: &str, young_after: i64) -> bool {
    let written_ms = entry_id
        .split('-')
        .next()
        .and_then(|ms| ms.parse::<i64>().ok())
        .unwrap_or(0);
    written_ms > young_after
        && Envelope::from_json(event.as_bytes()).is_ok_and(|e| e.event.kind() == "SeatReserved")
}

#[cfg(test)]
mod tests {
    use super::*;

    const RESERVED: &str = r#"{"v":1,"id":"p~r.reserved","at_ms":1,"sale":"s","pool":"p","type":"SeatReserved","data":{"reservation_id":"p~r","token_id":"t","ticket":1,"seats":1,"reserved_at_ms":1,"hold_expires_at_ms":2}}"#;

    #[test]
    fn seat_reserved_events_name_their_reservation() {
        assert_eq!(seat_reserved(RESERVED).as_deref(), Some("p~r"));
        assert_eq!(
            seat_reserved(&RESERVED.replace("SeatReserved", "HoldExpired")),
            None
        );
        assert_eq!(seat_reserved("{"), None);
    }

    #[test]
    fn only_young_reservations_wait() {
        assert!(is_young_reservation("1000-0", RESERVED, 999));
        assert!(!is_young_reservation("1000-0", RESERVED, 1000));
        let expired = RESERVED.replace("SeatReserved", "HoldExpired");
        assert!(!is_young_reservation("1000-0", &expired, 999));
    }
}
