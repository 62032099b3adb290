-- end_pool: ends a pool of a sale that is over (`floodgate-booking sale end`). From now on
-- reserve.lua makes no new hold here (`ended`); holds and records already made keep working
-- (payments, webhooks and their events go on). A pool ends only once nothing is left in flight:
-- no seat in a live hold (reserved or being paid) and no event waiting in its outbox, so what
-- PostgreSQL will hold is final once the consumer has applied the pool's events.
--
-- KEYS[1] cfg hash   KEYS[2] held (integer)   KEYS[3] outbox (stream)
--
-- Returns {"ended", ended_at_ms} (now, or when it ended before), {"holding", seats held},
-- {"relaying", events waiting}, or {"not_armed"} (nothing changed in the last three).
local cfg = redis.call('HMGET', KEYS[1], 'armed', 'ended_at_ms')
if cfg[1] ~= '1' then
  return {'not_armed'}
end
if cfg[2] then
  return {'ended', cfg[2]}
end
local held = tonumber(redis.call('GET', KEYS[2]) or '0')
if held > 0 then
  return {'holding', tostring(held)}
end
local waiting = redis.call('XLEN', KEYS[3])
if waiting > 0 then
  return {'relaying', tostring(waiting)}
end
local now = tostring(now_ms())
redis.call('HSET', KEYS[1], 'ended_at_ms', now)
return {'ended', now}
