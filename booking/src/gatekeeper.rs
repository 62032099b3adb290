//! The gatekeeper: every seat decision, made atomically in Redis by the scripts in `lua/`.
//!
//! A reservation is two single-slot steps:
//! 1. `claim_token` (the sale's slot) binds the admission token to this request's
//!    `Idempotency-Key` and fingerprint: one reservation per token.
//! 2. `reserve` (the pool's slot) replays an earlier answer for this token and key, or checks
//!    stock, takes the seats, records a hold and writes `SeatReserved` to the pool's outbox.
//! 3. If the pool refused (sold out), `release_claim` gives the token back so the client may try
//!    another class.
//!
//! Crash points: after 1, the claim stays and a retry with the same key goes on to 2 ("retry");
//! after 2, the hold, its record and its event exist, a retry replays them and the relay
//! publishes the event if no request did; between a refusal in 2 and 3, the token stays claimed by
//! that key, and a retry with it gets the refusal again and releases the claim. No crash can take a
//! seat twice, lose a granted hold or lose an event.
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

fn pool_script(body: &str) -> Script {
    Script::new(&format!("{LIB}\n{body}"))
}

/// The Lua scripts this service runs, loaded once.
#[derive(Clone)]
pub struct Scripts {
    claim_token: Script,
    release_claim: Script,
    reserve: Script,
    abort: Script,
    confirm: Script,
    release: Script,
    expire: Script,
    refund_result: Script,
}

impl Default for Scripts {
    fn default() -> Self {
        Self {
            claim_token: Script::new(include_str!("../../lua/claim_token.lua")),
            release_claim: Script::new(include_str!("../../lua/release_claim.lua")),
            reserve: pool_script(include_str!("../../lua/reserve.lua")),
            abort: pool_script(include_str!("../../lua/abort.lua")),
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
            &self.abort,
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

impl Claim {
    fn parse(reply: &str) -> Result<Self, ReserveError> {
        match reply {
            "claimed" => Ok(Claim::Claimed),
            "retry" => Ok(Claim::Retry),
            "spent" => Err(ReserveError::TokenSpent),
            "mismatch" => Err(ReserveError::KeyReused),
            "unknown_sale" => Err(ReserveError::UnknownSale),
            "unknown_pool" => Err(ReserveError::UnknownPool),
            other => Err(ReserveError::Protocol(format!("claim_token: {other}"))),
        }
    }
}

/// Turns `reserve.lua`'s reply into a hold or a refusal: the one place that knows its shape.
fn parse_reserve(reply: &[String]) -> Result<Hold, ReserveError> {
    let bad = || ReserveError::Protocol(format!("reserve: {reply:?}"));
    let int = |i: usize| -> Result<i64, ReserveError> {
        reply.get(i).and_then(|s| s.parse().ok()).ok_or_else(bad)
    };
    match reply.first().map(String::as_str) {
        Some(kind @ ("reserved" | "replay")) if reply.len() == 8 => Ok(Hold {
            reservation_id: reply[1].clone(),
            secret: reply[2].clone(),
            seats: u32::try_from(int(3)?).map_err(|_| bad())?,
            hold_expires_at_ms: int(4)?,
            reserved_at_ms: int(5)?,
            outbox_entry: reply[6].clone(),
            pending_event: Some(reply[7].clone()).filter(|e| !e.is_empty()),
            replayed: kind == "replay",
        }),
        Some("sold_out") => Err(ReserveError::SoldOut {
            available: u32::try_from(int(1)?.max(0)).map_err(|_| bad())?,
        }),
        Some("spent") => Err(ReserveError::TokenSpent),
        // The sale lists the pool (claim_token checked), yet its state is missing: it was lost.
        Some("not_armed") => Err(ReserveError::PoolUnavailable),
        _ => Err(bad()),
    }
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

/// Outcome of a successful payment's webhook (`confirm.lua`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Confirmation {
    /// The seats are sold (now, or already by this same payment).
    Confirmed,
    /// The hold was not live (`lost_to`: expired, released, aborted, sold); refund the payment.
    RefundRequired {
        lost_to: String,
    },
    /// This webhook event was processed before, with this outcome.
    Duplicate(String),
    Unknown,
}

/// Outcome of a failed payment's webhook (`release.lua`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Release {
    Released,
    /// Not held any more (the state is given): a late or out-of-order failure changes nothing.
    Ignored(String),
    Duplicate(String),
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
        "refund_required" => Confirmation::RefundRequired { lost_to: detail },
        "duplicate" => Confirmation::Duplicate(detail),
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

/// How long a token's use record is kept: past the longest token lifetime, so a replayed token
/// is recognised as spent for as long as it could verify at all, and a client's retry finds its
/// claim. A day is generous and costs about 100 bytes per admitted user.
const CLAIM_RECORD_TTL_MS: u64 = 24 * 60 * 60 * 1000;

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
        let mut conn = self.redis.clone();

        let claim: String = self
            .scripts
            .claim_token
            .key(sale_keys.meta())
            .key(&token_key)
            .key(sale_keys.tokens())
            .arg(req.idempotency_key)
            .arg(&fingerprint)
            .arg(CLAIM_RECORD_TTL_MS)
            .arg(req.pool)
            .arg(req.claims.exp_ms)
            .invoke_async(&mut conn)
            .await?;
        let claim = Claim::parse(&claim)?;

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
        .invoke_async(&mut conn)
        .await?;

        match parse_reserve(&reply) {
            Err(refusal @ ReserveError::SoldOut { .. }) => {
                // A refusal does not spend the token. If this release is lost (crash, Redis
                // blip), the claim stays with this key and a retry releases it.
                let released: Result<i64, _> = self
                    .scripts
                    .release_claim
                    .key(&token_key)
                    .key(sale_keys.meta())
                    .key(sale_keys.tokens())
                    .arg(req.idempotency_key)
                    .arg(req.claims.exp_ms)
                    .invoke_async(&mut conn)
                    .await;
                if let Err(e) = released {
                    tracing::warn!(error = %e, ?claim, "token claim not released after refusal");
                }
                Err(refusal)
            }
            other => other,
        }
    }

    /// Takes back a hold whose `SeatReserved` could not be acknowledged (`abort.lua`).
    /// Returns whether the seats went back (false: the hold had already ended otherwise).
    #[tracing::instrument(skip_all, fields(%reservation_id))]
    pub async fn abort(
        &self,
        sale: &str,
        pool: &str,
        jti: &str,
        reservation_id: &str,
    ) -> redis::RedisResult<bool> {
        let keys = self.keys.pool(sale, pool);
        let reply: Vec<String> = Self::pool_invocation(
            &self.scripts.abort,
            &keys,
            reservation_id,
            &keys.token_reservation(jti),
        )
        .invoke_async(&mut self.redis.clone())
        .await?;
        Ok(reply.first().map(String::as_str) == Some("aborted"))
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

    /// A payment succeeded (`confirm.lua`).
    #[tracing::instrument(skip_all, fields(reservation = %target.reservation_id, %payment_id))]
    pub async fn confirm(
        &self,
        target: &WebhookTarget<'_>,
        payment_id: &str,
    ) -> redis::RedisResult<Confirmation> {
        let reply = self
            .webhook_script(&self.scripts.confirm, target, &[payment_id])
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
        reply
            .into_iter()
            .next()
            .ok_or_else(|| protocol_error("refund_result", &[]))
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

    /// Records the provider's payment id on a reservation (starting a payment changes no seat).
    pub async fn set_pending_payment(
        &self,
        sale: &str,
        pool: &str,
        reservation_id: &str,
        payment_id: &str,
    ) -> redis::RedisResult<()> {
        let keys = self.keys.pool(sale, pool);
        redis::cmd("HSET")
            .arg(keys.reservation(reservation_id))
            .arg("pending_payment_id")
            .arg(payment_id)
            .query_async(&mut self.redis.clone())
            .await
    }

    /// Removes an outbox entry whose event a request already saw acknowledged.
    pub async fn ack_outbox(&self, sale: &str, pool: &str, entry: &str) -> redis::RedisResult<()> {
        let _: i64 = redis::cmd("XDEL")
            .arg(self.keys.pool(sale, pool).outbox())
            .arg(entry)
            .query_async(&mut self.redis.clone())
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
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
            parse_reserve(&strings(&["sold_out", "1"])),
            Err(ReserveError::SoldOut { available: 1 })
        ));
        assert!(matches!(
            parse_reserve(&strings(&["not_armed"])),
            Err(ReserveError::PoolUnavailable)
        ));
        assert!(matches!(
            parse_reserve(&strings(&["spent"])),
            Err(ReserveError::TokenSpent)
        ));
        assert!(matches!(
            parse_reserve(&strings(&["reserved", "r1"])),
            Err(ReserveError::Protocol(_))
        ));
        assert!(matches!(parse_reserve(&[]), Err(ReserveError::Protocol(_))));
    }

    #[test]
    fn claim_replies_parse() {
        assert_eq!(Claim::parse("claimed").unwrap(), Claim::Claimed);
        assert_eq!(Claim::parse("retry").unwrap(), Claim::Retry);
        assert!(matches!(
            Claim::parse("spent"),
            Err(ReserveError::TokenSpent)
        ));
        assert!(matches!(
            Claim::parse("mismatch"),
            Err(ReserveError::KeyReused)
        ));
        assert!(matches!(
            Claim::parse("unknown_sale"),
            Err(ReserveError::UnknownSale)
        ));
        assert!(matches!(
            Claim::parse("unknown_pool"),
            Err(ReserveError::UnknownPool)
        ));
        assert!(matches!(Claim::parse("?"), Err(ReserveError::Protocol(_))));
    }

    #[test]
    fn confirm_and_release_replies_parse() {
        assert_eq!(
            parse_confirm(&strings(&["confirmed", "held"])).unwrap(),
            Confirmation::Confirmed
        );
        assert_eq!(
            parse_confirm(&strings(&["refund_required", "expired"])).unwrap(),
            Confirmation::RefundRequired {
                lost_to: "expired".into()
            }
        );
        assert!(parse_confirm(&strings(&["confirmed"])).is_err());
        assert_eq!(
            parse_release(&strings(&["ignored", "sold"])).unwrap(),
            Release::Ignored("sold".into())
        );
        assert!(parse_release(&strings(&["what", "x"])).is_err());
    }
}
