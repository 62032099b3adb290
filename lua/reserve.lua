-- reserve: the pool step of a reservation: check stock, take seats, record a hold. Idempotent.
--
-- KEYS[1] pool cfg hash   KEYS[2] available   KEYS[3] held   KEYS[4] holds hash
-- KEYS[5] expiries zset   KEYS[6] the token's reservation record in this pool (hash)
-- ARGV[1] token id (jti)   ARGV[2] Idempotency-Key   ARGV[3] seats
-- ARGV[4] new reservation id   ARGV[5] new reservation secret   ARGV[6] ticket
--
-- Returns a flat array of strings, first the outcome:
--   {"reserved", id, secret, seats, hold_expires_at_ms, reserved_at_ms}  seats taken now
--   {"replay",   id, secret, seats, hold_expires_at_ms, reserved_at_ms}  this key's earlier result
--   {"sold_out", available}          fewer seats than asked are left (nothing changed)
--   {"spent"}                        this token reserved here under another Idempotency-Key
--   {"not_armed"}                    the pool's config or counter is missing (nothing changed)
--
-- A missing counter is refused, never read as zero or nil arithmetic: it means the pool was
-- never armed or its Redis state was lost, and selling from it could sell a seat twice.
-- The replay check comes first so a retry gets its original answer even after a sell-out.
local rec = redis.call('HMGET', KEYS[6], 'id', 'idem', 'secret', 'seats', 'expires_ms', 'at_ms')
if rec[1] then
  if rec[2] ~= ARGV[2] then
    return {'spent'}
  end
  return {'replay', rec[1], rec[3], rec[4], rec[5], rec[6]}
end

local ttl = tonumber(redis.call('HGET', KEYS[1], 'hold_ttl_ms'))
local available = tonumber(redis.call('GET', KEYS[2]))
if not ttl or not available then
  return {'not_armed'}
end
local seats = tonumber(ARGV[3])
if available < seats then
  return {'sold_out', tostring(available)}
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expires = now + ttl
redis.call('DECRBY', KEYS[2], seats)
redis.call('INCRBY', KEYS[3], seats)
redis.call('HSET', KEYS[4], ARGV[4], ARGV[1])
redis.call('ZADD', KEYS[5], expires, ARGV[4])
redis.call('HSET', KEYS[6], 'id', ARGV[4], 'idem', ARGV[2], 'secret', ARGV[5], 'seats', ARGV[3],
  'expires_ms', tostring(expires), 'at_ms', tostring(now), 'ticket', ARGV[6], 'state', 'held')
return {'reserved', ARGV[4], ARGV[5], ARGV[3], tostring(expires), tostring(now)}
