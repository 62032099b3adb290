//! The gatekeeper's Lua scripts, loaded once: every pool script starts with `lua/clock.lua` and
//! `lua/lib.lua`, the sale-slot claim with `lua/clock.lua` and `lua/sale_lib.lua`
//! (`floodgate_platform::lua` puts them together).

use floodgate_platform::lua::{pool_script, sale_script};
use floodgate_platform::runtime::RedisConn;
use redis::Script;

/// How long one attempt (one request's claim) may take to reach the pool: it can make a new
/// hold only this long after its claim. A healthy request takes one Redis round trip between
/// the two; ten seconds is several of Redis' response timeouts. A crashed attempt holds up
/// releasing its token's claim (for another attempt with the same key) this long at most.
pub const ATTEMPT_LIFETIME_MS: u64 = 10_000;

/// The Lua scripts this service runs, loaded once.
#[derive(Clone)]
pub struct Scripts {
    pub(super) claim_token: Script,
    pub(super) release_claim: Script,
    pub(super) reserve: Script,
    pub(super) ack: Script,
    pub(super) abort: Script,
    pub(super) start_payment: Script,
    pub(super) confirm: Script,
    pub(super) release: Script,
    pub(super) expire: Script,
    pub(super) refund_result: Script,
    /// A lease (`lua/lease.lua`), for the relay of each pool's outbox.
    pub(super) lease: Script,
    /// A buyer's seats in a sale (`lua/buyer_seats.lua`), in the buyer's own slot.
    pub(super) buyer_seats: Script,
    /// Refuses a pool that lost writes (`lua/diverge.lua`).
    pub(super) diverge: Script,
}

impl Default for Scripts {
    fn default() -> Self {
        Self {
            claim_token: sale_script(include_str!("../../../lua/claim_token.lua")),
            release_claim: floodgate_platform::lua::clocked_script(include_str!(
                "../../../lua/release_claim.lua"
            )),
            reserve: pool_script(include_str!("../../../lua/reserve.lua")),
            ack: pool_script(include_str!("../../../lua/ack.lua")),
            abort: pool_script(include_str!("../../../lua/abort.lua")),
            start_payment: pool_script(include_str!("../../../lua/start_payment.lua")),
            confirm: pool_script(include_str!("../../../lua/confirm.lua")),
            release: pool_script(include_str!("../../../lua/release.lua")),
            expire: pool_script(include_str!("../../../lua/expire.lua")),
            refund_result: pool_script(include_str!("../../../lua/refund_result.lua")),
            lease: floodgate_platform::lua::script(include_str!("../../../lua/lease.lua")),
            buyer_seats: floodgate_platform::lua::script(include_str!(
                "../../../lua/buyer_seats.lua"
            )),
            diverge: floodgate_platform::lua::script(include_str!("../../../lua/diverge.lua")),
        }
    }
}

impl Scripts {
    /// Loads every script into Redis' script cache up front. Without it, the first burst of
    /// requests after a start (or a Redis restart) all miss with NOSCRIPT and each sends the
    /// whole script text again: thousands of loads exactly when the rush begins.
    pub async fn preload(&self, conn: &mut RedisConn) -> redis::RedisResult<()> {
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
            &self.lease,
            &self.buyer_seats,
            &self.diverge,
        ] {
            script.load_async(conn).await?;
        }
        Ok(())
    }
}
