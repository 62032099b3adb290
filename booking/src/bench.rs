//! `floodgate-booking scripts bench`: the scripts a reservation runs, as `redis-benchmark`
//! command lines (`deploy/bench-scripts.sh` runs them). Written through the gatekeeper's own
//! calls and the scripts' declarations, so the benchmark times exactly what a reservation sends.

use floodgate_booking::gatekeeper::calls::{self, Attempt};
use floodgate_booking::gatekeeper::ReserveRequest;
use floodgate_platform::keys::{Keys, PoolKeys, SaleKeys};
use floodgate_platform::runtime::RedisConn;
use floodgate_platform::script::{LuaScript, Written};
use floodgate_protocol::token::AdmissionClaims;

/// One script of a reservation, as `redis-benchmark` runs it: `EVALSHA <sha> <keys> <args>`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct BenchCall {
    /// The script's name (its file in `lua/`).
    pub name: &'static str,
    /// The first word of its reply on the path timed (the benchmark checks it before and after:
    /// a refusal is a cheaper path, not the reservation's).
    pub expect: &'static str,
    pub sha: String,
    pub call: Written,
}

impl BenchCall {
    fn of<S: LuaScript>(name: &'static str, expect: &'static str, call: &S) -> Self {
        Self {
            name,
            expect,
            sha: S::script().get_hash().to_owned(),
            call: call.written(),
        }
    }
}

/// What `redis-benchmark` puts a fresh random number in, in each argument that holds it.
pub const RANDOM: &str = "__rand_int__";

/// The scripts a reservation of one seat in `pool` runs, as a new admission token's first
/// request makes them: every id that must be fresh per reservation (the token, the key, the
/// attempt, the reservation) holds [`RANDOM`]. `expires_at_ms` is the token's expiry.
pub fn bench_calls(
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
    // A first attempt, as a new token's: its stamp only has to be a number.
    let attempt = Attempt {
        deadline_ms: expires_at_ms,
        stamp: 1,
        retry: false,
    };
    vec![
        BenchCall::of("claim_token", "claimed", &calls::claim(sale, &req)),
        BenchCall::of(
            "reserve",
            "reserved",
            &calls::reserve(pool, &req, (&reservation, "secret"), &attempt),
        ),
        // The reservation named here does not exist (redis-benchmark cannot carry reserve's id
        // over): ack's lighter path, reading the record and deleting the outbox entry.
        BenchCall::of("ack", "unknown", &calls::ack(pool, &reservation, "0-1")),
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
    floodgate_booking::gatekeeper::preload(&mut redis.clone()).await?;
    let expires_at_ms = floodgate_protocol::now_millis() + 3_600_000;
    Ok(bench_calls(
        (&keys.sale(sale), &keys.pool(sale, pool)),
        (sale, pool),
        expires_at_ms,
    ))
}

#[cfg(test)]
mod tests {
    use floodgate_booking::gatekeeper::scripts::Reserve;

    use super::*;

    #[test]
    fn the_benchmark_calls_are_the_reservations_own_with_fresh_ids() {
        let keys = Keys::new("p:");
        let (sale, pool) = (keys.sale("s"), keys.pool("s", "p1"));
        let calls = bench_calls((&sale, &pool), ("s", "p1"), 5_000);
        let names: Vec<_> = calls.iter().map(|c| c.name).collect();
        assert_eq!(names, ["claim_token", "reserve", "ack"]);
        let expected: Vec<_> = calls.iter().map(|c| c.expect).collect();
        assert_eq!(expected, ["claimed", "reserved", "unknown"]);
        let claim = &calls[0].call;
        assert_eq!(claim.keys.len(), 4);
        assert_eq!(claim.keys[0], sale.meta());
        assert!(claim.keys[1].contains(RANDOM), "{claim:?}");
        assert_eq!(claim.args[1], "p1|1");
        assert_eq!(claim.args[4], "5000");
        assert_eq!(claim.args.len(), 7);
        let reserve = &calls[1].call;
        assert_eq!((reserve.keys.len(), reserve.args.len()), (9, 11));
        assert_eq!(reserve.keys[0], pool.config());
        assert_eq!(reserve.args[2], "1", "one seat");
        assert_eq!(reserve.args[7], "", "no buyer");
        assert_eq!(reserve.args[9], "0", "a first attempt fences nothing");
        assert_eq!(calls[2].call.args, ["0-1"]);
        assert_eq!(calls[1].sha, Reserve::script().get_hash());
    }
}
