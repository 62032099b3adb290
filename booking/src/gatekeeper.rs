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
//! that key, and a retry with it gets the refusal again and releases the claim (the crashed
//! attempt's deadline has passed by then, so it cannot hold seats). No crash can take a seat
//! twice, lose a granted hold or lose an event; the worst a crash does is keep a token bound to
//! its key until the key's next refused retry.
//!
//! The other pool scripts (`abort`, `confirm`, `release`, `expire`, `refund_result`) move a
//! reservation through its lifecycle; each writes its event in the same step. Every reply is
//! turned into a Rust type in exactly one function below.

use std::sync::Arc;

use floodgate_contract::keys::{Keys, PoolKeys};
use floodgate_contract::token::AdmissionClaims;
use floodgate_contract::UnixMillis;
use redis::aio::ConnectionManager;
use redis::Script;

/// The shared helpers every pool script starts with.
const LIB: &str = include_str!("../../lua/lib.lua");
/// The helpers of the sale's slot (Redis' clock), as the gateway's scripts have them.
const SALE_LIB: &str = include_str!("../../lua/sale_lib.lua");

fn pool_script(body: &str) -> Script {
    Script::new(&format!("{LIB}\n{body}"))
}

/// How long one attempt (one request's claim) may take to reach the pool: it can make a new
/// hold only this long after its claim. A healthy request takes one Redis round trip between
/// the two; ten seconds is several of Redis' response timeouts. A crashed attempt holds up
/// releasing its token's claim (for another attempt with the same key) this long at most.
pub const ATTEMPT_LIFETIME_MS: u64 = 10_000;

/// The Lua scripts this service runs, loaded once.
#[derive(Clone)]
pub struct Scripts {
    claim_token: Script,
    release_claim: Script,
    reserve: Script,
    ack: Script,
    abort: Script,
    start_payment: Script,
    confirm: Script,
    release: Script,
    expire: Script,
    refund_result: Script,
}

impl Default for Scripts {
    fn default() -> Self {
        Self {
            claim_token: Script::new(&format!(
                "{SALE_LIB}\n{}",
                include_str!("../../lua/claim_token.lua")
            )),
            release_claim: Script::new(include_str!("../../lua/release_claim.lua")),
            reserve: pool_script(include_str!("../../lua/reserve.lua")),
            ack: pool_script(include_str!("../../lua/ack.lua")),
            abort: pool_script(include_str!("../../lua/abort.lua")),
            start_payment: pool_script(include_str!("../../lua/start_payment.lua")),
            confirm: pool_script(include_str!("../../lua/confirm.lua")),
            release: pool_script(include_str!("../../lua/release.lua")),
            expire: pool_script(include_str!("../../lua/expire.lua")),
            refund_result: pool_script(include_str!("../../lua/refund_result.lua")),
        }
    }
}

impl Scripts {
    /// Loads every script into Redis' script cache up front. Without it, the first burst of
    /// requests after a start (or a Redis restart) all miss with NOSCRIPT and each sends the
    /// whole script text again: thousands of loads exactly when the rush begins.
    pub async fn preload(&self, conn: &mut ConnectionManager) -> redis::RedisResult<()> {
        for script in [
            &self.claim_token,
            &self.release_claim,
            &self.reserve,
            &self.ack,
            &self.abort,
            &self.start_payment,
            &self.confirm,
            &self.release,
            &self.expire,
            &self.refund_result,
        ] {
            script.load_async(conn).await?;
        }
        Ok(())
    }
}

/// A hold on seats, as granted (or replayed) by `reserve.lua`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hold {
    pub reservation_id: String,
    pub secret: String,
    pub seats: u32,
    pub hold_expires_at_ms: UnixMillis,
    pub reserved_at_ms: UnixMillis,
    /// The outbox entry of its `SeatReserved`, deleted once a request published it.
    pub outbox_entry: String,
    /// The `SeatReserved` envelope still waiting in the outbox, or `None` once it was acked.
    pub pending_event: Option<String>,
    /// True when this is an earlier request's result, returned for a retry.
    pub replayed: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum ReserveError {
    #[error("this sale is not open for booking")]
    UnknownSale,
    #[error("this sale has no such pool (train, date and class)")]
    UnknownPool,
    #[error("this pool is temporarily unavailable; retry shortly")]
    PoolUnavailable,
    /// The attempt reached the pool after its deadline; nothing was taken.
    #[error("the reservation took too long and was not made; retry with the same Idempotency-Key")]
    Late,
    #[error("not enough seats left in this pool ({available} available)")]
    SoldOut { available: u32 },
    #[error("this admission token has already been used for a reservation")]
    TokenSpent,
    #[error("this Idempotency-Key was used with a different request")]
    KeyReused,
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    #[error("unexpected script reply: {0}")]
    Protocol(String),
}

/// What `claim_token.lua` said.
#[derive(Debug, PartialEq, Eq)]
enum Claim {
    Claimed,
    Retry,
}

/// A claim, with the deadline of this attempt (Unix ms, Redis' clock).
#[derive(Debug, PartialEq, Eq)]
struct Claimed {
    claim: Claim,
    deadline_ms: UnixMillis,
}

impl Claim {
    fn parse(reply: &[String]) -> Result<Claimed, ReserveError> {
        let claim = match reply.first().map(String::as_str) {
            Some("claimed") => Claim::Claimed,
            Some("retry") => Claim::Retry,
            Some("spent") => return Err(ReserveError::TokenSpent),
            Some("mismatch") => return Err(ReserveError::KeyReused),
            Some("unknown_sale") => return Err(ReserveError::UnknownSale),
            Some("unknown_pool") => return Err(ReserveError::UnknownPool),
            _ => return Err(ReserveError::Protocol(format!("claim_token: {reply:?}"))),
        };
        let deadline_ms = reply
            .get(1)
            .and_then(|d| d.parse().ok())
            .ok_or_else(|| ReserveError::Protocol(format!("claim_token: {reply:?}")))?;
        Ok(Claimed { claim, deadline_ms })
    }
}

/// Why the pool made no hold, and what that proves about other attempts (release_claim.lua).
#[derive(Debug)]
struct Refusal {
    error: ReserveError,
    /// When the pool refused, by Redis' clock, or 0 if the refusal proves nothing (lost pool).
    at_ms: UnixMillis,
}

/// Turns `reserve.lua`'s reply into a hold or a refusal: the one place that knows its shape.
/// A refusal that made no hold comes with what the claim's release needs ([`Refusal`]).
fn parse_reserve(reply: &[String]) -> Result<Hold, Result<Refusal, ReserveError>> {
    let bad = || Err(ReserveError::Protocol(format!("reserve: {reply:?}")));
    let int = |i: usize| -> Option<i64> { reply.get(i).and_then(|s| s.parse().ok()) };
    match reply.first().map(String::as_str) {
        Some(kind @ ("reserved" | "replay")) if reply.len() == 8 => {
            let (Some(seats), Some(expires), Some(at)) = (int(3), int(4), int(5)) else {
                return Err(bad());
            };
            Ok(Hold {
                reservation_id: reply[1].clone(),
                secret: reply[2].clone(),
                seats: u32::try_from(seats).map_err(|_| bad())?,
                hold_expires_at_ms: expires,
                reserved_at_ms: at,
                outbox_entry: reply[6].clone(),
                pending_event: Some(reply[7].clone()).filter(|e| !e.is_empty()),
                replayed: kind == "replay",
            })
        }
        Some("sold_out") => match (int(1), int(2)) {
            (Some(available), Some(at_ms)) => Err(Ok(Refusal {
                error: ReserveError::SoldOut {
                    available: u32::try_from(available.max(0)).unwrap_or(u32::MAX),
                },
                at_ms,
            })),
            _ => Err(bad()),
        },
        Some("late") => match int(1) {
            Some(at_ms) => Err(Ok(Refusal {
                error: ReserveError::Late,
                at_ms,
            })),
            None => Err(bad()),
        },
        Some("spent") => Err(Err(ReserveError::TokenSpent)),
        // The sale lists the pool (claim_token checked), yet its state is missing: it was lost.
        // Whatever else it held is unknown, so the refusal proves nothing about other attempts.
        Some("not_armed") => Err(Ok(Refusal {
            error: ReserveError::PoolUnavailable,
            at_ms: 0,
        })),
        _ => Err(bad()),
    }
}

/// What `ack.lua` said about a reservation whose `SeatReserved` the broker acknowledged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ack {
    /// This call made it durable; `state` is what it is now (`held` unless it already ended).
    Acked {
        state: String,
    },
    /// An earlier request or the relay had made it durable.
    Already {
        state: String,
    },
    /// It was taken back before the ack: no 2xx may be given for it.
    Aborted,
    Unknown,
}

fn parse_ack(reply: &[String]) -> Result<Ack, redis::RedisError> {
    let (outcome, state) = pair("ack", reply)?;
    Ok(match outcome.as_str() {
        "acked" => Ack::Acked { state },
        "already" => Ack::Already { state },
        "aborted" => Ack::Aborted,
        "unknown" => Ack::Unknown,
        _ => return Err(protocol_error("ack", reply)),
    })
}

/// What `abort.lua` did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Abort {
    /// The hold was live and not durable: its seats are back.
    Aborted,
    /// Another request saw it acknowledged (and may have answered 201): it stands.
    Durable { state: String },
    /// It had already ended otherwise (or is unknown): nothing changed.
    NotHeld { state: String },
    /// The pool's state is missing: nothing changed.
    PoolUnavailable,
}

fn parse_abort(reply: &[String]) -> Result<Abort, redis::RedisError> {
    let detail = || reply.get(1).cloned().unwrap_or_default();
    Ok(match reply.first().map(String::as_str) {
        Some("aborted") => Abort::Aborted,
        Some("durable") => Abort::Durable { state: detail() },
        Some("not_held") => Abort::NotHeld { state: detail() },
        Some("not_armed") => Abort::PoolUnavailable,
        _ => return Err(protocol_error("abort", reply)),
    })
}

/// What `start_payment.lua` said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PaymentStart {
    /// The payment is recorded as the one that may buy the hold.
    Pending,
    NotHeld {
        state: String,
    },
    Unknown,
    PoolUnavailable,
}

fn parse_start_payment(reply: &[String]) -> Result<PaymentStart, redis::RedisError> {
    Ok(match reply.first().map(String::as_str) {
        Some("pending") => PaymentStart::Pending,
        Some("not_held") => PaymentStart::NotHeld {
            state: reply.get(1).cloned().unwrap_or_default(),
        },
        Some("unknown") => PaymentStart::Unknown,
        Some("not_armed") => PaymentStart::PoolUnavailable,
        _ => return Err(protocol_error("start_payment", reply)),
    })
}

/// The reservation a payment-provider webhook event is about.
pub struct WebhookTarget<'a> {
    pub sale: &'a str,
    pub pool: &'a str,
    pub reservation_id: &'a str,
    /// The provider's event id.
    pub event: &'a str,
}

/// A reservation request, already authenticated and validated.
pub struct ReserveRequest<'a> {
    pub claims: &'a AdmissionClaims,
    pub pool: &'a str,
    pub seats: u32,
    pub idempotency_key: &'a str,
}

/// A payment as the provider reported it: what a confirmation is checked against.
#[derive(Clone, Copy, Debug)]
pub struct Paid<'a> {
    pub payment_id: &'a str,
    pub amount_minor: i64,
    pub currency: &'a str,
}

/// Outcome of a successful payment's webhook (`confirm.lua`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Confirmation {
    /// The seats are sold (now, or already by this same payment).
    Confirmed,
    /// Refund the payment. `reason`: the hold's state if it was not live (expired, released,
    /// aborted, sold by another payment), or, for a live hold left as it was,
    /// `unexpected_payment` (not the payment started for it) or `wrong_amount`.
    RefundRequired {
        reason: String,
    },
    /// This webhook event was processed before, with this outcome.
    Duplicate(String),
    /// The pool's state is missing: nothing can be decided until it is rebuilt.
    PoolUnavailable,
    Unknown,
}

/// Outcome of a failed payment's webhook (`release.lua`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Release {
    Released,
    /// Not held any more (the state is given), or not the payment started for it: a late, out of
    /// order or stray failure changes nothing.
    Ignored(String),
    Duplicate(String),
    PoolUnavailable,
    Unknown,
}

fn pair(script: &str, reply: &[String]) -> Result<(String, String), redis::RedisError> {
    match reply {
        [a, b] => Ok((a.clone(), b.clone())),
        _ => Err(protocol_error(script, reply)),
    }
}

fn protocol_error(script: &str, reply: &[String]) -> redis::RedisError {
    redis::RedisError::from((
        redis::ErrorKind::TypeError,
        "unexpected script reply",
        format!("{script}: {reply:?}"),
    ))
}

fn parse_confirm(reply: &[String]) -> Result<Confirmation, redis::RedisError> {
    let (outcome, detail) = pair("confirm", reply)?;
    Ok(match outcome.as_str() {
        "confirmed" => Confirmation::Confirmed,
        "refund_required" => Confirmation::RefundRequired { reason: detail },
        "duplicate" => Confirmation::Duplicate(detail),
        "not_armed" => Confirmation::PoolUnavailable,
        "unknown" => Confirmation::Unknown,
        _ => return Err(protocol_error("confirm", reply)),
    })
}

fn parse_release(reply: &[String]) -> Result<Release, redis::RedisError> {
    let (outcome, detail) = pair("release", reply)?;
    Ok(match outcome.as_str() {
        "released" => Release::Released,
        "ignored" => Release::Ignored(detail),
        "duplicate" => Release::Duplicate(detail),
        "not_armed" => Release::PoolUnavailable,
        "unknown" => Release::Unknown,
        _ => return Err(protocol_error("release", reply)),
    })
}

/// A reservation as stored in Redis.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredReservation {
    pub id: String,
    pub secret: String,
    pub seats: u32,
    pub state: String,
    pub hold_expires_at_ms: UnixMillis,
    pub reserved_at_ms: UnixMillis,
    pub payment_id: Option<String>,
    /// Refunds by payment id: `pending`, `succeeded` or `failed`.
    pub refunds: Vec<(String, String)>,
    pub fare_minor: i64,
    pub currency: String,
}

/// Runs the gatekeeper's scripts; cheap to clone.
#[derive(Clone)]
pub struct Gatekeeper {
    redis: ConnectionManager,
    keys: Keys,
    scripts: Arc<Scripts>,
}

impl Gatekeeper {
    /// Builds the gatekeeper and loads its scripts into Redis.
    pub async fn connect(redis: ConnectionManager, keys: Keys) -> redis::RedisResult<Self> {
        let scripts = Scripts::default();
        scripts.preload(&mut redis.clone()).await?;
        Ok(Self {
            redis,
            keys,
            scripts: Arc::new(scripts),
        })
    }

    pub fn keys(&self) -> &Keys {
        &self.keys
    }

    pub fn redis(&self) -> ConnectionManager {
        self.redis.clone()
    }

    /// Invokes a pool script with the common KEYS layout (see `lua/lib.lua`).
    fn pool_invocation<'a>(
        script: &'a Script,
        pool: &PoolKeys,
        reservation_id: &str,
        extra: &str,
    ) -> redis::ScriptInvocation<'a> {
        let mut invocation = script.prepare_invoke();
        invocation
            .key(pool.config())
            .key(pool.available())
            .key(pool.held())
            .key(pool.sold())
            .key(pool.holds())
            .key(pool.expiries())
            .key(pool.outbox())
            .key(pool.reservation(reservation_id))
            .key(extra);
        invocation
    }

    /// Claims the token, then reserves in the pool; gives the claim back on a refusal.
    #[tracing::instrument(skip_all, fields(sale = %req.claims.sale, pool = %req.pool, ticket = req.claims.ticket))]
    pub async fn reserve(
        &self,
        req: &ReserveRequest<'_>,
        new_id: &str,
        new_secret: &str,
    ) -> Result<Hold, ReserveError> {
        let sale_keys = self.keys.sale(&req.claims.sale);
        let token_key = sale_keys.token(&req.claims.jti);
        let fingerprint = format!("{}|{}", req.pool, req.seats);
        let attempt = uuid::Uuid::new_v4().simple().to_string();
        let mut conn = self.redis.clone();

        // The claim is kept for as long as the token can be presented: its expiry plus the clock
        // skew allowed between the booking service and Redis.
        let claim_until = req
            .claims
            .exp_ms
            .saturating_add(floodgate_contract::settings::CLOCK_SKEW_MS);
        let claim: Vec<String> = self
            .scripts
            .claim_token
            .key(sale_keys.meta())
            .key(&token_key)
            .key(sale_keys.tokens())
            .arg(req.idempotency_key)
            .arg(&fingerprint)
            .arg(claim_until)
            .arg(req.pool)
            .arg(req.claims.exp_ms)
            .arg(&attempt)
            .arg(ATTEMPT_LIFETIME_MS)
            .invoke_async(&mut conn)
            .await?;
        let claimed = Claim::parse(&claim)?;

        let pool_keys = self.keys.pool(&req.claims.sale, req.pool);
        let reply: Vec<String> = Self::pool_invocation(
            &self.scripts.reserve,
            &pool_keys,
            new_id,
            &pool_keys.token_reservation(&req.claims.jti),
        )
        .arg(&req.claims.jti)
        .arg(req.idempotency_key)
        .arg(req.seats)
        .arg(new_id)
        .arg(new_secret)
        .arg(req.claims.ticket)
        .arg(claimed.deadline_ms)
        .invoke_async(&mut conn)
        .await?;

        match parse_reserve(&reply) {
            Ok(hold) => Ok(hold),
            Err(Err(e)) => Err(e),
            Err(Ok(refusal)) => {
                // No hold was made: the token is not spent. If this release is lost (crash,
                // Redis blip), the claim stays with this key and a retry releases it.
                let released: Result<i64, _> = self
                    .scripts
                    .release_claim
                    .key(&token_key)
                    .key(sale_keys.meta())
                    .key(sale_keys.tokens())
                    .arg(req.idempotency_key)
                    .arg(req.claims.exp_ms)
                    .arg(&attempt)
                    .arg(refusal.at_ms)
                    .invoke_async(&mut conn)
                    .await;
                if let Err(e) = released {
                    tracing::warn!(error = %e, claim = ?claimed.claim, "token claim not released after refusal");
                }
                Err(refusal.error)
            }
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
        let reply: Vec<String> =
            Self::pool_invocation(&self.scripts.ack, &keys, reservation_id, &keys.relay())
                .arg(outbox_entry)
                .invoke_async(&mut self.redis.clone())
                .await?;
        parse_ack(&reply)
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
        let reply: Vec<String> = Self::pool_invocation(
            &self.scripts.abort,
            &keys,
            reservation_id,
            &keys.token_reservation(jti),
        )
        .invoke_async(&mut self.redis.clone())
        .await?;
        parse_abort(&reply)
    }

    /// Runs a webhook script (`confirm`, `release`, `refund_result`): its KEYS[9] remembers the
    /// provider's event, so a redelivery changes nothing.
    async fn webhook_script(
        &self,
        script: &Script,
        target: &WebhookTarget<'_>,
        args: &[&str],
    ) -> redis::RedisResult<Vec<String>> {
        let keys = self.keys.pool(target.sale, target.pool);
        let mut invocation = Self::pool_invocation(
            script,
            &keys,
            target.reservation_id,
            &keys.webhook(target.event),
        );
        for arg in args {
            invocation.arg(*arg);
        }
        invocation.invoke_async(&mut self.redis.clone()).await
    }

    /// A payment succeeded (`confirm.lua`): it buys the hold only if it is the payment started
    /// for it, for exactly its price.
    #[tracing::instrument(skip_all, fields(reservation = %target.reservation_id, payment = %paid.payment_id))]
    pub async fn confirm(
        &self,
        target: &WebhookTarget<'_>,
        paid: &Paid<'_>,
    ) -> redis::RedisResult<Confirmation> {
        let amount = paid.amount_minor.to_string();
        let reply = self
            .webhook_script(
                &self.scripts.confirm,
                target,
                &[paid.payment_id, &amount, paid.currency],
            )
            .await?;
        parse_confirm(&reply)
    }

    /// A payment failed (`release.lua`).
    #[tracing::instrument(skip_all, fields(reservation = %target.reservation_id, %payment_id))]
    pub async fn release(
        &self,
        target: &WebhookTarget<'_>,
        payment_id: &str,
    ) -> redis::RedisResult<Release> {
        let reply = self
            .webhook_script(&self.scripts.release, target, &[payment_id])
            .await?;
        parse_release(&reply)
    }

    /// The provider's verdict on a refund (`refund_result.lua`). Returns its outcome word.
    pub async fn refund_result(
        &self,
        target: &WebhookTarget<'_>,
        payment_id: &str,
        succeeded: bool,
    ) -> redis::RedisResult<String> {
        let outcome = if succeeded { "succeeded" } else { "failed" };
        let reply = self
            .webhook_script(&self.scripts.refund_result, target, &[payment_id, outcome])
            .await?;
        let outcome = reply
            .into_iter()
            .next()
            .ok_or_else(|| protocol_error("refund_result", &[]))?;
        if outcome == "not_armed" {
            // Nothing decided: the provider redelivers until the pool is rebuilt.
            return Err(redis::RedisError::from((
                redis::ErrorKind::ResponseError,
                "the pool's state is missing",
            )));
        }
        Ok(outcome)
    }

    /// Expires one due hold (`expire.lua`); true if this call expired it.
    pub async fn expire(
        &self,
        sale: &str,
        pool: &str,
        reservation_id: &str,
    ) -> redis::RedisResult<bool> {
        let keys = self.keys.pool(sale, pool);
        let reply: Vec<String> =
            Self::pool_invocation(&self.scripts.expire, &keys, reservation_id, &keys.relay())
                .arg(reservation_id)
                .invoke_async(&mut self.redis.clone())
                .await?;
        // "not_armed" (a lost pool) expires nothing: the rebuild restores the hold's expiry.
        Ok(reply.first().map(String::as_str) == Some("expired"))
    }

    /// Reads a reservation, with its pool's fare.
    pub async fn reservation(
        &self,
        sale: &str,
        pool: &str,
        reservation_id: &str,
    ) -> redis::RedisResult<Option<StoredReservation>> {
        let keys = self.keys.pool(sale, pool);
        let (fields, fare): (
            std::collections::HashMap<String, String>,
            (Option<i64>, Option<String>),
        ) = redis::pipe()
            .hgetall(keys.reservation(reservation_id))
            .hget(keys.config(), &["fare_minor", "currency"])
            .query_async(&mut self.redis.clone())
            .await?;
        if fields.is_empty() {
            return Ok(None);
        }
        let get = |k: &str| fields.get(k).cloned().unwrap_or_default();
        let int = |k: &str| get(k).parse::<i64>().unwrap_or(0);
        let mut refunds: Vec<(String, String)> = fields
            .iter()
            .filter_map(|(k, v)| k.strip_prefix("refund:").map(|p| (p.to_owned(), v.clone())))
            .collect();
        refunds.sort();
        Ok(Some(StoredReservation {
            id: get("id"),
            secret: get("secret"),
            seats: int("seats") as u32,
            state: get("state"),
            hold_expires_at_ms: int("expires_ms"),
            reserved_at_ms: int("at_ms"),
            payment_id: fields.get("payment_id").cloned(),
            refunds,
            fare_minor: fare.0.unwrap_or(0),
            currency: fare.1.unwrap_or_default(),
        }))
    }

    /// Records the payment started at the provider for a held reservation (`start_payment.lua`):
    /// the one payment that may buy it (starting a payment changes no seat).
    pub async fn start_payment(
        &self,
        sale: &str,
        pool: &str,
        reservation_id: &str,
        payment_id: &str,
    ) -> redis::RedisResult<PaymentStart> {
        let keys = self.keys.pool(sale, pool);
        let reply: Vec<String> = Self::pool_invocation(
            &self.scripts.start_payment,
            &keys,
            reservation_id,
            &keys.relay(),
        )
        .arg(payment_id)
        .invoke_async(&mut self.redis.clone())
        .await?;
        parse_start_payment(&reply)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    fn refusal(reply: &[&str]) -> Refusal {
        match parse_reserve(&strings(reply)) {
            Err(Ok(refusal)) => refusal,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn reserve_replies_parse_into_holds_and_refusals() {
        let hold = parse_reserve(&strings(&[
            "reserved", "r1", "s1", "2", "900", "100", "1-0", "{}",
        ]))
        .unwrap();
        assert_eq!((hold.seats, hold.outbox_entry.as_str()), (2, "1-0"));
        assert!(!hold.replayed);
        let replay = parse_reserve(&strings(&[
            "replay", "r1", "s1", "2", "900", "100", "1-0", "",
        ]))
        .unwrap();
        assert!(replay.replayed);
        assert_eq!(
            (hold.pending_event.as_deref(), replay.pending_event),
            (Some("{}"), None)
        );
        assert!(matches!(
            refusal(&["sold_out", "1", "5000"]),
            Refusal {
                error: ReserveError::SoldOut { available: 1 },
                at_ms: 5000
            }
        ));
        assert!(matches!(
            refusal(&["late", "7000"]),
            Refusal {
                error: ReserveError::Late,
                at_ms: 7000
            }
        ));
        assert!(
            matches!(
                refusal(&["not_armed"]),
                Refusal {
                    error: ReserveError::PoolUnavailable,
                    at_ms: 0
                }
            ),
            "a lost pool proves nothing about other attempts"
        );
        assert!(matches!(
            parse_reserve(&strings(&["spent"])),
            Err(Err(ReserveError::TokenSpent))
        ));
        for junk in [
            vec!["reserved", "r1"],
            vec![],
            vec!["sold_out", "1"],
            vec!["late"],
        ] {
            assert!(
                matches!(
                    parse_reserve(&strings(&junk)),
                    Err(Err(ReserveError::Protocol(_)))
                ),
                "{junk:?}"
            );
        }
    }

    #[test]
    fn claim_replies_parse() {
        assert_eq!(
            Claim::parse(&strings(&["claimed", "123"])).unwrap(),
            Claimed {
                claim: Claim::Claimed,
                deadline_ms: 123
            }
        );
        assert_eq!(
            Claim::parse(&strings(&["retry", "9"])).unwrap().claim,
            Claim::Retry
        );
        assert!(matches!(
            Claim::parse(&strings(&["spent"])),
            Err(ReserveError::TokenSpent)
        ));
        assert!(matches!(
            Claim::parse(&strings(&["mismatch"])),
            Err(ReserveError::KeyReused)
        ));
        assert!(matches!(
            Claim::parse(&strings(&["unknown_sale"])),
            Err(ReserveError::UnknownSale)
        ));
        assert!(matches!(
            Claim::parse(&strings(&["unknown_pool"])),
            Err(ReserveError::UnknownPool)
        ));
        assert!(matches!(
            Claim::parse(&strings(&["?"])),
            Err(ReserveError::Protocol(_))
        ));
        assert!(matches!(
            Claim::parse(&strings(&["claimed"])),
            Err(ReserveError::Protocol(_))
        ));
    }

    #[test]
    fn confirm_release_ack_and_abort_replies_parse() {
        assert_eq!(
            parse_confirm(&strings(&["confirmed", "held"])).unwrap(),
            Confirmation::Confirmed
        );
        assert_eq!(
            parse_confirm(&strings(&["refund_required", "expired"])).unwrap(),
            Confirmation::RefundRequired {
                reason: "expired".into()
            }
        );
        assert_eq!(
            parse_confirm(&strings(&["not_armed", ""])).unwrap(),
            Confirmation::PoolUnavailable
        );
        assert!(parse_confirm(&strings(&["confirmed"])).is_err());
        assert_eq!(
            parse_release(&strings(&["ignored", "sold"])).unwrap(),
            Release::Ignored("sold".into())
        );
        assert!(parse_release(&strings(&["what", "x"])).is_err());
        assert_eq!(
            parse_ack(&strings(&["acked", "held"])).unwrap(),
            Ack::Acked {
                state: "held".into()
            }
        );
        assert_eq!(
            parse_ack(&strings(&["already", "sold"])).unwrap(),
            Ack::Already {
                state: "sold".into()
            }
        );
        assert_eq!(parse_ack(&strings(&["aborted", ""])).unwrap(), Ack::Aborted);
        assert!(parse_ack(&strings(&["acked"])).is_err());
        assert_eq!(
            parse_abort(&strings(&["durable", "held"])).unwrap(),
            Abort::Durable {
                state: "held".into()
            }
        );
        assert_eq!(
            parse_abort(&strings(&["not_armed"])).unwrap(),
            Abort::PoolUnavailable
        );
        assert!(parse_abort(&strings(&["?"])).is_err());
        assert_eq!(
            parse_start_payment(&strings(&["not_held", "sold"])).unwrap(),
            PaymentStart::NotHeld {
                state: "sold".into()
            }
        );
    }
}
