-- rebuild_pool: the last, atomic step of rebuilding a pool whose Redis state was lost, from
-- PostgreSQL (booking/src/rebuild.rs). The reservation records and token pointers were written
-- just before; this step makes the pool servable again, all at once.
--
-- KEYS[1] cfg hash   KEYS[2] available   KEYS[3] held   KEYS[4] sold   KEYS[5] holds hash
-- KEYS[6] expiries zset
-- ARGV[1] capacity   ARGV[2] hold TTL (ms)   ARGV[3] opens_at (Unix ms)   ARGV[4] sale id
-- ARGV[5] pool id   ARGV[6] fare per seat   ARGV[7] currency   ARGV[8] seats sold
-- ARGV[9..] the live holds, as triples: reservation id, seats, hold expiry (Unix ms)
--
-- Returns {"rebuilt", available, held, sold}, {"intact"} if the pool has its state (nothing
-- changed: never overwrite live counters), or {"overcommitted", available} if sold and held
-- exceed the capacity (nothing changed: a person must look).
local cfg_armed = redis.call('HGET', KEYS[1], 'armed')
if cfg_armed == '1' and redis.call('EXISTS', KEYS[2]) == 1 then
  return {'intact'}
end
local capacity = tonumber(ARGV[1])
local sold = tonumber(ARGV[8])
local held = 0
for i = 9, #ARGV, 3 do
  held = held + tonumber(ARGV[i + 1])
end
local available = capacity - sold - held
if available < 0 then
  return {'overcommitted', tostring(available)}
end
redis.call('DEL', KEYS[5], KEYS[6])
for i = 9, #ARGV, 3 do
  redis.call('HSET', KEYS[5], ARGV[i], ARGV[i + 1])
  redis.call('ZADD', KEYS[6], ARGV[i + 2], ARGV[i])
end
redis.call('SET', KEYS[2], available)
redis.call('SET', KEYS[3], held)
redis.call('SET', KEYS[4], sold)
redis.call('HSET', KEYS[1], 'capacity', ARGV[1], 'hold_ttl_ms', ARGV[2], 'opens_at_ms', ARGV[3],
  'sale', ARGV[4], 'pool', ARGV[5], 'fare_minor', ARGV[6], 'currency', ARGV[7], 'armed', '1')
return {'rebuilt', tostring(available), tostring(held), tostring(sold)}
