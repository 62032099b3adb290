//! The calls every reservation makes (claim, reserve, ack), each made by one function from the
//! request: the real call on the hot path, and what `floodgate-booking scripts bench` writes
//! down for `redis-benchmark` (through the scripts' own declarations,
//! `floodgate_platform::script::LuaScript::written`). The benchmark of "the same scripts a
//! reservation runs" therefore cannot drift from what a reservation sends (it did once: for
//! days it timed a script that failed at its first line).

use floodgate_platform::keys::{PoolKeys, SaleKeys};
use floodgate_platform::scripts::PoolLayout;

use super::scripts::{Ack, ClaimToken, Reserve, ATTEMPT_LIFETIME_MS};
use super::ReserveRequest;

/// Until when a token's claim is kept: for as long as the token can be presented, its expiry
/// plus the clock skew allowed between the booking service and Redis.
fn claim_until(req: &ReserveRequest<'_>) -> i64 {
    req.claims
        .exp_ms
        .saturating_add(floodgate_protocol::settings::CLOCK_SKEW_MS)
}

/// `claim_token.lua`: binds the token to the request's key and fingerprint, and registers the
/// attempt (its stamp comes back in the reply).
pub fn claim<'a>(sale: &SaleKeys, req: &ReserveRequest<'a>) -> ClaimToken<'a> {
    ClaimToken {
        meta: sale.meta(),
        record: sale.token(&req.claims.jti),
        unspent: sale.tokens(),
        away: sale.away_admitted(),
        idempotency_key: req.idempotency_key,
        fingerprint: format!("{}|{}", req.pool, req.seats),
        keep_until_ms: claim_until(req),
        pool: req.pool,
        expires_ms: req.claims.exp_ms,
        attempt_lifetime_ms: ATTEMPT_LIFETIME_MS,
        ticket: req.claims.ticket,
    }
}

/// One attempt of a reservation as the pool sees it: its deadline and stamp (from the claim),
/// and whether it retries its key (then its refusal fences the key's earlier attempts off).
pub struct Attempt {
    pub deadline_ms: i64,
    pub stamp: i64,
    pub retry: bool,
}

/// `reserve.lua`: takes the seats and records the hold, before the attempt's deadline.
pub fn reserve<'a>(
    pool: &PoolKeys,
    req: &ReserveRequest<'a>,
    (new_id, new_secret): (&'a str, &'a str),
    attempt: &Attempt,
) -> Reserve<'a> {
    Reserve {
        pool: PoolLayout::new(pool, new_id),
        pointer: pool.token_reservation(&req.claims.jti),
        jti: &req.claims.jti,
        idempotency_key: req.idempotency_key,
        seats: req.seats,
        reservation_id: new_id,
        secret: new_secret,
        ticket: req.claims.ticket,
        deadline_ms: attempt.deadline_ms,
        buyer: req.claims.buyer.as_deref().unwrap_or_default(),
        stamp: attempt.stamp,
        retry: if attempt.retry { "1" } else { "0" },
        claim_until_ms: claim_until(req),
    }
}

/// `ack.lua`: the reservation's event was acknowledged; its outbox entry goes.
pub fn ack<'a>(pool: &PoolKeys, reservation_id: &str, outbox_entry: &'a str) -> Ack<'a> {
    Ack {
        pool: PoolLayout::new(pool, reservation_id),
        unused: pool.relay(),
        outbox_entry,
    }
}
