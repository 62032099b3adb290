//! The durable-201 sequence, the invariant the booking API stands on: a reservation is answered
//! 201 only once its `SeatReserved` is acknowledged by the broker and the hold is marked durable
//! while still live; otherwise the hold is taken back (unless another request made it durable
//! first) and the answer is a refusal.
//!
//! ```text
//! reserve (claim + pool) ──▶ on replicas? ──▶ publish SeatReserved ──ack──▶ ack.lua: durable? held?
//!                                │ no             │ fails / times out          │
//!                                ▼                ▼                            ▼
//!                             abort.lua ◀─────────┘        mark on replicas? ──▶ 201 (else 503,
//!                                                                              a retry replays)
//!                            abort.lua: taken back ──▶ 503 (a retry with the same key reserves
//!                                       │                 afresh)
//!                                       └ durable already (another request's ack) ──▶ 201
//! ```
//!
//! Every step is atomic in Redis, and `abort.lua` never takes back a durable hold, so two
//! requests with the same key (a client's retry racing its first try) can never end with one
//! answered 201 and the other aborting that hold.

use std::future::Future;
use std::time::Duration;

use floodgate_protocol::reservation::ReservationState;

use crate::gatekeeper::{Abort, Ack, Gatekeeper, Hold, ReserveError, ReserveRequest};
use crate::publish::{PublishError, Publisher};

/// Where events are made durable: the Kafka producer in the service, something scripted in a
/// property test of the sequence itself.
pub trait EventLog {
    /// Sends one event keyed by its pool; resolves once the log acknowledged it.
    fn publish(
        &self,
        sale: &str,
        pool: &str,
        event: &str,
    ) -> impl Future<Output = Result<(), PublishError>> + Send;
}

impl EventLog for Publisher {
    fn publish(
        &self,
        sale: &str,
        pool: &str,
        event: &str,
    ) -> impl Future<Output = Result<(), PublishError>> + Send {
        Publisher::publish(self, sale, pool, event)
    }
}

/// Why no 201 can be given.
#[derive(Debug, thiserror::Error)]
pub enum NotReserved {
    /// The gatekeeper refused or failed.
    #[error(transparent)]
    Refused(#[from] ReserveError),
    /// The event could not be made durable in time; the hold was taken back (or stays for the
    /// relay if Redis was unreachable too). A retry with the same key reserves afresh.
    #[error("the reservation could not be made durable: {0}")]
    NotDurable(String),
    /// The hold could not be shown to be on enough Redis replicas in time; it was taken back.
    #[error("the reservation could not be replicated: {0}")]
    NotReplicated(String),
    /// The hold ended (expired, say) before its event was acknowledged: nothing live to promise.
    #[error("the hold ended ({state}) before it was made durable")]
    Ended { state: ReservationState },
}

/// Reserves, makes the hold durable, and returns it only if it may be answered 201.
///
/// On a Redis with replicas, nothing leaves Redis before it is on them (see
/// [`floodgate_platform::replicas`]): the claim and the hold are replicated before the event is
/// published (a primary lost a moment later cannot leave Kafka with a hold Redis forgot), and
/// the durable mark before the 201 (a mark lost in a failover would let a retry abort a hold
/// already promised).
pub async fn reserve_durably(
    gatekeeper: &Gatekeeper,
    log: &impl EventLog,
    delivery_timeout: Duration,
    request: &ReserveRequest<'_>,
    new_id: &str,
    new_secret: &str,
) -> Result<Hold, NotReserved> {
    let hold = gatekeeper.reserve(request, new_id, new_secret).await?;
    let (sale, pool) = (request.claims.sale.as_str(), request.pool);
    if let Err(e) = gatekeeper.hold_replicated(sale, pool, &hold).await {
        return abort(
            gatekeeper,
            request,
            hold,
            NotReserved::NotReplicated(e.to_string()),
        )
        .await;
    }
    // The SeatReserved event is in the pool's outbox already (same script as the hold). Publish
    // it now, also on a replay whose earlier attempt may have failed; the relay would get there
    // too, but later.
    if let Some(event) = &hold.pending_event {
        let cause =
            match tokio::time::timeout(delivery_timeout, log.publish(sale, pool, event)).await {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(e.to_string()),
                Err(_) => Some("timed out".to_owned()),
            };
        if let Some(cause) = cause {
            return abort(gatekeeper, request, hold, NotReserved::NotDurable(cause)).await;
        }
    }
    // Acknowledged (now, or earlier by another request or the relay): mark it durable, and
    // answer by what the reservation is at that instant.
    let acked = gatekeeper
        .ack(sale, pool, &hold.reservation_id, &hold.outbox_entry)
        .await
        .map_err(ReserveError::from)?;
    if matches!(acked, Ack::Acked { .. } | Ack::Already { .. }) {
        // No abort now: the event is out. A retry with the same key replays the hold, and the
        // relay marks it durable again if the mark was lost.
        gatekeeper
            .pool_replicated(sale, pool)
            .await
            .map_err(|e| NotReserved::NotReplicated(e.to_string()))?;
    }
    match acked {
        Ack::Acked {
            state: ReservationState::Held,
        } => Ok(hold),
        // Another request (or the relay) made it durable and may have answered 201: the same
        // answer again, whatever happened since (idempotency).
        Ack::Already { .. } => Ok(hold),
        Ack::Acked { state } => Err(NotReserved::Ended { state }),
        Ack::Aborted => Err(NotReserved::NotDurable(
            "another request with the same key took the hold back".into(),
        )),
        Ack::Unknown => Err(ReserveError::Protocol(format!(
            "reservation {} vanished after its hold",
            hold.reservation_id
        ))
        .into()),
    }
}

/// Takes back a hold that could not be made durable (its event not acknowledged, or its writes
/// not replicated: `why`), unless another request made it durable.
async fn abort(
    gatekeeper: &Gatekeeper,
    request: &ReserveRequest<'_>,
    hold: Hold,
    why: NotReserved,
) -> Result<Hold, NotReserved> {
    let cause = why.to_string();
    let id = &hold.reservation_id;
    tracing::warn!(%cause, reservation_id = %id, "SeatReserved not acknowledged; aborting the hold");
    let claims = request.claims;
    match gatekeeper
        .abort(&claims.sale, request.pool, &claims.jti, id)
        .await
    {
        Ok(Abort::Aborted) => {
            metrics::counter!("floodgate_reservations_aborted_total").increment(1);
            Err(why)
        }
        // A retry of the same request got its ack meanwhile: the reservation is durable, and
        // that request may have answered 201; this one gives the same answer (as a replay
        // does, whatever became of the hold since), once everything it stands on is on the
        // replicas: the claim, the hold and its durable mark, the buyer's count (this process's
        // own mark write makes each wait count, whoever wrote them).
        Ok(Abort::Durable { .. }) => {
            gatekeeper
                .hold_replicated(&claims.sale, request.pool, &hold)
                .await
                .map_err(|e| NotReserved::NotReplicated(e.to_string()))?;
            Ok(hold)
        }
        Ok(Abort::NotHeld {
            state: None | Some(ReservationState::Aborted),
        }) => Err(why),
        Ok(Abort::NotHeld { state: Some(state) }) => Err(NotReserved::Ended { state }),
        Ok(Abort::PoolUnavailable) => Err(ReserveError::PoolUnavailable.into()),
        Err(e) => {
            // The hold stays; the relay publishes its event later, and the client's retry with
            // the same key then gets its 201.
            tracing::error!(error = %e, reservation_id = %id, "hold not aborted; the relay will publish it");
            Err(why)
        }
    }
}
