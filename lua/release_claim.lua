-- release_claim: give an admission token back after the pool refused the reservation.
--
-- KEYS[1] the token's use record (hash)   KEYS[2] sale meta hash
-- KEYS[3] unspent tokens per admission batch   ARGV[1] the Idempotency-Key that claimed it
-- ARGV[2] the token's expiry (Unix ms)
--
-- Returns 1 if the claim was released, 0 if it was not this key's (nothing changed).
-- Comparing the key makes a late release from one request unable to free another's claim.
if redis.call('HGET', KEYS[1], 'idem') == ARGV[1] then
  redis.call('DEL', KEYS[1])
  -- Unspent again, until its batch expires.
  if redis.call('HEXISTS', KEYS[3], ARGV[2]) == 1 then
    redis.call('HINCRBY', KEYS[3], ARGV[2], 1)
    redis.call('HINCRBY', KEYS[2], 'unspent', 1)
  end
  return 1
end
return 0
