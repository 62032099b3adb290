-- arm_sale: publish a sale's settings to the waiting room (after its pools are armed).
--
-- KEYS[1] sale meta hash   KEYS[2] ticket sequence   KEYS[3] frontier
-- ARGV[1] opens_at (Unix ms)   ARGV[2] admission rate (per second)   ARGV[3] token TTL (ms)
-- ARGV[4] max seats per booking   ARGV[5] active cap   ARGV[6] pool ids, comma-separated
-- ARGV[7] paused (0/1)   ARGV[8] stock factor   ARGV[9] a fresh lottery secret seed (hex)
-- ARGV[10] its commitment (SHA-256 hex)
--
-- Returns {"armed"} or {"opened", at_ms} exactly as arm_pool does, by the same clock and rule.
-- Arming before the opening resets the frontier but never the ticket sequence nor the lottery
-- secret: clients already in the pre-queue keep their tickets, and the commitment they were
-- shown stays the one the draw is checked against.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local armed_opens = tonumber(redis.call('HGET', KEYS[1], 'opens_at_ms'))
if armed_opens and now >= armed_opens then
  return {'opened', tostring(armed_opens)}
end
local opens = tonumber(ARGV[1])
if now >= opens then
  return {'opened', tostring(opens)}
end

redis.call('HSET', KEYS[1], 'opens_at_ms', ARGV[1], 'rate', ARGV[2], 'token_ttl_ms', ARGV[3],
  'max_seats', ARGV[4], 'active_cap', ARGV[5], 'pools', ARGV[6], 'paused', ARGV[7],
  'stock_factor', ARGV[8])
if redis.call('HSETNX', KEYS[1], 'lottery_secret', ARGV[9]) == 1 then
  redis.call('HSET', KEYS[1], 'lottery_commitment', ARGV[10])
end
redis.call('SETNX', KEYS[2], 0)
redis.call('SET', KEYS[3], 0)
return {'armed'}
