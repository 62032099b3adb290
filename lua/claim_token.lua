-- claim_token: the sale-wide step of a reservation: one reservation per admission token.
--
-- KEYS[1] sale meta hash   KEYS[2] the token's use record (hash)
-- ARGV[1] Idempotency-Key   ARGV[2] request fingerprint (pool and seats)   ARGV[3] record TTL (ms)
-- ARGV[4] the pool asked for   ARGV[5] the token's expiry (Unix ms)
-- KEYS[3] unspent tokens per admission batch (hash: expiry -> count)
--
-- Returns one of:
--   "claimed"        first use: the token is now bound to this Idempotency-Key and request
--   "retry"          the same key and request again: go on to the pool step, which replays
--   "spent"          the token was already used with another Idempotency-Key
--   "mismatch"       the same Idempotency-Key with a different request (pool or seats)
--   "unknown_sale"   the sale is not armed
--   "unknown_pool"   the sale has no such pool (nothing changed)
--
-- A refusal in the pool step (sold out, unknown pool) gives the claim back with release_claim,
-- so the token can still be used for another pool. If the process dies between the two steps,
-- the claim stays; a retry with the same Idempotency-Key ("retry") completes the reservation.
local pools = redis.call('HGET', KEYS[1], 'pools')
if not pools then
  return 'unknown_sale'
end
if not string.find(',' .. pools .. ',', ',' .. ARGV[4] .. ',', 1, true) then
  return 'unknown_pool'
end
local current = redis.call('HMGET', KEYS[2], 'idem', 'fp')
if not current[1] then
  redis.call('HSET', KEYS[2], 'idem', ARGV[1], 'fp', ARGV[2])
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
  -- A spent token no longer counts as an active admitted user (its hold does, in its pool).
  if redis.call('HEXISTS', KEYS[3], ARGV[5]) == 1 then
    redis.call('HINCRBY', KEYS[3], ARGV[5], -1)
    redis.call('HINCRBY', KEYS[1], 'unspent', -1)
  end
  return 'claimed'
end
if current[1] ~= ARGV[1] then
  return 'spent'
end
if current[2] ~= ARGV[2] then
  return 'mismatch'
end
return 'retry'
