-- arm_sale: publish a sale's settings to the waiting room (after its pools are armed).
--
-- KEYS[1] sale meta hash   KEYS[2] ticket sequence   KEYS[3] frontier
-- ARGV[1] opens_at (Unix ms)   ARGV[2] admission rate (per second)   ARGV[3] token TTL (ms)
-- ARGV[4] max seats per booking   ARGV[5] active cap   ARGV[6] pool ids, comma-separated
-- ARGV[7] paused (0/1)   ARGV[8] stock factor   ARGV[9] a fresh lottery secret seed (hex)
-- ARGV[10] its commitment (SHA-256 hex)   ARGV[11] identity (optional/required)
-- ARGV[12] challenge (none/pow)   ARGV[13] proof-of-work difficulty (bits)
-- ARGV[14] most seats per buyer (0: no limit)   ARGV[15] the sale's grace in seconds (0: the
-- gateways' own)
-- ARGV[16] how long an unspent pass counts against the stock (ms; at most the token TTL)
--
-- Returns {"armed"} or {"opened", at_ms} exactly as arm_pool does, by the same clock and rule.
-- Arming before the opening resets the frontier but never the ticket sequence nor the lottery
-- secret: clients already in the pre-queue keep their tickets, and the commitment they were
-- shown stays the one the draw is checked against.
local refused = refuse_if_opened(KEYS[1], ARGV[1])
if refused then
  return refused
end

redis.call('HSET', KEYS[1], 'opens_at_ms', ARGV[1], 'rate', ARGV[2], 'token_ttl_ms', ARGV[3],
  'max_seats', ARGV[4], 'active_cap', ARGV[5], 'pools', ARGV[6], 'paused', ARGV[7],
  'stock_factor', ARGV[8], 'identity', ARGV[11], 'challenge', ARGV[12],
  'pow_difficulty', ARGV[13], 'buyer_seats', ARGV[14], 'stock_hold_ms', ARGV[16])
if ARGV[15] ~= '0' then
  redis.call('HSET', KEYS[1], 'grace_secs', ARGV[15])
else
  redis.call('HDEL', KEYS[1], 'grace_secs')
end
if redis.call('HSETNX', KEYS[1], 'lottery_secret', ARGV[9]) == 1 then
  redis.call('HSET', KEYS[1], 'lottery_commitment', ARGV[10])
end
redis.call('SETNX', KEYS[2], 0)
redis.call('SET', KEYS[3], 0)
return {'armed'}
