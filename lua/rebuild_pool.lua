-- rebuild_pool: restores, in one atomic step, a pool whose Redis state was lost, or that lost
-- writes in a failover (worker.rs refused it: cfg `diverged`), from PostgreSQL
-- (booking/src/rebuild.rs): every reservation's record and its token's pointer, the live holds,
-- the counters, the event sequence, and the config last. A healthy pool is never touched: the
-- check comes before any write, so a rebuild run by mistake on a healthy pool changes nothing.
--
-- KEYS[1] cfg hash   KEYS[2] available   KEYS[3] held   KEYS[4] sold   KEYS[5] holds hash
-- KEYS[6] expiries zset   KEYS[7] outbox   KEYS[8..] per restored reservation, its record then
-- its token's pointer
-- ARGV[1] capacity   ARGV[2] hold TTL (ms)   ARGV[3] opens_at (Unix ms)   ARGV[4] sale id
-- ARGV[5] pool id   ARGV[6] fare per seat   ARGV[7] currency   ARGV[8] seats sold
-- ARGV[9] the highest event sequence number PostgreSQL holds for the pool
-- ARGV[10] number of live holds H, then H triples: reservation id, seats, hold expiry (Unix ms)
-- then, per reservation of KEYS[8..] in the same order, 10 values: id, token id, secret, seats,
--   ticket, hold expiry, reserved at (Unix ms), state, payment id ("" if none), buyer ("" if
--   none: the events of the reservation's end carry it, so the buyer's seats are given back)
--
-- Returns {"rebuilt", available, held, sold}, {"intact"} if the pool has its state and is not
-- refused (nothing changed: never overwrite live counters), {"busy"} if a refused pool still has
-- events to relay (nothing changed: PostgreSQL does not know all of its decisions yet; run again
-- once the relay has sent them), or {"overcommitted", available} if sold and held exceed the
-- capacity (nothing changed: a person must look).
local armed = redis.call('HMGET', KEYS[1], 'armed', 'diverged', 'seq')
local whole = armed[1] == '1' and redis.call('EXISTS', KEYS[2], KEYS[3], KEYS[4]) == 3
if whole and not armed[2] then
  return {'intact'}
end
if whole and redis.call('XLEN', KEYS[7]) > 0 then
  return {'busy'}
end
local capacity = tonumber(ARGV[1])
local sold = tonumber(ARGV[8])
local holds = tonumber(ARGV[10])
local held = 0
for i = 11, 10 + 3 * holds, 3 do
  held = held + tonumber(ARGV[i + 1])
end
local available = capacity - sold - held
if available < 0 then
  return {'overcommitted', tostring(available)}
end

local r = 11 + 3 * holds
for k = 8, #KEYS, 2 do
  local id, jti, secret, seats, ticket, expires, at, state, payment, buyer =
    ARGV[r], ARGV[r + 1], ARGV[r + 2], ARGV[r + 3], ARGV[r + 4], ARGV[r + 5], ARGV[r + 6],
    ARGV[r + 7], ARGV[r + 8], ARGV[r + 9]
  r = r + 10
  -- A record Redis still has (a pool that lost only some writes) keeps its secret, its
  -- Idempotency-Key and the payment started for it: its holder can still read, pay and replay
  -- it, and the checkout they were sent to still buys it.
  local kept = redis.call('HMGET', KEYS[k], 'secret', 'idem', 'pending_payment_id',
    'pending_checkout_url', 'pending_status')
  local idem = ''
  if kept[1] then
    secret, idem = kept[1], kept[2] or ''
  end
  redis.call('DEL', KEYS[k], KEYS[k + 1])
  -- The record is durable: its SeatReserved reached PostgreSQL, so it is never aborted.
  redis.call('HSET', KEYS[k], 'id', id, 'jti', jti, 'idem', idem, 'secret', secret, 'seats', seats,
    'ticket', ticket, 'expires_ms', expires, 'at_ms', at, 'state', state, 'durable', '1')
  if payment ~= '' then
    redis.call('HSET', KEYS[k], 'payment_id', payment)
  end
  if kept[3] and kept[4] then
    redis.call('HSET', KEYS[k], 'pending_payment_id', kept[3], 'pending_checkout_url', kept[4],
      'pending_status', kept[5] or '')
  end
  if buyer ~= '' then
    redis.call('HSET', KEYS[k], 'buyer', buyer)
  end
  -- The token made this reservation, so it cannot make another.
  redis.call('HSET', KEYS[k + 1], 'id', id, 'idem', idem, 'secret', secret, 'seats', seats,
    'expires_ms', expires, 'at_ms', at, 'entry', '0-0')
end
redis.call('DEL', KEYS[5], KEYS[6])
for i = 11, 10 + 3 * holds, 3 do
  redis.call('HSET', KEYS[5], ARGV[i], ARGV[i + 1])
  redis.call('ZADD', KEYS[6], ARGV[i + 2], ARGV[i])
end
redis.call('SET', KEYS[2], available)
redis.call('SET', KEYS[3], held)
redis.call('SET', KEYS[4], sold)
-- The sequence goes on past every number already used, here or in Kafka: no number is handed out
-- twice, so the pool is not taken for one that lost writes again.
local seq = math.max(tonumber(armed[3] or '0'), tonumber(ARGV[9]))
redis.call('HDEL', KEYS[1], 'diverged')
redis.call('HSET', KEYS[1], 'capacity', ARGV[1], 'hold_ttl_ms', ARGV[2], 'opens_at_ms', ARGV[3],
  'sale', ARGV[4], 'pool', ARGV[5], 'fare_minor', ARGV[6], 'currency', ARGV[7], 'seq', seq,
  'armed', '1')
return {'rebuilt', tostring(available), tostring(held), tostring(sold)}
