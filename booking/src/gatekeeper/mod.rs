//! The gatekeeper: every seat decision, made atomically in Redis by the scripts in `lua/`.
//!
//! A reservation is two single-slot steps:
//! 1. `claim_token` (the sale's slot) binds the admission token to this request's
//!    `Idempotency-Key` and fingerprint: one reservation per token. Each attempt registers with a
//!    deadline ([`ATTEMPT_LIFETIME_MS`]).
//! 2. `reserve` (the pool's slot) replays an earlier answer for this token and key, or, before
//!    the attempt's deadline, checks stock, takes the seats, records a hold and writes
//!    `SeatReserved` to the pool's outbox.
//! 3. If the pool made no hold (sold out, its state lost, the attempt too late),
//!    `release_claim` gives the token back so the client may try another class, unless another
//!    attempt with the same key may still be taking seats (it keeps the claim; see the script).
//!
//! Crash points: after 1, the claim stays and a retry with the same key goes on to 2 ("retry");
//! after 2, the hold, its record and its event exist, a retry replays them and the relay
//! publishes the event if no request did; between a refusal in 2 and 3, the token stays claimed by
//! that key, and a retry with it gets the refusal again and releases the claim. No crash can take
//! a seat twice, lose a granted hold or lose an event; the worst a crash does is keep a token
//! bound to its key until the key's next refused retry.
//!
//! A retry does not wait out the attempts before it: each attempt has a stamp ordering it after
//! every earlier one of its key, and a retry refused by the pool leaves a fence there that turns
//! the earlier ones away (`reserve.lua`). Once the fence is on the pool's replicas, the retry's
//! refusal gives the token back at once (`release_claim.lua`), so a client whose first try was
//! lost to a failover or an unacknowledged event (a 503) gets its definitive answer, and its
//! pass back, from the retry the protocol tells it to make.
//!
//! The steps and the answer to a refusal are in [`reserving`]. The other pool scripts (`abort`,
//! `confirm`, `release`, `expire`, `refund_result`) move a reservation through its lifecycle;
//! each writes its event in the same step. Every reply is turned into a Rust type in exactly one
//! impl beside the type (`holds`, `replies`, `claims`, and `outcomes` for the pool-keeping
//! scripts').
//!
//! Every script is declared once in [`scripts`] (the keys and arguments several share, in
//! `layouts`); the reservation's own calls are made in [`calls`].
//!
//! Besides the hot path: [`arming`] (loading a sale into Redis), [`repair`] (reconciliation and
//! rebuilding a lost pool), [`ending`] (a sale's end and the purge of its state), and the relay's, reaper's and ops API's typed calls (`upkeep`,
//! `ops`). Nothing outside this module reads a pool's keys or a script's reply.

pub mod arming;
mod buyers;
pub mod calls;
mod claims;
pub mod ending;
mod holds;
mod layouts;
mod ops;
mod outcomes;
mod paying;
pub mod repair;
mod replies;
mod requests;
mod reserving;
pub mod scripts;
mod upkeep;

use std::sync::Arc;
use std::time::Duration;

use floodgate_platform::autopilot::window::{self, SaleWindows};
use floodgate_platform::keys::Keys;
use floodgate_platform::replicas::{NotReplicated, Replication};
use floodgate_platform::runtime::RedisConn;
use floodgate_platform::script::LuaScript as _;
use floodgate_platform::scripts::PoolLayout;

pub use holds::{Hold, ReserveError};
pub use ops::{SaleFigures, LATELY_MS};
pub use replies::{
    Abort, Ack, Confirmation, Expiry, PaymentStart, RefundVerdict, Release, StartedPayment,
    StoredReservation,
};
pub use requests::{Paid, ReserveRequest, WebhookTarget};
pub use scripts::{preload, ATTEMPT_LIFETIME_MS};
pub use upkeep::{OutboxEntry, Sequence};

/// Runs the gatekeeper's scripts; cheap to clone.
#[derive(Clone)]
pub struct Gatekeeper {
    redis: RedisConn,
    keys: Keys,
    /// Whether (and how long) a write waits for replicas before anything is promised on it.
    replication: Replication,
    /// How long each sale's reservations' pool scripts took (`reserve.lua` on the pool's
    /// primary, the round trip included): the admission autopilot's script signal
    /// (`crate::health`).
    script_times: Arc<SaleWindows>,
}

impl Gatekeeper {
    /// The Redis connection it decides on (for the readiness check).
    pub fn redis(&self) -> &RedisConn {
        &self.redis
    }

    pub fn keys(&self) -> &Keys {
        &self.keys
    }

    /// The pool scripts' times, by sale.
    pub fn script_times(&self) -> &SaleWindows {
        &self.script_times
    }

    /// Builds the gatekeeper and loads its scripts into Redis.
    pub async fn connect(redis: RedisConn, keys: Keys) -> redis::RedisResult<Self> {
        preload(&mut redis.clone()).await?;
        Ok(Self {
            replication: Replication::new(redis.clone(), 0, Duration::ZERO, keys.prefix()),
            redis,
            keys,
            // Read only beside a sale's reservations, so kept no longer than their window.
            script_times: Arc::new(SaleWindows::new(window::SPAN, window::SPAN)),
        })
    }

    /// Waits for `min_replicas` replicas (at most `timeout`) before promising anything on a write
    /// (see [`floodgate_platform::replicas`]); 0, the default, waits for none.
    pub fn with_replicas(mut self, min_replicas: u32, timeout: Duration) -> Self {
        self.replication = Replication::new(
            self.redis.clone(),
            min_replicas,
            timeout,
            self.keys.prefix(),
        );
        self
    }

    /// Every write this process made on the pool's slot is on enough replicas: before a webhook
    /// is answered 2xx, a payment started, a relayed event published.
    pub async fn pool_replicated(&self, sale: &str, pool: &str) -> Result<(), NotReplicated> {
        if !self.replication.required() {
            return Ok(());
        }
        let keys = self.keys.pool(sale, pool);
        self.replication.replicated(&keys.config()).await
    }

    /// A reservation's writes are on enough replicas: its token's claim (the sale's slot), its
    /// hold (the pool's) and, when it counted seats against its buyer, the buyer's record (a
    /// slot of its own).
    pub async fn hold_replicated(
        &self,
        sale: &str,
        pool: &str,
        hold: &Hold,
    ) -> Result<(), NotReplicated> {
        // Every reservation comes through here: on a Redis without replicas, not even the keys
        // are built.
        if !self.replication.required() {
            return Ok(());
        }
        let meta = self.keys.sale(sale).meta();
        let pool = self.keys.pool(sale, pool).config();
        match &hold.buyer_record {
            Some(record) => {
                self.replication
                    .all_replicated(&[&meta, &pool, record])
                    .await
            }
            None => self.replication.both_replicated(&meta, &pool).await,
        }
    }

    /// Records that a reservation's `SeatReserved` was acknowledged (`ack.lua`): it is durable,
    /// can no longer be aborted, and its outbox entry goes.
    #[tracing::instrument(skip_all, fields(%reservation_id))]
    pub async fn ack(
        &self,
        sale: &str,
        pool: &str,
        reservation_id: &str,
        outbox_entry: &str,
    ) -> redis::RedisResult<Ack> {
        let keys = self.keys.pool(sale, pool);
        Ok(calls::ack(&keys, reservation_id, outbox_entry)
            .run(&mut self.redis.clone())
            .await?)
    }

    /// Takes back a hold whose `SeatReserved` could not be acknowledged (`abort.lua`), unless it
    /// became durable meanwhile or had already ended.
    #[tracing::instrument(skip_all, fields(%reservation_id))]
    pub async fn abort(
        &self,
        sale: &str,
        pool: &str,
        jti: &str,
        reservation_id: &str,
    ) -> redis::RedisResult<Abort> {
        let keys = self.keys.pool(sale, pool);
        Ok(scripts::Abort {
            pool: PoolLayout::new(&keys, reservation_id),
            pointer: keys.token_reservation(jti),
        }
        .run(&mut self.redis.clone())
        .await?)
    }

    /// Runs a webhook script (`confirm`, `release`, `refund_result`), made by `script` from the
    /// target's layout and its key that remembers the provider's event (so a redelivery changes
    /// nothing).
    async fn webhook_script<S: floodgate_platform::script::LuaScript>(
        &self,
        target: &WebhookTarget<'_>,
        script: impl FnOnce(PoolLayout, String) -> S,
    ) -> redis::RedisResult<S::Reply> {
        let keys = self.keys.pool(target.sale, target.pool);
        let reply = script(
            PoolLayout::new(&keys, target.reservation_id),
            keys.webhook(target.event),
        )
        .run(&mut self.redis.clone())
        .await?;
        // The provider is answered 2xx only on a decision a failover cannot undo; otherwise it
        // redelivers, and the script (idempotent per provider event) answers the same.
        self.pool_replicated(target.sale, target.pool)
            .await
            .map_err(not_replicated)?;
        Ok(reply)
    }

    /// A payment succeeded (`confirm.lua`): it buys the hold only if it is the payment started
    /// for it, for exactly its price.
    #[tracing::instrument(skip_all, fields(reservation = %target.reservation_id, payment = %paid.payment_id))]
    pub async fn confirm(
        &self,
        target: &WebhookTarget<'_>,
        paid: &Paid<'_>,
    ) -> redis::RedisResult<Confirmation> {
        self.webhook_script(target, |pool, event| scripts::Confirm {
            pool,
            event,
            payment_id: paid.payment_id,
            amount_minor: paid.amount_minor,
            currency: paid.currency,
        })
        .await
    }

    /// A payment failed (`release.lua`).
    #[tracing::instrument(skip_all, fields(reservation = %target.reservation_id, %payment_id))]
    pub async fn release(
        &self,
        target: &WebhookTarget<'_>,
        payment_id: &str,
    ) -> redis::RedisResult<Release> {
        self.webhook_script(target, |pool, event| scripts::Release {
            pool,
            event,
            payment_id,
        })
        .await
    }

    /// The provider's verdict on a refund (`refund_result.lua`).
    pub async fn refund_result(
        &self,
        target: &WebhookTarget<'_>,
        payment_id: &str,
        succeeded: bool,
    ) -> redis::RedisResult<RefundVerdict> {
        let outcome = if succeeded { "succeeded" } else { "failed" };
        let verdict = self
            .webhook_script(target, |pool, event| scripts::RefundResult {
                pool,
                event,
                payment_id,
                outcome,
            })
            .await?;
        if verdict == RefundVerdict::PoolUnavailable {
            // Nothing decided: the provider redelivers until the pool is rebuilt.
            return Err(redis::RedisError::from((
                redis::ErrorKind::ResponseError,
                "the pool's state is missing",
            )));
        }
        Ok(verdict)
    }

    /// Expires one due hold (`expire.lua`); true if this call expired it.
    pub async fn expire(
        &self,
        sale: &str,
        pool: &str,
        reservation_id: &str,
    ) -> redis::RedisResult<bool> {
        let keys = self.keys.pool(sale, pool);
        let expiry = scripts::Expire {
            pool: PoolLayout::new(&keys, reservation_id),
            unused: keys.relay(),
            reservation_id,
        }
        .run(&mut self.redis.clone())
        .await?;
        Ok(expiry == Expiry::Expired)
    }
}

/// A write that could not be shown to be on enough replicas, as the Redis error it is to callers
/// (a 503: retry).
fn not_replicated(e: NotReplicated) -> redis::RedisError {
    redis::RedisError::from((
        redis::ErrorKind::TryAgain,
        "write not replicated",
        e.to_string(),
    ))
}

/// A script's reply as the tests of its parser write it.
#[cfg(test)]
fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}
