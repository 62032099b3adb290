-- advance: move a sale's admission frontier forward, by the lease holder only.
--
-- KEYS[1] sale meta hash   KEYS[2] ticket sequence   KEYS[3] frontier   KEYS[4] leader key
-- ARGV[1] this instance's id   ARGV[2] most tickets to admit now (the rate limiter's permits)
--
-- Returns {admitted, frontier}:
--   admitted = -1   this instance does not hold the lease (nothing changed)
--   admitted = -2   the sale is not armed (nothing changed)
--   admitted >= 0   tickets admitted by this call; frontier is the new frontier
-- The frontier never passes the last ticket handed out, nothing is admitted before the opening
-- by Redis' clock (the one arming uses), and nothing while the sale's `paused` flag is "1".
if redis.call('GET', KEYS[4]) ~= ARGV[1] then
  return {-1, 0}
end
local opens = tonumber(redis.call('HGET', KEYS[1], 'opens_at_ms'))
if not opens then
  return {-2, 0}
end
local frontier = tonumber(redis.call('GET', KEYS[3]) or '0')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- Before the opening, and while an operator has paused admission, nobody is let in.
if now < opens or redis.call('HGET', KEYS[1], 'paused') == '1' then
  return {0, frontier}
end
local issued = tonumber(redis.call('GET', KEYS[2]) or '0')
local n = math.min(tonumber(ARGV[2]), issued - frontier)
if n > 0 then
  frontier = redis.call('INCRBY', KEYS[3], n)
else
  n = 0
end
return {n, frontier}
