-- leave: a session ended. Unless it ended admitted (or the sale is over for it), its ticket
-- starts its grace period: it stays in line, and is skipped only if nobody resumes it in time.
--
-- KEYS[1] gone (sorted set)   KEYS[2] holders (hash)   KEYS[3] the gateway's session set
-- ARGV[1] ticket   ARGV[2] the session's id   ARGV[3] grace (ms), or -1: no grace needed
--
-- Returns 1 if this session still held the ticket, 0 if a newer session had taken it over
-- (then nothing about the ticket changes).
redis.call('SREM', KEYS[3], ARGV[1])
local holder = redis.call('HGET', KEYS[2], ARGV[1])
if holder and holder ~= ARGV[2] then
  return 0
end
if holder then
  redis.call('HDEL', KEYS[2], ARGV[1])
end
local grace = tonumber(ARGV[3])
if grace >= 0 then
  redis.call('ZADD', KEYS[1], 'NX', now_ms() + grace, ARGV[1])
end
return 1
