-- resume: take a ticket back on a new session (the client reconnected with its resume token).
--
-- KEYS[1] sale meta hash   KEYS[2] ticket sequence   KEYS[3] gone (sorted set)
-- KEYS[4] holders (hash)   KEYS[5] this gateway's session set   KEYS[6] frontier
-- KEYS[7] this gateway's liveness key   KEYS[8] the sale's gateway registry (set)
-- ARGV[1] ticket   ARGV[2] the new session's id (`<gateway>/<n>`)   ARGV[3] this gateway's
-- instance id   ARGV[4] the liveness key's lifetime (ms)
--
-- Returns {status, opens_at_ms, sold_out (0/1), lottery commitment, frontier} with status one of:
--   "resumed"   the ticket is alive: it keeps its place, and this session now holds it
--   "expired"   the client was gone longer than the grace: the ticket is dead for good
--   "unknown"   the sale is not armed, or the ticket was never handed out (state was lost)
-- The frontier is returned so the new session never shows a position worse than the old one
-- did, even if this gateway's view is a tick older than the gateway the client came from.
-- A session that ends later than a newer one took its ticket over (a half-open connection, say)
-- must not mark the ticket gone: the holder recorded here lets leave.lua tell them apart.
local opens = redis.call('HGET', KEYS[1], 'opens_at_ms')
local ticket = tonumber(ARGV[1])
if not opens or ticket > tonumber(redis.call('GET', KEYS[2]) or '0') then
  return {'unknown', '0', '0', ''}
end
local deadline = redis.call('ZSCORE', KEYS[3], ARGV[1])
if deadline then
  if tonumber(deadline) <= now_ms() then
    return {'expired', opens, '0', ''}
  end
  redis.call('ZREM', KEYS[3], ARGV[1])
end
redis.call('HSET', KEYS[4], ARGV[1], ARGV[2])
register_sessions(KEYS[5], KEYS[7], KEYS[8], {ARGV[1]}, ARGV[3], ARGV[4])
local sold_out = '0'
if redis.call('HGET', KEYS[1], 'sold_out') == '1' then
  sold_out = '1'
end
return {'resumed', opens, sold_out, redis.call('HGET', KEYS[1], 'lottery_commitment') or '',
  redis.call('GET', KEYS[6]) or '0'}
