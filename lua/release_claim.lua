-- release_claim: give an admission token back after the pool made no hold for an attempt.
--
-- KEYS[1] the token's use record (hash)   KEYS[2] sale meta hash
-- KEYS[3] unspent tokens per admission batch
-- KEYS[4] admitted away (sorted set: tickets let in while their place was away)
-- ARGV[1] the Idempotency-Key that claimed it   ARGV[2] the token's expiry (Unix ms)
-- ARGV[3] the refused attempt's stamp (claim_token.lua)
-- ARGV[4] when the pool refused it (Unix ms, the pool's Redis clock), or "now" when the refusal
--         proves nothing about other attempts (the pool's state was lost, or the attempt never
--         reached the pool: the buyer's limit): then only the attempts whose deadline has passed
--         by this slot's clock, less a second for the clocks' skew, can no longer take seats
-- ARGV[5] the stamp below which the key's attempts can take no seats, once that fence is on the
--         replicas of where it lives: the pool's (reserve.lua: this refusal's own fence, or a
--         later attempt's that covers it), or the buyer's record (buyer_seats.lua: an attempt
--         over the buyer's limit fences the token's earlier ones off before the pool); else "0"
-- ARGV[6] the token's ticket
--
-- Returns 1 if the claim was released; if it stays, 0 when only attempts stamped after this one
-- may still take seats (they settle the claim themselves: their own refusal releases it), or the
-- claim is another key's, and -1 when an attempt stamped before this one may (this refusal did
-- not fence it off). The refused attempt is forgotten either way, and any attempt the fence
-- stopped.
--
-- The claim is released only if no other attempt of the same key may hold seats. Every attempt
-- of one key asks the same pool (the fingerprint binds it), and the pool answers a retry with
-- the hold if one exists, so a refusal at time T proves that no attempt had a hold then. An
-- attempt that can no longer make one does not keep the claim: one stamped before a fenced
-- refusal (the pool turns it away as superseded), or one whose deadline was before T (the pool
-- refuses it as late); a later attempt's fence stops every attempt below it the same way, so
-- concurrent copies of one request refused for good settle without waiting for each other (the
-- latest one's release frees the claim). Any other attempt still within its deadline at T keeps the claim: it may
-- yet take seats, and its own refusal will release the claim if it does not. A late release from
-- another key's request never frees this key's claim.
if redis.call('HGET', KEYS[1], 'idem') ~= ARGV[1] then
  return 0
end
redis.call('HDEL', KEYS[1], 'a:' .. ARGV[3])
local refused_at
if ARGV[4] == 'now' then
  refused_at = now_ms() - 1000
else
  refused_at = tonumber(ARGV[4])
end
local fenced_below = -1
if tonumber(ARGV[5]) > 0 then
  fenced_below = tonumber(ARGV[5])
end
local mine = tonumber(ARGV[3])
-- A fence in the buyer's record ("now", with a fence) stops the attempts below it before they
-- count; one at or above it may have counted and reserved, its deadline passed or not: it keeps
-- the claim.
local counted_above = ARGV[4] == 'now' and fenced_below > 0
local fields = redis.call('HGETALL', KEYS[1])
local kept = 1
for i = 1, #fields, 2 do
  if string.sub(fields[i], 1, 2) == 'a:' then
    local stamp = tonumber(string.sub(fields[i], 3))
    if stamp < fenced_below then
      redis.call('HDEL', KEYS[1], fields[i])
    elseif tonumber(fields[i + 1]) >= refused_at or counted_above then
      if stamp < mine then
        kept = -1
      elseif kept == 1 then
        kept = 0
      end
    end
  end
end
if kept ~= 1 then
  return kept
end
local away = redis.call('HGET', KEYS[1], 'away')
redis.call('DEL', KEYS[1])
if away then
  -- Its claim took nothing off the count (claim_token.lua): back among the uncounted.
  redis.call('ZADD', KEYS[4], ARGV[2], ARGV[6])
  return 1
end
-- Unspent again, for as long as its batch counts (advance.lua).
if redis.call('HEXISTS', KEYS[3], ARGV[2]) == 1 then
  redis.call('HINCRBY', KEYS[3], ARGV[2], 1)
  redis.call('HINCRBY', KEYS[2], 'unspent', 1)
end
return 1
