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
//!
//! Both walk the sales that have not ended. A sale that ended (`floodgate-booking sale end`)
//! holds no seat, so the reaper leaves it alone; the relay looks at its outboxes only every
//! [`ENDED_SALES_EVERY`], because a late webhook (a refund's result, say) still writes events there.

use std::sync::Arc;
use std::time::Duration;

use floodgate_protocol::events::Envelope;
use floodgate_protocol::now_millis;
use tokio_util::sync::CancellationToken;

use crate::gatekeeper::{Gatekeeper, OutboxEntry, Sequence};
use crate::publish::{PublishError, Publisher};

/// Most entries one relay pass sends for one pool, and most holds one reaper pass expires: keeps
/// a pass short so every pool gets its turn.
const BATCH: usize = 256;

/// How often the relay looks at the outboxes of sales that ended: their events are rare (late
/// webhooks) and may wait this long, and the sales that ended cost nothing in between.
pub const ENDED_SALES_EVERY: Duration = Duration::from_secs(5);

/// Why a relay or reaper pass stopped (the next pass tries again).
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    #[error("broker: {0}")]
    Broker(#[from] PublishError),
    #[error(transparent)]
    NotReplicated(#[from] floodgate_platform::replicas::NotReplicated),
    #[error("postgres: {0}")]
    Db(#[from] sqlx::Error),
}

pub struct Workers {
    pub gatekeeper: Gatekeeper,
    pub publisher: Publisher,
    pub instance_id: Arc<str>,
    pub relay_interval: Duration,
    pub reaper_interval: Duration,
    pub relay_grace: Duration,
    /// Where the consumer records each pool's event sequence (the lost-writes check).
    pub db: sqlx::PgPool,
}

impl Workers {
    pub async fn run(self, shutdown: CancellationToken) {
        let mut relay = tokio::time::interval(self.relay_interval);
        let mut reap = tokio::time::interval(self.reaper_interval);
        relay.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        reap.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        let mut failing = false;
        let ended_every =
            (ENDED_SALES_EVERY.as_millis() / self.relay_interval.as_millis().max(1)).max(1) as u64;
        let mut relays = 0u64;
        loop {
            let relaying = tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = relay.tick() => true,
                _ = reap.tick() => false,
            };
            let with_ended = relaying && relays % ended_every == 0;
            relays += u64::from(relaying);
            let result = self.pass(relaying, with_ended).await;
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

    /// One relay or reaper pass over every pool of every armed sale that has not ended (and, with
    /// `with_ended`, of those that have); the last failure, if any (one pool's trouble does not
    /// stop the others').
    async fn pass(&self, relaying: bool, with_ended: bool) -> Result<(), WorkerError> {
        if relaying && self.publisher.health().is_down() {
            // Every send would wait out its timeout and stay queued in the producer: the
            // broker's probe says when it is back (crate::broker_health).
            return Ok(());
        }
        let mut pools = self.gatekeeper.armed_pools().await?;
        let mut result = Ok(());
        if !relaying {
            result = self.check_sequences(&pools).await;
        }
        if with_ended {
            pools.extend(self.gatekeeper.ended_pools().await?);
        }
        for (sale, pool) in pools {
            let pass = if relaying {
                self.relay_pool(&sale, &pool).await
            } else {
                self.reap_pool(&sale, &pool).await
            };
            if let Err(e) = pass {
                result = Err(e);
            }
        }
        result
    }

    #[tracing::instrument(skip_all, level = "debug", fields(%sale, %pool))]
    async fn relay_pool(&self, sale: &str, pool: &str) -> Result<(), WorkerError> {
        let entries = self.gatekeeper.outbox(sale, pool, BATCH).await?;
        if entries.is_empty() {
            return Ok(());
        }
        // Several intervals long, so a slow pass keeps it; another instance takes over a pool
        // whose relay died within this time.
        let lease_ms = (self.relay_interval.as_millis() as u64 * 10).max(2_000);
        if !self
            .gatekeeper
            .relay_lease(sale, pool, &self.instance_id, lease_ms)
            .await?
        {
            return Ok(());
        }
        // The entries read are on a replica before they leave for Kafka: the lease's renewal
        // above is a write on this process's connection to the pool's primary, made after the
        // read, so one WAIT covers every entry read (whoever wrote it). A primary lost now can
        // not leave Kafka with an event its successor never had.
        self.gatekeeper.pool_replicated(sale, pool).await?;
        let young_after = now_millis() - self.relay_grace.as_millis() as i64;
        let mut acked = Vec::new();
        let published = self
            .publish_in_order(sale, pool, &entries, young_after, &mut acked)
            .await;
        if !acked.is_empty() {
            tracing::debug!(count = acked.len(), "relayed outbox events");
            metrics::counter!("floodgate_outbox_relayed_total").increment(acked.len() as u64);
        }
        self.gatekeeper
            .drop_outbox_entries(sale, pool, &acked)
            .await?;
        published
    }

    /// Publishes `entries` in order, collecting in `acked` those to drop from the outbox; stops
    /// at the first failure so this pool's later events do not overtake the failed one.
    async fn publish_in_order(
        &self,
        sale: &str,
        pool: &str,
        entries: &[OutboxEntry],
        young_after: i64,
        acked: &mut Vec<String>,
    ) -> Result<(), WorkerError> {
        for entry in entries {
            let Some(event) = &entry.event else {
                acked.push(entry.id.clone());
                continue;
            };
            // Read once: what the event is decides whether it waits, what follows its publish.
            let envelope = Envelope::from_json(event.as_bytes()).ok();
            if is_young_reservation(entry, envelope.as_ref(), young_after) {
                // The request that wrote it may still be publishing it; come back later. Later
                // entries may go first: every event carries its whole reservation and the
                // consumer never moves a booking backwards, so their order does not matter.
                continue;
            }
            self.publisher.publish(sale, pool, event).await?;
            if let Some(envelope) = &envelope {
                self.return_buyer_seats(sale, envelope).await?;
            }
            match seat_reserved(envelope.as_ref()) {
                // A hold whose event is acknowledged is durable: no request may abort it now
                // (ack.lua also removes the entry).
                Some(reservation) => {
                    self.gatekeeper
                        .ack(sale, pool, &reservation, &entry.id)
                        .await?;
                }
                None => acked.push(entry.id.clone()),
            }
        }
        Ok(())
    }

    /// A hold that ended unsold for good (expired, or its payment failed) no longer counts
    /// against its buyer's limit. Done here, as the relay carries the event that ended it, so
    /// every cause is covered by one step; giving back twice (a relay retry) changes nothing.
    async fn return_buyer_seats(&self, sale: &str, envelope: &Envelope) -> Result<(), WorkerError> {
        let data = envelope.event.data();
        if let (true, Some(buyer)) = (envelope.event.frees_buyer_seats(), &data.buyer) {
            self.gatekeeper
                .give_buyer_seats(sale, buyer, &data.token_id)
                .await?;
        }
        Ok(())
    }

    /// Refuses every pool whose Redis lost writes in a failover: its event sequence is behind
    /// the highest number the consumer applied from Kafka, or it gave a number twice. One query
    /// for all pools, one small script per pool that Kafka has events of.
    async fn check_sequences(&self, pools: &[(String, String)]) -> Result<(), WorkerError> {
        let mut sales: Vec<&str> = pools.iter().map(|(sale, _)| sale.as_str()).collect();
        sales.dedup();
        if sales.is_empty() {
            return Ok(());
        }
        let known: Vec<(String, String, i64, bool)> = sqlx::query_as(
            "select sale_id, pool_id, seq, diverged_at is not null from pool_sequences
             where sale_id = any($1)",
        )
        .bind(&sales)
        .fetch_all(&self.db)
        .await?;
        for (sale, pool, kafka_seq, reused) in known {
            if !pools.iter().any(|(s, p)| *s == sale && *p == pool) {
                continue;
            }
            let found = self
                .gatekeeper
                .check_sequence(&sale, &pool, kafka_seq, reused)
                .await?;
            if found == (Sequence::Refused { newly: true }) {
                tracing::error!(%sale, %pool, kafka_seq, reused, "pool lost writes in a Redis failover: refusing new reservations until `floodgate-booking sale reconcile --repair` rebuilds it");
                metrics::counter!("floodgate_pools_lost_writes_total").increment(1);
            }
        }
        Ok(())
    }

    #[tracing::instrument(skip_all, level = "debug", fields(%sale, %pool))]
    async fn reap_pool(&self, sale: &str, pool: &str) -> Result<(), WorkerError> {
        // The local clock only picks candidates; the script decides by Redis' clock.
        let due = self
            .gatekeeper
            .due_holds(sale, pool, now_millis(), BATCH)
            .await?;
        for reservation in due {
            if self.gatekeeper.expire(sale, pool, &reservation).await? {
                tracing::debug!(%reservation, "hold expired");
                metrics::counter!("floodgate_holds_expired_total").increment(1);
            }
        }
        Ok(())
    }
}

/// The reservation a `SeatReserved` event is about; `None` for any other event.
fn seat_reserved(envelope: Option<&Envelope>) -> Option<String> {
    let envelope = envelope?;
    (envelope.event.kind() == "SeatReserved").then(|| envelope.event.data().reservation_id.clone())
}

/// A `SeatReserved` written less than the grace period ago.
fn is_young_reservation(
    entry: &OutboxEntry,
    envelope: Option<&Envelope>,
    young_after: i64,
) -> bool {
    entry.written_ms() > young_after && envelope.is_some_and(|e| e.event.kind() == "SeatReserved")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(event: &str) -> Option<Envelope> {
        Envelope::from_json(event.as_bytes()).ok()
    }

    const RESERVED: &str = r#"{"v":1,"id":"p~r.reserved","at_ms":1,"sale":"s","pool":"p","type":"SeatReserved","data":{"reservation_id":"p~r","token_id":"t","ticket":1,"seats":1,"reserved_at_ms":1,"hold_expires_at_ms":2}}"#;

    #[test]
    fn seat_reserved_events_name_their_reservation() {
        assert_eq!(
            seat_reserved(read(RESERVED).as_ref()).as_deref(),
            Some("p~r")
        );
        assert_eq!(
            seat_reserved(read(&RESERVED.replace("SeatReserved", "HoldExpired")).as_ref()),
            None
        );
        assert_eq!(seat_reserved(read("{").as_ref()), None);
    }

    #[test]
    fn only_young_reservations_wait() {
        let entry = OutboxEntry {
            id: "1000-0".into(),
            event: None,
        };
        assert!(is_young_reservation(&entry, read(RESERVED).as_ref(), 999));
        assert!(!is_young_reservation(&entry, read(RESERVED).as_ref(), 1000));
        let expired = RESERVED.replace("SeatReserved", "HoldExpired");
        assert!(!is_young_reservation(&entry, read(&expired).as_ref(), 999));
    }
}
