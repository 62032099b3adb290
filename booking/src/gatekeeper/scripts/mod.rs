//! The booking service's Lua scripts, each declared once (`floodgate_platform::script`): its
//! keys and arguments by name, in the order of its header, and the type of its reply. Every pool
//! script starts with `lua/clock.lua` and `lua/lib.lua` and takes the pool's common layout of
//! keys first ([`PoolLayout`]); the sale-slot claim starts with `lua/clock.lua` and
//! `lua/sale_lib.lua`. `lua/lease.lua`, which the gateway runs too, is declared in
//! `floodgate_platform::scripts`.

use floodgate_platform::runtime::RedisConn;
use floodgate_platform::script::{Declaration, LuaScript};
use floodgate_platform::scripts::{Lease, PoolLayout};

use super::claims::{Claiming, Released};
use super::holds::Reserved;
use super::outcomes::{BuyerCount, Sequence};
use super::replies;

mod lifecycle;
pub use lifecycle::{ArmPool, ArmSale, EndPool, RebuildPool, RepairPool};

/// How long one attempt (one request's claim) may take to reach the pool: it can make a new
/// hold only this long after its claim. A healthy request takes one Redis round trip between
/// the two; ten seconds is several of Redis' response timeouts. A crashed attempt holds up
/// releasing its token's claim (for another attempt with the same key) this long at most.
pub const ATTEMPT_LIFETIME_MS: u64 = 10_000;

floodgate_platform::lua_script! {
    /// `lua/claim_token.lua`: binds an admission token to a request's key and fingerprint, and
    /// registers the attempt.
    pub struct ClaimToken<'a> {
        file: "claim_token.lua",
        helpers: Sale,
        reply: Claiming,
        keys {
            meta: "sale meta hash",
            record: "the token's use record (hash)",
            unspent: "unspent tokens per admission batch",
            away: "admitted away (sorted set",
        }
        args {
            idempotency_key: &'a str = "Idempotency-Key",
            fingerprint: String = "request fingerprint (pool and seats)",
            keep_until_ms: i64 = "when the record may go",
            pool: &'a str = "the pool asked for",
            expires_ms: i64 = "the token's expiry",
            attempt_lifetime_ms: u64 = "the attempt's lifetime (ms)",
            ticket: u64 = "the token's ticket",
        }
    }
}

floodgate_platform::lua_script! {
    /// `lua/release_claim.lua`: gives a token back after an attempt that made no hold.
    pub struct ReleaseClaim<'a> {
        file: "release_claim.lua",
        helpers: Clock,
        reply: Released,
        keys {
            record: "the token's use record (hash)",
            meta: "sale meta hash",
            unspent: "unspent tokens per admission batch",
            away: "admitted away (sorted set",
        }
        args {
            idempotency_key: &'a str = "the Idempotency-Key that claimed it",
            expires_ms: i64 = "the token's expiry",
            attempt: i64 = "the refused attempt's stamp",
            refused_at: String = "when the pool refused it",
            fenced: String = "the stamp below which the key's attempts can take no seats",
            ticket: u64 = "the token's ticket",
        }
    }
}

floodgate_platform::lua_script! {
    /// `lua/reserve.lua`: the pool step of a reservation: takes the seats and records the hold.
    pub struct Reserve<'a> {
        file: "reserve.lua",
        helpers: Pool,
        reply: Reserved,
        layout { pool: PoolLayout }
        keys {
            pointer: "the token's pointer in this pool",
        }
        args {
            jti: &'a str = "token id (jti)",
            idempotency_key: &'a str = "Idempotency-Key",
            seats: u32 = "seats",
            reservation_id: &'a str = "new reservation id",
            secret: &'a str = "new secret",
            ticket: u64 = "ticket",
            deadline_ms: i64 = "the attempt's deadline",
            buyer: &'a str = "the buyer the admission token names",
            stamp: i64 = "the attempt's stamp",
            retry: &'a str = "\"1\" if the attempt is a retry of its key",
            claim_until_ms: i64 = "when the token's claim may go",
        }
    }
}

floodgate_platform::lua_script! {
    /// `lua/ack.lua`: a reservation's SeatReserved was acknowledged: it is durable.
    pub struct Ack<'a> {
        file: "ack.lua",
        helpers: Pool,
        reply: replies::Ack,
        layout { pool: PoolLayout }
        keys {
            unused: "is not used",
        }
        args {
            outbox_entry: &'a str = "the SeatReserved's outbox entry",
        }
    }
}

floodgate_platform::lua_script! {
    /// `lua/abort.lua`: takes back a hold whose SeatReserved could not be made durable.
    pub struct Abort {
        file: "abort.lua",
        helpers: Pool,
        reply: replies::Abort,
        layout { pool: PoolLayout }
        keys {
            pointer: "is the token's pointer in this pool",
        }
        args {}
    }
}

floodgate_platform::lua_script! {
    /// `lua/start_payment.lua`: records the one payment that may buy a hold.
    pub struct StartPayment<'a> {
        file: "start_payment.lua",
        helpers: Pool,
        reply: replies::PaymentStart,
        layout { pool: PoolLayout }
        keys {
            unused: "is not used",
        }
        args {
            payment_id: &'a str = "the provider's payment id",
            checkout_url: &'a str = "where the payer completes it",
            status: &'a str = "the provider's status of it",
        }
    }
}

floodgate_platform::lua_script! {
    /// `lua/confirm.lua`: a payment succeeded; it buys the hold if it is the one started.
    pub struct Confirm<'a> {
        file: "confirm.lua",
        helpers: Pool,
        reply: replies::Confirmation,
        layout { pool: PoolLayout }
        keys {
            event: "the webhook event's memory",
        }
        args {
            payment_id: &'a str = "the provider's payment id",
            amount_minor: i64 = "the amount paid (minor units)",
            currency: &'a str = "currency",
        }
    }
}

floodgate_platform::lua_script! {
    /// `lua/release.lua`: a payment failed; the seats go back.
    pub struct Release<'a> {
        file: "release.lua",
        helpers: Pool,
        reply: replies::Release,
        layout { pool: PoolLayout }
        keys {
            event: "the webhook event's memory",
        }
        args {
            payment_id: &'a str = "the provider's payment id",
        }
    }
}

floodgate_platform::lua_script! {
    /// `lua/refund_result.lua`: the provider's verdict on a refund.
    pub struct RefundResult<'a> {
        file: "refund_result.lua",
        helpers: Pool,
        reply: replies::RefundVerdict,
        layout { pool: PoolLayout }
        keys {
            event: "the webhook event's memory",
        }
        args {
            payment_id: &'a str = "the provider's payment id",
            outcome: &'a str = "\"succeeded\" or \"failed\"",
        }
    }
}

floodgate_platform::lua_script! {
    /// `lua/expire.lua`: expires one due hold.
    pub struct Expire<'a> {
        file: "expire.lua",
        helpers: Pool,
        reply: replies::Expiry,
        layout { pool: PoolLayout }
        keys {
            unused: "is not used",
        }
        args {
            reservation_id: &'a str = "the reservation id",
        }
    }
}

floodgate_platform::lua_script! {
    /// `lua/buyer_seats.lua`: a buyer's seats in a sale, counted against the sale's limit.
    pub struct BuyerSeats<'a> {
        file: "buyer_seats.lua",
        helpers: None,
        reply: BuyerCount,
        keys {
            record: "the buyer's record",
        }
        args {
            op: &'a str = "\"take\" or \"give\"",
            jti: &'a str = "the admission token's id",
            seats: u32 = "seats asked (take)",
            limit: u32 = "the sale's limit (take)",
            lifetime_ms: u64 = "the record's lifetime (ms)",
            attempt: i64 = "the attempt's stamp (take; give: the attempt giving back, or 0 when the hold ended)",
        }
    }
}

floodgate_platform::lua_script! {
    /// `lua/diverge.lua`: refuses a pool that lost writes, until it is rebuilt.
    pub struct Diverge {
        file: "diverge.lua",
        helpers: None,
        reply: Sequence,
        keys {
            config: "cfg hash",
        }
        args {
            delivered: i64 = "the highest sequence number Kafka delivered for the pool",
            repeated: &'static str = "'1' if PostgreSQL saw a number twice",
        }
    }
}

/// The scripts the booking service declares (with `lua/lease.lua`,
/// `floodgate_platform::scripts`).
pub const DECLARED: &[&Declaration] = &[
    ClaimToken::DECLARATION,
    ReleaseClaim::DECLARATION,
    Reserve::DECLARATION,
    Ack::DECLARATION,
    Abort::DECLARATION,
    StartPayment::DECLARATION,
    Confirm::DECLARATION,
    Release::DECLARATION,
    RefundResult::DECLARATION,
    Expire::DECLARATION,
    BuyerSeats::DECLARATION,
    Diverge::DECLARATION,
    ArmPool::DECLARATION,
    ArmSale::DECLARATION,
    EndPool::DECLARATION,
    RepairPool::DECLARATION,
    RebuildPool::DECLARATION,
];

/// Loads every script a request may run into Redis' script cache up front. Without it, the
/// first burst of requests after a start (or a Redis restart) all miss with NOSCRIPT and each
/// sends the whole script text again: thousands of loads exactly when the rush begins.
pub async fn preload(conn: &mut RedisConn) -> redis::RedisResult<()> {
    for script in [
        ClaimToken::script(),
        ReleaseClaim::script(),
        Reserve::script(),
        Ack::script(),
        Abort::script(),
        StartPayment::script(),
        Confirm::script(),
        Release::script(),
        RefundResult::script(),
        Expire::script(),
        Lease::script(),
        BuyerSeats::script(),
        Diverge::script(),
    ] {
        script.load_async(conn).await?;
    }
    Ok(())
}
