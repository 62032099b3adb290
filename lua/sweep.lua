-- sweep: a gateway died without saying goodbye (its liveness key expired). Its sessions' tickets
-- start their grace now, as if each client had disconnected: those that reconnect elsewhere in
-- time keep their places; the rest are skipped.
--
-- KEYS[1] the dead gateway's liveness key   KEYS[2] its session set   KEYS[3] holders (hash)
-- KEYS[4] gone (sorted set)   KEYS[5] the sale's gateway registry (set)   KEYS[6] away (sorted set)
-- ARGV[1] the dead gateway's id   ARGV[2] grace (ms)   ARGV[3] most tickets to handle now
--
-- Returns the number of tickets handled, or -1 if the gateway is alive after all. A ticket that
-- has meanwhile been resumed on another gateway (its holder names that gateway) is left alone.
-- A ticket whose grace starts here is away, as leave.lua records it, its place not known here
-- (0: the leader places it from the draw, advance.lua): a crashed gateway's crowd holds no stock
-- it is not there to use.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return -1
end
local deadline = now_ms() + tonumber(ARGV[2])
local mine = ARGV[1] .. '/'
local tickets = redis.call('SPOP', KEYS[2], tonumber(ARGV[3]))
for _, ticket in ipairs(tickets) do
  local holder = redis.call('HGET', KEYS[3], ticket)
  if not holder or string.sub(holder, 1, #mine) == mine then
    if holder then
      redis.call('HDEL', KEYS[3], ticket)
    end
    if redis.call('ZADD', KEYS[4], 'NX', deadline, ticket) == 1 and tonumber(ARGV[2]) > 0 then
      redis.call('ZADD', KEYS[6], 0, ticket)
    end
  end
end
if redis.call('SCARD', KEYS[2]) == 0 then
  redis.call('SREM', KEYS[5], ARGV[1])
end
return #tickets
