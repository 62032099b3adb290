-- leave: sessions ended, a batch of them (a gateway sends the departures that came while its
-- previous batch was in flight together). Unless a session ended admitted (or the sale is over
-- for it), its ticket starts its grace period: it stays in line, and is skipped only if nobody
-- resumes it in time.
--
-- KEYS[1] gone (sorted set)   KEYS[2] holders (hash)   KEYS[3] the gateway's session set
-- KEYS[4] away (sorted set)
-- ARGV, four per departure: ticket, the session's id, grace (ms) or -1, its place in line
--         (grace -1: no grace needed; place 0: not known here, before the draw, say)
--         (at most a few hundred departures: Lua's unpack limit; the gateway sends at most 500)
--
-- Returns how many of the sessions still held their ticket. One that a newer session had taken
-- over changes nothing about the ticket; who held it is read once, as the batch begins (a ticket
-- is taken over by resume.lua, never inside a batch of departures). ZADD NX keeps the first grace
-- a ticket was given, and never brings a dead one (score 0) back.
--
-- A ticket whose grace starts here is also recorded as away, its place as its score (0 while
-- its place is not known: the leader places it once it knows the draw, advance.lua), until its
-- person comes back (resume.lua) or it dies (bury.lua): should its turn come meanwhile,
-- advance.lua lets it in without counting its token against the stock.
local tickets = {}
for i = 1, #ARGV, 4 do
  tickets[#tickets + 1] = ARGV[i]
end
local holders = redis.call('HMGET', KEYS[2], unpack(tickets))
local now = now_ms()
local freed = {}
local unregistered = {}
local held = 0
for i, ticket in ipairs(tickets) do
  local holder = holders[i]
  local session = ARGV[4 * i - 2]
  -- The ticket stays registered on this gateway while a newer session of this gateway holds it
  -- (a place taken back on the gateway it was already on): a sweep of this gateway, should it
  -- die, must still find it.
  local gateway = string.match(session, '^(.*)/[^/]*$') or session
  if not holder or holder == session or string.sub(holder, 1, #gateway + 1) ~= gateway .. '/' then
    unregistered[#unregistered + 1] = ticket
  end
  if not holder or holder == session then
    held = held + 1
    if holder then
      freed[#freed + 1] = ticket
    end
    local grace = tonumber(ARGV[4 * i - 1])
    local place = tonumber(ARGV[4 * i])
    if grace >= 0 and redis.call('ZADD', KEYS[1], 'NX', now + grace, ticket) == 1
        and grace > 0 then
      redis.call('ZADD', KEYS[4], place, ticket)
    end
  end
end
if #freed > 0 then
  redis.call('HDEL', KEYS[2], unpack(freed))
end
if #unregistered > 0 then
  redis.call('SREM', KEYS[3], unpack(unregistered))
end
return held
