-- release_claim: give an admission token back after the pool made no hold for an attempt.
--
-- KEYS[1] the token's use record (hash)   KEYS[2] sale meta hash
-- KEYS[3] unspent tokens per admission batch
-- ARGV[1] the Idempotency-Key that claimed it   ARGV[2] the token's expiry (Unix ms)
-- ARGV[3] the refused attempt's id   ARGV[4] when the pool refused it (Unix ms, Redis' clock),
--         or 0 when the refusal proves nothing about other attempts (the pool's state was lost)
--
-- Returns 1 if the claim was released, 0 if it stays (nothing else changed).
--
-- The claim is released only if no other attempt of the same key may hold seats. Every attempt
-- of one key asks the same pool (the fingerprint binds it), and the pool answers a retry with
-- the hold if one exists, so a refusal at time T proves that no attempt had a hold then; an
-- attempt whose deadline was before T can no longer make one (reserve.lua refuses past it).
-- Any other attempt still within its deadline at T keeps the claim: it may yet take seats, and
-- its own refusal will release the claim if it does not. A late release from another key's
-- request never frees this key's claim.
if redis.call('HGET', KEYS[1], 'idem') ~= ARGV[1] then
  return 0
end
redis.call('HDEL', KEYS[1], 'a:' .. ARGV[3])
local refused_at = tonumber(ARGV[4])
local fields = redis.call('HGETALL', KEYS[1])
for i = 1, #fields, 2 do
  if string.sub(fields[i], 1, 2) == 'a:' and tonumber(fields[i + 1]) >= refused_at then
    return 0
  end
end
redis.call('DEL', KEYS[1])
-- Unspent again, until its batch expires.
if redis.call('HEXISTS', KEYS[3], ARGV[2]) == 1 then
  redis.call('HINCRBY', KEYS[3], ARGV[2], 1)
  redis.call('HINCRBY', KEYS[2], 'unspent', 1)
end
return 1
