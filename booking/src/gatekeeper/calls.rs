//! The KEYS and ARGV of the scripts every reservation runs (claim, reserve, ack), each written by
//! one function into a [`Call`]: the real invocation on the hot path, or a [`Recorded`] list of
//! strings for `floodgate-booking scripts bench`, which prints them as `redis-benchmark` command
//! lines. The benchmark of "the same scripts a reservation runs" therefore cannot drift from what
//! a reservation sends (it did once: for days it timed a script that failed at its first line).

use floodgate_platform::keys::{Keys, PoolKeys, SaleKeys};
use floodgate_platform::runtime::RedisConn;
use floodgate_protocol::token::AdmissionClaims;
use redis::{Script, ToRedisArgs};

use super::scripts::{Scripts, ATTEMPT_LIFETIME_MS};
use super::ReserveRequest;

/// Where a script's keys and arguments go.
pub(super) trait Call {
    fn key(&mut self, key: String) -> &mut Self;
    fn arg<A: ToRedisArgs + std::fmt::Display>(&mut self, arg: A) -> &mut Self;
}

impl Call for redis::ScriptInvocation<'_> {
    fn key(&mut self, key: String) -> &mut Self {
        redis::ScriptInvocation::key(self, key)
    }

    fn arg<A: ToRedisArgs + std::fmt::Display>(&mut self, arg: A) -> &mut Self {
        redis::ScriptInvocation::arg(self, arg)
    }
}

/// A call written down as text.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Recorded {
    pub keys: Vec<String>,
    pub args: Vec<String>,
}

impl Call for Recorded {
    fn key(&mut self, key: String) -> &mut Self {
        self.keys.push(key);
        self
    }

    fn arg<A: ToRedisArgs + std::fmt::Display>(&mut self, arg: A) -> &mut Self {
        self.args.push(arg.to_string());
        self
    }
}

/// The pool scripts' common KEYS layout (see `lua/lib.lua`), KEYS[9] being `extra`.
pub(super) fn pool_keys<C: Call>(
    call: &mut C,
    pool: &PoolKeys,
    reservation_id: &str,
    extra: String,
) {
    call.key(pool.config())
        .key(pool.available())
        .key(pool.held())
        .key(pool.sold())
        .key(pool.holds())
        .key(pool.expiries())
        .key(pool.outbox())
        .key(pool.reservation(reservation_id))
        .key(extra);
}

/// Until when a token's claim is kept: for as long as the token can be presented, its expiry
/// plus the clock skew allowed between the booking service and Redis.
fn claim_until(req: &ReserveRequest<'_>) -> i64 {
    req.claims
        .exp_ms
        .saturating_add(floodgate_protocol::settings::CLOCK_SKEW_MS)
}

/// `claim_token.lua`: binds the token to the request's key and fingerprint, and registers the
/// attempt (its stamp comes back in the reply).
pub(super) fn claim<C: Call>(call: &mut C, sale: &SaleKeys, req: &ReserveRequest<'_>) {
    call.key(sale.meta())
        .key(sale.token(&req.claims.jti))
        .key(sale.tokens())
        .arg(req.idempotency_key)
        .arg(format!("{}|{}", req.pool, req.seats))
        .arg(claim_until(req))
        .arg(req.pool)
        .arg(req.claims.exp_ms)
        .arg(ATTEMPT_LIFETIME_MS);
}

/// One attempt of a reservation as the pool sees it: its deadline and stamp (from the claim),
/// and whether it retries its key (then its refusal fences the key's earlier attempts off).
pub(super) struct Attempt {
    pub(super) deadline_ms: i64,
    pub(super) stamp: i64,
    pub(super) retry: bool,
}

/// `reserve.lua`: takes the seats and records the hold, before the attempt's deadline.
pub(super) fn reserve<C: Call>(
    call: &mut C,
    pool: &PoolKeys,
    req: &ReserveRequest<'_>,
    (new_id, new_secret): (&str, &str),
    attempt: &Attempt,
) {
    pool_keys(call, pool, new_id, pool.token_reservation(&req.claims.jti));
    call.arg(&req.claims.jti)
        .arg(req.idempotency_key)
        .arg(req.seats)
        .arg(new_id)
        .arg(new_secret)
        .arg(req.claims.ticket)
        .arg(attempt.deadline_ms)
        .arg(req.claims.buyer.as_deref().unwrap_or_default())
        .arg(attempt.stamp)
        .arg(if attempt.retry { "1" } else { "0" })
        .arg(claim_until(req));
}

/// `ack.lua`: the reservation's event was acknowledged; its outbox entry goes.
pub(super) fn ack<C: Call>(
    call: &mut C,
    pool: &PoolKeys,
    reservation_id: &str,
    outbox_entry: &str,
) {
    pool_keys(call, pool, reservation_id, pool.relay());
    call.arg(outbox_entry);
}

/// One script of a reservation, as `redis-benchmark` runs it: `EVALSHA <sha> <keys> <args>`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct BenchCall {
    /// The script's name (its file in `lua/`).
    pub name: &'static str,
    /// The first word of its reply on the path timed (the benchmark checks it before and after:
    /// a refusal is a cheaper path, not the reservation's).
    pub expect: &'static str,
    pub sha: String,
    pub call: Recorded,
}

/// What `redis-benchmark` puts a fresh random number in, in each argument that holds it.
pub const RANDOM: &str = "__rand_int__";

/// The scripts a reservation of one seat in `pool` runs, as a new admission token's first
/// request makes them: every id that must be fresh per reservation (the token, the key, the
/// attempt, the reservation) holds [`RANDOM`]. `expires_at_ms` is the token's expiry.
pub fn bench_calls(
    scripts: &Scripts,
    (sale, pool): (&SaleKeys, &PoolKeys),
    (sale_id, pool_id): (&str, &str),
    expires_at_ms: i64,
) -> Vec<BenchCall> {
    let claims = AdmissionClaims {
        sale: sale_id.to_owned(),
        ticket: 1,
        jti: format!("t{RANDOM}"),
        max_seats: 1,
        iat_ms: expires_at_ms - 60_000,
        exp_ms: expires_at_ms,
        buyer: None,
    };
    let key = format!("k{RANDOM}");
    let req = ReserveRequest {
        claims: &claims,
        pool: pool_id,
        seats: 1,
        idempotency_key: &key,
    };
    let reservation = format!("r{RANDOM}");
    let recorded = |script: &Script, (name, expect), write: &dyn Fn(&mut Recorded)| {
        let mut call = Recorded::default();
        write(&mut call);
        BenchCall {
            name,
            expect,
            sha: script.get_hash().to_owned(),
            call,
        }
    };
    vec![
        recorded(&scripts.claim_token, ("claim_token", "claimed"), &|c| {
            claim(c, sale, &req);
        }),
        recorded(&scripts.reserve, ("reserve", "reserved"), &|c| {
            // A first attempt, as a new token's: its stamp only has to be a number.
            let attempt = Attempt {
                deadline_ms: expires_at_ms,
                stamp: 1,
                retry: false,
            };
            reserve(c, pool, &req, (&reservation, "secret"), &attempt);
        }),
        // The reservation named here does not exist (redis-benchmark cannot carry reserve's id
        // over): ack's lighter path, reading the record and deleting the outbox entry.
        recorded(&scripts.ack, ("ack", "unknown"), &|c| {
            ack(c, pool, &reservation, "0-1");
        }),
    ]
}

/// Loads the scripts into `redis` (so `EVALSHA` finds them) and makes [`bench_calls`] for a
/// token that expires in an hour.
pub async fn load_bench_calls(
    redis: RedisConn,
    keys: Keys,
    sale: &str,
    pool: &str,
) -> redis::RedisResult<Vec<BenchCall>> {
    let gatekeeper = super::Gatekeeper::connect(redis, keys).await?;
    let keys = gatekeeper.keys();
    let expires_at_ms = floodgate_protocol::now_millis() + 3_600_000;
    Ok(bench_calls(
        gatekeeper.scripts(),
        (&keys.sale(sale), &keys.pool(sale, pool)),
        (sale, pool),
        expires_at_ms,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_benchmark_calls_are_the_reservations_own_with_fresh_ids() {
        let keys = Keys::new("p:");
        let (sale, pool) = (keys.sale("s"), keys.pool("s", "p1"));
        let calls = bench_calls(&Scripts::default(), (&sale, &pool), ("s", "p1"), 5_000);
        let names: Vec<_> = calls.iter().map(|c| c.name).collect();
        assert_eq!(names, ["claim_token", "reserve", "ack"]);
        let expected: Vec<_> = calls.iter().map(|c| c.expect).collect();
        assert_eq!(expected, ["claimed", "reserved", "unknown"]);
        let claim = &calls[0].call;
        assert_eq!(claim.keys.len(), 3);
        assert_eq!(claim.keys[0], sale.meta());
        assert!(claim.keys[1].contains(RANDOM), "{claim:?}");
        assert_eq!(claim.args[1], "p1|1");
        assert_eq!(claim.args[4], "5000");
        assert_eq!(claim.args.len(), 6);
        let reserve = &calls[1].call;
        assert_eq!((reserve.keys.len(), reserve.args.len()), (9, 11));
        assert_eq!(reserve.keys[0], pool.config());
        assert_eq!(reserve.args[2], "1", "one seat");
        assert_eq!(reserve.args[7], "", "no buyer");
        assert_eq!(reserve.args[9], "0", "a first attempt fences nothing");
        assert_eq!(calls[2].call.args, ["0-1"]);
        assert_eq!(calls[1].sha, Scripts::default().reserve.get_hash());
    }
}
