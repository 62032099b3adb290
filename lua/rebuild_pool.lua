-- rebuild_pool: restores, in one atomic step, a pool whose Redis state was lost, from PostgreSQL
-- (booking/src/rebuild.rs): every reservation's record and its token's pointer, the live holds,
-- the counters, and the config last. A pool that has its state is never touched: the check comes
-- before any write, so a rebuild run by mistake on a healthy pool changes nothing at all.
--
-- KEYS[1] cfg hash   KEYS[2] available   KEYS[3] held   KEYS[4] sold   KEYS[5] holds hash
-- KEYS[6] expiries zset   KEYS[7..] per restored reservation, its record then its token's pointer
-- ARGV[1] capacity   ARGV[2] hold TTL (ms)   ARGV[3] opens_at (Unix ms)   ARGV[4] sale id
-- ARGV[5] pool id   ARGV[6] fare per seat   ARGV[7] currency   ARGV[8] seats sold
-- ARGV[9] number of live holds H, then H triples: reservation id, seats, hold expiry (Unix ms)
-- then, per reservation of KEYS[7..] in the same order, 9 values: id, token id, secret, seats,
--   ticket, hold expiry, reserved at (Unix ms), state, payment id ("" if none)
--
-- Returns {"rebuilt", available, held, sold}, {"intact"} if the pool has its state (nothing
-- changed: never overwrite live counters), or {"overcommitted", available} if sold and held
-- exceed the capacity (nothing changed: a person must look).
if redis.call('HGET', KEYS[1], 'armed') == '1' and redis.call('EXISTS', KEYS[2], KEYS[3], KEYS[4]) == 3 then
  return {'intact'}
end
local capacity = tonumber(ARGV[1])
local sold = tonumber(ARGV[8])
local holds = tonumber(ARGV[9])
local held = 0
for i = 10, 9 + 3 * holds, 3 do
  held = held + tonumber(ARGV[i + 1])
end
local available = capacity - sold - held
if available < 0 then
  return {'overcommitted', tostring(available)}
end

local r = 10 + 3 * holds
for k = 7, #KEYS, 2 do
  local id, jti, secret, seats, ticket, expires, at, state, payment =
    ARGV[r], ARGV[r + 1], ARGV[r + 2], ARGV[r + 3], ARGV[r + 4], ARGV[r + 5], ARGV[r + 6],
    ARGV[r + 7], ARGV[r + 8]
  r = r + 9
  redis.call('DEL', KEYS[k], KEYS[k + 1])
  -- The record is durable: its SeatReserved reached PostgreSQL, so it is never aborted.
  redis.call('HSET', KEYS[k], 'id', id, 'jti', jti, 'idem', '', 'secret', secret, 'seats', seats,
    'ticket', ticket, 'expires_ms', expires, 'at_ms', at, 'state', state, 'durable', '1')
  if payment ~= '' then
    redis.call('HSET', KEYS[k], 'payment_id', payment)
  end
  -- The token made this reservation, so it cannot make another.
  redis.call('HSET', KEYS[k + 1], 'id', id, 'idem', '', 'secret', secret, 'seats', seats,
    'expires_ms', expires, 'at_ms', at, 'entry', '0-0')
end
redis.call('DEL', KEYS[5], KEYS[6])
for i = 10, 9 + 3 * holds, 3 do
  redis.call('HSET', KEYS[5], ARGV[i], ARGV[i + 1])
  redis.call('ZADD', KEYS[6], ARGV[i + 2], ARGV[i])
end
redis.call('SET', KEYS[2], available)
redis.call('SET', KEYS[3], held)
redis.call('SET', KEYS[4], sold)
redis.call('HSET', KEYS[1], 'capacity', ARGV[1], 'hold_ttl_ms', ARGV[2], 'opens_at_ms', ARGV[3],
  'sale', ARGV[4], 'pool', ARGV[5], 'fare_minor', ARGV[6], 'currency', ARGV[7], 'armed', '1')
return {'rebuilt', tostring(available), tostring(held), tostring(sold)}
