-- claim_token: the sale-wide step of a reservation: one reservation per admission token.
--
-- KEYS[1] sale meta hash   KEYS[2] the token's use record (hash)
-- KEYS[3] unspent tokens per admission batch (hash: expiry -> count)
-- KEYS[4] admitted away (sorted set: tickets let in while their place was away)
-- ARGV[1] Idempotency-Key   ARGV[2] request fingerprint (pool and seats)
-- ARGV[3] when the record may go (Unix ms: the token's expiry plus the clock skew allowed)
-- ARGV[4] the pool asked for   ARGV[5] the token's expiry (Unix ms; names its admission batch)
-- ARGV[6] the attempt's lifetime (ms)   ARGV[7] the token's ticket
--
-- Returns {outcome, attempt deadline (Unix ms), the sale's per-buyer seat limit (0: none),
-- the attempt's stamp} with outcome one of:
--   "claimed"        first use: the token is now bound to this Idempotency-Key and request
--   "retry"          the same key and request again: go on to the pool step, which replays
-- or {refusal}: "spent" (the token was used with another key), "mismatch" (the same key with a
-- different pool or seats), "unknown_sale" (not armed), "unknown_pool", "ended" (the sale is
-- over: a token's first claim is refused; a retry of an earlier claim still replays its answer)
-- (nothing changed).
--
-- Every attempt (the first and each retry) registers itself with a deadline: the pool step
-- makes a new hold only before it (reserve.lua), so once it has passed the attempt can never
-- take seats. That is what lets a refused attempt give the claim back safely while another
-- attempt with the same key may be under way (release_claim.lua).
--
-- An attempt is named by its stamp: Redis' time in ms when it claimed, and always above the
-- record's previous stamp (`last`), so a retry's stamp is above every earlier attempt's of its
-- key. A retry's refusal fences the earlier attempts off at the pool (reserve.lua), which is what
-- lets it give the token back at once instead of waiting out their deadlines: after a 503 (a
-- failover, a broker that did not acknowledge) the client's retry gets its definitive answer and
-- its pass back in one request. Should this record be lost in a failover (a claim is promised on
-- a replica only with a 201), the next request claims afresh as a first attempt: its stamp, from
-- the new primary's clock, is still above the lost ones, but a first attempt fences nothing, so an
-- earlier attempt lost with the record and still in flight is not stopped by its refusal.
--
-- A token let in while its place was away was never counted as unspent (advance.lua), yet one
-- of the place's sessions may still have been there to take it (another that left made the
-- place away): its claim takes nothing off the count, and the record says so (`away`), so that
-- a give-back (release_claim.lua) returns it to where it was rather than to the count.
--
-- The record lives as long as the token can be presented (ARGV[3]), however long that is, so a
-- token can never claim twice because its first claim had lapsed.
local pools = redis.call('HGET', KEYS[1], 'pools')
if not pools then
  return {'unknown_sale'}
end
if not string.find(',' .. pools .. ',', ',' .. ARGV[4] .. ',', 1, true) then
  return {'unknown_pool'}
end
local now = now_ms()
local current = redis.call('HMGET', KEYS[2], 'idem', 'fp', 'last')
local outcome
if not current[1] then
  if redis.call('HEXISTS', KEYS[1], 'ended_at_ms') == 1 then
    return {'ended'}
  end
  redis.call('HSET', KEYS[2], 'idem', ARGV[1], 'fp', ARGV[2])
  -- A spent token no longer counts as an active admitted user (its hold does, in its pool).
  -- Never below nothing left in its batch: a count that wrong (a service of an older release
  -- claiming an uncounted token) errs towards admitting fewer, and heals when the batch expires.
  if redis.call('ZREM', KEYS[4], ARGV[7]) == 1 then
    redis.call('HSET', KEYS[2], 'away', '1')
  elseif (tonumber(redis.call('HGET', KEYS[3], ARGV[5])) or 0) > 0 then
    redis.call('HINCRBY', KEYS[3], ARGV[5], -1)
    redis.call('HINCRBY', KEYS[1], 'unspent', -1)
  end
  outcome = 'claimed'
elseif current[1] ~= ARGV[1] then
  return {'spent'}
elseif current[2] ~= ARGV[2] then
  return {'mismatch'}
else
  outcome = 'retry'
end
local stamp = math.max(now, (tonumber(current[3]) or 0) + 1)
local deadline = now + tonumber(ARGV[6])
redis.call('HSET', KEYS[2], 'a:' .. stamp, deadline, 'last', stamp)
-- Never sooner than a minute from now, whatever the clocks say: the record outlives its
-- attempts.
redis.call('PEXPIREAT', KEYS[2], math.max(tonumber(ARGV[3]), now + 60000))
return {outcome, tostring(deadline), redis.call('HGET', KEYS[1], 'buyer_seats') or '0',
  tostring(stamp)}
