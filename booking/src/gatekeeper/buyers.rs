//! A sale's per-buyer seat limit (`lua/buyer_seats.lua`), kept in the buyer's record, a slot of
//! its own. A reservation's seats count against its buyer from before the pool step until the
//! hold ends unsold: the pool's refusal gives them back at once, an expiry or a failed payment when
//! the relay carries the event that ended the hold (`worker.rs`).
//!
//! Crash points: counted but never reserved (the request died between the steps) keeps those
//! seats counted until a retry with the same key is refused, which gives them back; the buyer
//! can buy less, never more. The limit is never passed: the count is taken atomically before any
//! seat is. A hold aborted because its event could not be made durable keeps its seats counted:
//! the client's retry with the same key reserves again under the same token, counted once.

use floodgate_platform::keys::Keys;
use floodgate_protocol::identity::BuyerId;

use floodgate_platform::script::LuaScript as _;

use super::outcomes::BuyerCount;
use super::scripts::BuyerSeats;
use super::{Gatekeeper, ReserveError, ReserveRequest};

/// Why an attempt's seats were not counted against its buyer.
pub(super) enum Uncounted {
    /// Over the limit, or fenced off by a later attempt that was: the token's attempts stamped
    /// below `fence` can count no seats, which stops them only if `fence_kept` (on the record's
    /// replicas). Nothing of this attempt counted, so nothing is given back.
    Over {
        error: ReserveError,
        fence: i64,
        fence_kept: bool,
    },
    /// Fenced off below `fence`, but a later attempt's seats count now: its answer settles the
    /// token.
    Settling { fence: i64 },
    /// Not counted, for want of an answer (it may have counted).
    Failed(ReserveError),
}

impl Gatekeeper {
    /// Counts the request's seats against its buyer, if the token names one and the sale has
    /// a limit; refuses if they would pass it (`attempt`: the attempt's stamp).
    pub(super) async fn count_buyer_seats(
        &self,
        req: &ReserveRequest<'_>,
        limit: Option<u32>,
        attempt: i64,
    ) -> Result<(), Uncounted> {
        let (Some(buyer), Some(limit)) = (&req.claims.buyer, limit) else {
            return Ok(());
        };
        let record = self
            .keys
            .buyer(&req.claims.sale, &BuyerId::new(buyer.clone()));
        let counted = BuyerSeats {
            record: record.clone(),
            op: "take",
            jti: &req.claims.jti,
            seats: req.seats,
            limit,
            lifetime_ms: Keys::BUYER_RECORD_LIFETIME.as_millis() as u64,
            attempt,
        }
        .run(&mut self.redis.clone())
        .await
        .map_err(|e| Uncounted::Failed(e.into()))?;
        let (counted, fence) = match counted {
            BuyerCount::Counted => return Ok(()),
            BuyerCount::Fenced {
                counted_here: true,
                fence,
                ..
            } => return Err(Uncounted::Settling { fence }),
            BuyerCount::Over { counted, fence } | BuyerCount::Fenced { counted, fence, .. } => {
                (counted, fence)
            }
            BuyerCount::Given => {
                return Err(Uncounted::Failed(ReserveError::Protocol(
                    "buyer_seats: given, for a take".into(),
                )))
            }
        };
        // The fence stops the token's earlier attempts once a failover cannot lose it.
        let fence_kept = self.replicated(&record).await.is_ok();
        Err(Uncounted::Over {
            error: ReserveError::BuyerLimit { limit, counted },
            fence,
            fence_kept,
        })
    }

    /// Gives back the seats attempt `attempt` of the request counted against its buyer (the
    /// pool made no hold), unless a later attempt relies on them.
    pub(super) async fn uncount_buyer_seats(&self, req: &ReserveRequest<'_>, attempt: i64) {
        if let Some(buyer) = &req.claims.buyer {
            let given = self
                .give_seats(&req.claims.sale, buyer, &req.claims.jti, attempt)
                .await;
            if let Err(e) = given {
                tracing::warn!(error = %e, "a refused reservation's seats still count against its buyer");
            }
        }
    }

    /// The seats of token `jti`'s reservation no longer count against `buyer` (idempotent): its
    /// hold ended.
    pub async fn give_buyer_seats(
        &self,
        sale: &str,
        buyer: &str,
        jti: &str,
    ) -> redis::RedisResult<()> {
        self.give_seats(sale, buyer, jti, 0).await
    }

    /// The seats of token `jti`'s reservation no longer count against `buyer`, if no attempt
    /// later than `attempt` relies on them (0: whatever relies on them).
    async fn give_seats(
        &self,
        sale: &str,
        buyer: &str,
        jti: &str,
        attempt: i64,
    ) -> redis::RedisResult<()> {
        // Giving back reads only the token's id: the rest is what a take would count.
        BuyerSeats {
            record: self.keys.buyer(sale, &BuyerId::new(buyer)),
            op: "give",
            jti,
            seats: 0,
            limit: 0,
            lifetime_ms: Keys::BUYER_RECORD_LIFETIME.as_millis() as u64,
            attempt,
        }
        .run(&mut self.redis.clone())
        .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::strings;
    use floodgate_platform::script::FromStrings;

    use super::*;

    #[test]
    fn buyer_seat_replies_parse() {
        let count = |reply: &[&str]| BuyerCount::from_strings(&strings(reply));
        assert_eq!(count(&["ok"]), Some(BuyerCount::Counted));
        assert_eq!(
            count(&["over", "4", "17"]),
            Some(BuyerCount::Over {
                counted: 4,
                fence: 17
            })
        );
        assert_eq!(
            count(&["fenced", "4", "17", "0"]),
            Some(BuyerCount::Fenced {
                counted: 4,
                fence: 17,
                counted_here: false
            })
        );
        assert_eq!(count(&["fenced", "4", "17", "yes"]), None);
        assert_eq!(count(&["given"]), Some(BuyerCount::Given));
        assert_eq!(count(&["over", "many", "1"]), None);
        assert_eq!(count(&["over", "4"]), None);
        assert_eq!(count(&["ok", "1"]), None);
    }
}
