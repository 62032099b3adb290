-- release_claim: give an admission token back after the pool refused the reservation.
--
-- KEYS[1] the token's use record (hash)   ARGV[1] the Idempotency-Key that claimed it
--
-- Returns 1 if the claim was released, 0 if it was not this key's (nothing changed).
-- Comparing the key makes a late release from one request unable to free another's claim.
if redis.call('HGET', KEYS[1], 'idem') == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
