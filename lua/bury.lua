-- bury: declare dead the tickets whose grace has run out, so the controller skips their places.
--
-- KEYS[1] sale meta hash   KEYS[2] frontier   KEYS[3] gone (sorted set)   KEYS[4] dead places
-- KEYS[5] deaths stream   KEYS[6] away (sorted set)
-- ARGV pairs: ticket, its place in line (the gateway computes places from the draw)
--
-- Returns the number of places newly declared dead. Each ticket's grace is checked again here,
-- by Redis' clock, so a ticket resumed since the caller looked is left alone. A dead ticket
-- keeps score 0 in `gone`, which resume.lua reads as "expired"; a place the frontier has already
-- passed needs no skipping and is not recorded.
local now = now_ms()
local frontier = tonumber(redis.call('GET', KEYS[2]) or '0')
local buried = 0
for i = 1, #ARGV, 2 do
  local deadline = tonumber(redis.call('ZSCORE', KEYS[3], ARGV[i]))
  if deadline and deadline > 0 and deadline <= now then
    redis.call('ZADD', KEYS[3], 0, ARGV[i])
    -- Its person is not coming back: the place is skipped, not let in away.
    redis.call('ZREM', KEYS[6], ARGV[i])
    local place = tonumber(ARGV[i + 1])
    if place > frontier then
      redis.call('ZADD', KEYS[4], place, ARGV[i + 1])
      redis.call('XADD', KEYS[5], '*', 'p', ARGV[i + 1])
      buried = buried + 1
    end
  end
end
if buried > 0 then
  redis.call('HINCRBY', KEYS[1], 'dead_total', buried)
end
return buried
