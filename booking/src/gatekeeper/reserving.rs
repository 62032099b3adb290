//! A reservation's first two steps and the answer to a refusal: the token's claim in the sale's
//! slot, the hold in the pool's, and the claim given back when the pool made none (see the
//! module above for the steps and their crash points).

use floodgate_platform::replicas::NotReplicated;
use floodgate_platform::script::LuaScript as _;

use super::buyers::Uncounted;
use super::claims::{Claim, Claimed, Claiming, Released};
use super::holds::{Refusal, Reserved};
use super::scripts::ReleaseClaim;
use super::{calls, Gatekeeper, Hold, ReserveError, ReserveRequest};

impl Gatekeeper {
    /// Claims the token, counts the buyer's seats (when the sale limits them), then reserves in
    /// the pool; gives back what it took on a refusal.
    #[tracing::instrument(skip_all, fields(sale = %req.claims.sale, pool = %req.pool, ticket = req.claims.ticket))]
    pub async fn reserve(
        &self,
        req: &ReserveRequest<'_>,
        new_id: &str,
        new_secret: &str,
    ) -> Result<Hold, ReserveError> {
        let claimed = self.claim(req).await?;
        let counted = self
            .count_buyer_seats(req, claimed.buyer_limit, claimed.attempt)
            .await;
        match counted {
            Ok(()) => {}
            // Nothing of this attempt reached the pool: its refusal proves nothing about the
            // key's other attempts, but its fence (once replicated) stops the earlier ones, and
            // it counted nothing to give back.
            Err(Uncounted::Over {
                error,
                fence,
                fence_kept,
            }) => {
                let refusal = Refusal {
                    error,
                    at_ms: None,
                    fence: Some(fence),
                };
                return Err(self.settle(req, &claimed, refusal, fence_kept, false).await);
            }
            // A later copy of the request counted, and its answer (a hold, or its refusal)
            // settles the pass: this copy takes its own attempt off the claim (the later one
            // keeps it, release_claim.lua) and is the client's own 503.
            Err(Uncounted::Settling { fence }) => {
                let released = self
                    .release_claim(req, claimed.attempt, None, Some(fence))
                    .await;
                if matches!(released, Ok(Released::Yes)) {
                    tracing::warn!("a fenced copy found no later attempt on its claim");
                }
                return Err(ReserveError::Unsettled);
            }
            Err(Uncounted::Failed(error)) => {
                return Err(self
                    .settle(req, &claimed, Refusal::alone(error), false, true)
                    .await);
            }
        }
        let pool_keys = self.keys.pool(&req.claims.sale, req.pool);
        let attempt = calls::Attempt {
            deadline_ms: claimed.deadline_ms,
            stamp: claimed.attempt,
            retry: claimed.claim == Claim::Retry,
        };
        let started = std::time::Instant::now();
        let reserved = calls::reserve(&pool_keys, req, (new_id, new_secret), &attempt)
            .run(&mut self.redis.clone())
            .await;
        // The pool primary's script, as the autopilot judges it: a failed call counts too (it
        // took its time, and its error is the backend's).
        let (now, took) = (floodgate_protocol::now_millis(), started.elapsed());
        let pass =
            floodgate_platform::autopilot::window::pass_key(&req.claims.sale, &req.claims.jti);
        self.script_times
            .record(&req.claims.sale, pass, now, took, reserved.is_err());
        let reserved = reserved?;
        match reserved {
            Reserved::Hold(mut hold) => {
                if let (Some(buyer), Some(_)) = (&req.claims.buyer, claimed.buyer_limit) {
                    let buyer = floodgate_protocol::identity::BuyerId::new(buyer.clone());
                    hold.buyer_record = Some(self.keys.buyer(&req.claims.sale, &buyer));
                }
                Ok(hold)
            }
            Reserved::Spent => Err(ReserveError::TokenSpent),
            Reserved::Refused(refusal) => {
                // The fence stops the key's earlier attempts only if a failover cannot lose it:
                // one of them delayed in the client's retries could otherwise still reach a new
                // primary and take seats after the token was given back.
                let sale = req.claims.sale.as_str();
                let fence_kept =
                    refusal.fence.is_some() && self.pool_replicated(sale, req.pool).await.is_ok();
                Err(self.settle(req, &claimed, refusal, fence_kept, true).await)
            }
        }
    }

    /// What a refused attempt answers. It gives the token's claim back (the pass is not spent),
    /// and a definitive refusal (`sold_out`, `buyer_limit`) is answered only once the claim is
    /// given back for good: the client may then try another class with a fresh key and must
    /// not be told `token_spent`. Where that cannot be shown, because another attempt of the
    /// key may still take seats or a failover could lose the release (or the fence that let it
    /// happen), the answer is a 503 instead, and the client's retry with the same key settles
    /// it. `fence_kept`: the refusal's fence is on the replicas of where it lives (the pool, or
    /// the buyer's record). `counted`: the attempt may have counted seats against its buyer,
    /// which are given back with the pass (one that counted nothing gives nothing back: a later
    /// copy's count may be there by then).
    async fn settle(
        &self,
        req: &ReserveRequest<'_>,
        claimed: &Claimed,
        refusal: Refusal,
        fence_kept: bool,
        counted: bool,
    ) -> ReserveError {
        let sale = req.claims.sale.as_str();
        let definitive = matches!(
            refusal.error,
            ReserveError::SoldOut { .. } | ReserveError::BuyerLimit { .. }
        );
        match self
            .release_claim(
                req,
                claimed.attempt,
                refusal.at_ms,
                refusal.fence.filter(|_| fence_kept),
            )
            .await
        {
            Ok(Released::Yes) => {
                // Its seats no longer count against the buyer either.
                if counted {
                    self.uncount_buyer_seats(req, claimed.attempt).await;
                }
                if definitive && self.claim_replicated(sale).await.is_err() {
                    return ReserveError::NotReplicated;
                }
                refusal.error
            }
            // A later attempt of the key settles the claim with its own answer (a concurrent
            // duplicate, say): this one is answered as it was decided.
            Ok(Released::KeptForLater) => refusal.error,
            Ok(Released::KeptForEarlier) if definitive => {
                if refusal.fence.is_some() && !fence_kept {
                    ReserveError::NotReplicated
                } else {
                    ReserveError::Unsettled
                }
            }
            // The claim stays with this key; the key's next refused retry releases it.
            Err(e) if definitive => ReserveError::Redis(e),
            Ok(Released::KeptForEarlier) | Err(_) => refusal.error,
        }
    }

    /// The sale-wide step (`claim_token.lua`): binds the token to this request's key and
    /// fingerprint, and registers the attempt with its deadline and stamp.
    async fn claim(&self, req: &ReserveRequest<'_>) -> Result<Claimed, ReserveError> {
        let sale_keys = self.keys.sale(&req.claims.sale);
        match calls::claim(&sale_keys, req)
            .run(&mut self.redis.clone())
            .await?
        {
            Claiming::Claimed(claimed) => Ok(claimed),
            Claiming::Refused(refused) => Err(refused),
        }
    }

    /// Gives the token back after `attempt` made no hold (`release_claim.lua`), unless another
    /// attempt of the same key may still take seats (`fence`: the stamp below which the pool has
    /// stopped every attempt of the key, this one's own fence or a later attempt's, on the
    /// replicas).
    async fn release_claim(
        &self,
        req: &ReserveRequest<'_>,
        attempt: i64,
        refused_at: Option<i64>,
        fence: Option<i64>,
    ) -> redis::RedisResult<Released> {
        // Without the pool's word, the script reasons from its own clock ("now").
        let refused_at = refused_at.map_or_else(|| "now".to_owned(), |at| at.to_string());
        let sale_keys = self.keys.sale(&req.claims.sale);
        ReleaseClaim {
            record: sale_keys.token(&req.claims.jti),
            meta: sale_keys.meta(),
            unspent: sale_keys.tokens(),
            away: sale_keys.away_admitted(),
            idempotency_key: req.idempotency_key,
            expires_ms: req.claims.exp_ms,
            attempt,
            refused_at,
            fenced: fence.map_or_else(|| "0".to_owned(), |stamp| stamp.to_string()),
            ticket: req.claims.ticket,
        }
        .run(&mut self.redis.clone())
        .await
        .map_err(redis::RedisError::from)
        .inspect_err(|e| tracing::warn!(error = %e, "token claim not released after refusal"))
    }

    /// Every write this process made in the sale's slot (a token's claim given back) is on
    /// enough replicas.
    async fn claim_replicated(&self, sale: &str) -> Result<(), NotReplicated> {
        self.replicated(&self.keys.sale(sale).meta()).await
    }

    /// Every write this process made in `key`'s slot is on enough replicas (always, where none
    /// are required).
    pub(super) async fn replicated(&self, key: &str) -> Result<(), NotReplicated> {
        if !self.replication.required() {
            return Ok(());
        }
        self.replication.replicated(key).await
    }
}
