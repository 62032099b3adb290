//! The gatekeeper: a reservation decided atomically in Redis, in two single-slot steps.
//!
//! 1. `claim_token` (the sale's slot) binds the admission token to this request's
//!    `Idempotency-Key` and fingerprint: one reservation per token.
//! 2. `reserve` (the pool's slot) replays an earlier result for this token and key, or checks
//!    stock, takes the seats and records a hold with its expiry.
//! 3. If the pool refused (sold out, unknown pool), `release_claim` gives the token back so the
//!    client may try another class.
//!
//! Crash points: after 1, the claim stays and a retry with the same key goes on to 2 ("retry");
//! after 2, the hold and its reservation record exist and a retry replays them; between a refusal
//! in 2 and 3, the token stays claimed by that key, and a retry with it gets the refusal again and
//! releases the claim. No crash can take a seat twice or lose a granted hold.

use floodgate_contract::keys::Keys;
use floodgate_contract::token::AdmissionClaims;
use floodgate_contract::UnixMillis;
use redis::aio::ConnectionManager;
use redis::Script;

/// The Lua scripts this service runs, loaded once from `lua/`.
#[derive(Clone)]
pub struct Scripts {
    claim_token: Script,
    release_claim: Script,
    reserve: Script,
}

impl Default for Scripts {
    fn default() -> Self {
        Self {
            claim_token: Script::new(include_str!("../../lua/claim_token.lua")),
            release_claim: Script::new(include_str!("../../lua/release_claim.lua")),
            reserve: Script::new(include_str!("../../lua/reserve.lua")),
        }
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
    /// True when this is an earlier request's result, returned for a retry.
    pub replayed: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum ReserveError {
    #[error("this sale is not open for booking")]
    UnknownSale,
    #[error("this sale has no such pool (train, date and class)")]
    UnknownPool,
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
        Some(kind @ ("reserved" | "replay")) if reply.len() == 6 => Ok(Hold {
            reservation_id: reply[1].clone(),
            secret: reply[2].clone(),
            seats: u32::try_from(int(3)?).map_err(|_| bad())?,
            hold_expires_at_ms: int(4)?,
            reserved_at_ms: int(5)?,
            replayed: kind == "replay",
        }),
        Some("sold_out") => Err(ReserveError::SoldOut {
            available: u32::try_from(int(1)?.max(0)).map_err(|_| bad())?,
        }),
        Some("spent") => Err(ReserveError::TokenSpent),
        Some("not_armed") => Err(ReserveError::UnknownPool),
        _ => Err(bad()),
    }
}

/// A reservation request, already authenticated and validated.
pub struct ReserveRequest<'a> {
    pub claims: &'a AdmissionClaims,
    pub pool: &'a str,
    pub seats: u32,
    pub idempotency_key: &'a str,
}

/// Runs the gatekeeper's scripts; cheap to clone.
#[derive(Clone)]
pub struct Gatekeeper {
    redis: ConnectionManager,
    keys: Keys,
    scripts: Scripts,
}

/// How long a token's use record is kept: past the longest token lifetime, so a replayed token
/// is recognised as spent for as long as it could verify at all, and a client's retry finds its
/// claim. A day is generous and costs about 100 bytes per admitted user.
const CLAIM_RECORD_TTL_MS: u64 = 24 * 60 * 60 * 1000;

impl Gatekeeper {
    pub fn new(redis: ConnectionManager, keys: Keys) -> Self {
        Self {
            redis,
            keys,
            scripts: Scripts::default(),
        }
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
            .arg(req.idempotency_key)
            .arg(&fingerprint)
            .arg(CLAIM_RECORD_TTL_MS)
            .invoke_async(&mut conn)
            .await?;
        let claim = Claim::parse(&claim)?;

        let pool_keys = self.keys.pool(&req.claims.sale, req.pool);
        let reply: Vec<String> = self
            .scripts
            .reserve
            .key(pool_keys.config())
            .key(pool_keys.available())
            .key(pool_keys.held())
            .key(pool_keys.holds())
            .key(pool_keys.expiries())
            .key(pool_keys.reservation(&req.claims.jti))
            .arg(&req.claims.jti)
            .arg(req.idempotency_key)
            .arg(req.seats)
            .arg(new_id)
            .arg(new_secret)
            .arg(req.claims.ticket)
            .invoke_async(&mut conn)
            .await?;

        match parse_reserve(&reply) {
            Ok(hold) => Ok(hold),
            Err(refusal @ (ReserveError::SoldOut { .. } | ReserveError::UnknownPool)) => {
                // A refusal does not spend the token. If this release is lost (crash, Redis
                // blip), the claim stays with this key and a retry releases it.
                let released: Result<i64, _> = self
                    .scripts
                    .release_claim
                    .key(&token_key)
                    .arg(req.idempotency_key)
                    .invoke_async(&mut conn)
                    .await;
                if let Err(e) = released {
                    tracing::warn!(error = %e, ?claim, "token claim not released after refusal");
                }
                Err(refusal)
            }
            Err(other) => Err(other),
        }
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
        let hold = parse_reserve(&strings(&["reserved", "r1", "s1", "2", "900", "100"])).unwrap();
        assert_eq!(hold.seats, 2);
        assert!(!hold.replayed);
        let replay = parse_reserve(&strings(&["replay", "r1", "s1", "2", "900", "100"])).unwrap();
        assert!(replay.replayed);
        assert!(matches!(
            parse_reserve(&strings(&["sold_out", "1"])),
            Err(ReserveError::SoldOut { available: 1 })
        ));
        assert!(matches!(
            parse_reserve(&strings(&["not_armed"])),
            Err(ReserveError::UnknownPool)
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
        assert!(matches!(Claim::parse("?"), Err(ReserveError::Protocol(_))));
    }
}
