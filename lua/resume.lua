-- resume: take a ticket back on a new session (the client reconnected with its resume token).
--
-- KEYS[1] sale meta hash   KEYS[2] ticket sequence   KEYS[3] gone (sorted set)
-- KEYS[4] holders (hash)   KEYS[5] this gateway's session set   KEYS[6] frontier
-- KEYS[7] this gateway's liveness key   KEYS[8] the sale's gateway registry (set)
-- KEYS[9] owners (hash: ticket -> buyer mark, for tickets made a buyer's by a resume)
-- KEYS[10] away (sorted set)   KEYS[11] admitted away (sorted set)
-- KEYS[12] unspent tokens per admission batch (hash: expiry -> count)
-- ARGV[1] ticket   ARGV[2] the new session's id (`<gateway>/<n>`)   ARGV[3] this gateway's
-- instance id   ARGV[4] the liveness key's lifetime (ms)   ARGV[5] the mark of the buyer taking
-- the ticket back ("" for someone not signed in)   ARGV[6] "adopt": the ticket was taken before
-- its buyer signed in, and becomes theirs now (if nobody made it theirs first)
--
-- Returns {status, opens_at_ms, sold_out (0/1), lottery commitment, frontier, previous holder}
-- with status one of:
--   "resumed"   the ticket is alive: it keeps its place, and this session now holds it
--   "expired"   the client was gone longer than the grace, or the sale has ended: the ticket is
--               dead for good
--   "unknown"   the sale is not armed, or the ticket was never handed out (state was lost)
--   "foreign"   another buyer made the ticket theirs: the token it was taken with is spent
-- The frontier is returned so the new session never shows a position worse than the old one
-- did, even if this gateway's view is a tick older than the gateway the client came from.
-- The previous holder is the session (`<gateway>/<n>`) the ticket was taken from, "" if none was
-- recorded (a ticket's first session is not: only a resume records its holder): the gateway
-- tells that session's gateway to close it, so a place has one live session across the fleet.
-- A session that ends later than a newer one took its ticket over (a half-open connection, say)
-- must not mark the ticket gone: the holder recorded here lets leave.lua tell them apart.
-- A ticket let in while its person was away (advance.lua) counts as unspent from now on, in
-- its batch, for as long as the batch counts (advance.lua).
local status, opens, owner, deadline =
  ticket_standing(KEYS[1], KEYS[2], KEYS[3], KEYS[9], ARGV[1], ARGV[5])
if status ~= 'alive' then
  return {status, opens, '0', ''}
end
if deadline then
  redis.call('ZREM', KEYS[3], ARGV[1])
  redis.call('ZREM', KEYS[10], ARGV[1])
  local batch = tonumber(redis.call('ZSCORE', KEYS[11], ARGV[1]))
  if batch then
    redis.call('ZREM', KEYS[11], ARGV[1])
    if redis.call('HEXISTS', KEYS[12], batch) == 1 then
      redis.call('HINCRBY', KEYS[12], batch, 1)
      redis.call('HINCRBY', KEYS[1], 'unspent', 1)
    end
  end
end
if not owner and ARGV[6] == 'adopt' and ARGV[5] ~= '' then
  redis.call('HSET', KEYS[9], ARGV[1], ARGV[5])
end
local previous = redis.call('HGET', KEYS[4], ARGV[1])
if not previous or previous == ARGV[2] then
  previous = ''
end
redis.call('HSET', KEYS[4], ARGV[1], ARGV[2])
register_sessions(KEYS[5], KEYS[7], KEYS[8], {ARGV[1]}, ARGV[3], ARGV[4])
local sold_out = '0'
if redis.call('HGET', KEYS[1], 'sold_out') == '1' then
  sold_out = '1'
end
return {'resumed', opens, sold_out, redis.call('HGET', KEYS[1], 'lottery_commitment') or '',
  redis.call('GET', KEYS[6]) or '0', previous}
