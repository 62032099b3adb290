-- advance: the admission controller's step, by the lease holder only.
--
-- KEYS[1] sale meta hash   KEYS[2] ticket sequence   KEYS[3] frontier   KEYS[4] leader key
-- KEYS[5] dead places   KEYS[6] admits stream   KEYS[7] batches (sorted set)   KEYS[8] tokens
-- KEYS[9] away (sorted set)   KEYS[10] admitted away (sorted set)
-- ARGV[1] the caller's fencing token (from lease.lua)
-- ARGV[2] most live tickets to admit now (the rate limiter's permits, within the active cap
--         and what stock can serve; 0 to do only the upkeep): people who are there; away
--         places passed on the way take none
-- ARGV[3] the furthest place this call may pass (0: no bound): while away tickets remain
--         whose place is not known yet, the leader places those just past the frontier and
--         asks no step beyond them (an unplaced one would count as someone there)
-- ARGV[4..] pairs: ticket, its place in line, for away tickets recorded before their place
--         was known (the leader computes places from the draw; at most a few thousand)
--
-- Returns {admitted, frontier, exp}:
--   admitted = -1   the caller does not hold the lease with this token (nothing changed)
--   admitted = -2   the sale is not armed (nothing changed)
--   admitted >= 0   live tickets admitted by this call (away ones too); frontier is the new
--                   frontier, and exp the expiry of their tokens (0 if none were admitted)
--
-- The frontier moves past dead places without counting them, so the governed rate admits only
-- people who are still there; it never passes the last ticket handed out. Nothing is admitted
-- before the opening by Redis' clock, while paused, or once sold out. Each batch's tokens
-- expire together at `exp`, which is written to the admits stream for the gateways that mint
-- them, and counted as unspent until claimed (claim_token.lua) or expired (here).
--
-- A place whose person is away (they left inside their grace: leave.lua) is admitted like any
-- live one, and keeps their turn should they come back, but its token is not counted as
-- unspent: nobody holds it, and counted it would keep its share of the stock from the people
-- behind for the token's whole life (near the end of the stock, they would wait that long). It
-- is recorded in `admitted away` instead, and counts from the moment its person comes back
-- (resume.lua) until it is spent or its batch stops counting, like the rest of it. Nor does it
-- take one of the rate's permits: the rate paces the backend's work, which nobody away makes,
-- so a stranger's places dropped at once do not slow the line behind them (a person who comes
-- back after their turn is let in at once, within the stock). An away ticket whose
-- place was not known when its person left (before the draw) is placed here first, once the
-- leader knows the draw: those just past the frontier first, and no step passes the places
-- the leader looked at while any remain unplaced; nor does the leader let anyone in before it
-- knows the draw while any is away (the tick that closes the pre-queue). Only a departure
-- recorded since the leader's read can count as if its person were there.
if redis.call('GET', KEYS[4]) ~= ARGV[1] then
  return {-1, 0, 0}
end
local opens = tonumber(redis.call('HGET', KEYS[1], 'opens_at_ms'))
if not opens then
  return {-2, 0, 0}
end
local now = now_ms()
close_prequeue(KEYS[1], KEYS[2], now)

-- Batches past their hold on the stock (their tokens' expiry, or sooner where the sale says:
-- `stock_hold_ms`) stop counting as active: their unspent tokens no longer hold stock, and a
-- later claim or return of one of them finds no count to change (claim_token.lua,
-- resume.lua), as for an expired token.
local expired = redis.call('ZRANGEBYSCORE', KEYS[7], '-inf', now)
for _, exp in ipairs(expired) do
  local unspent = tonumber(redis.call('HGET', KEYS[8], exp) or '0')
  -- Only when something is left: Lua renders -0 as "-0", which HINCRBY refuses as "not an
  -- integer", and that error would stop admission for good once a fully spent batch expires.
  if unspent ~= 0 then
    redis.call('HINCRBY', KEYS[1], 'unspent', -unspent)
  end
  redis.call('HDEL', KEYS[8], exp)
  redis.call('ZREM', KEYS[7], exp)
end
redis.call('ZREMRANGEBYSCORE', KEYS[10], '-inf', now)

for i = 4, #ARGV, 2 do
  redis.call('ZADD', KEYS[9], 'XX', ARGV[i + 1], ARGV[i])
end

local frontier = tonumber(redis.call('GET', KEYS[3]) or '0')
local meta = redis.call('HMGET', KEYS[1], 'paused', 'sold_out', 'token_ttl_ms', 'stock_hold_ms')
if now < opens or meta[1] == '1' or meta[2] == '1' then
  return {0, frontier, 0}
end
local issued = tonumber(redis.call('GET', KEYS[2]) or '0')
local need = tonumber(ARGV[2])
-- No step goes past the last ticket handed out, nor past `furthest` when the leader set one.
local furthest = tonumber(ARGV[3])
if furthest > 0 and furthest < issued then
  issued = furthest
end
-- People let in who are there (they take the rate's permits), and everyone let in (away too).
local present, admitted = 0, 0
local target = frontier
-- Each round takes `need` more places and gives back those that are dead or away; it ends when
-- enough people who are there are in, or the line is exhausted, or this call has passed
-- PASS_MOST places (a long run of dead or away places is passed over the next ticks, so one
-- call's Redis work stays bounded whatever a stranger left in the line).
local PASS_MOST = 10000
while need > 0 and target < issued and target - frontier < PASS_MOST do
  local upto = math.min(target + need, issued)
  local dead = redis.call('ZCOUNT', KEYS[5], '(' .. target, upto)
  local gone = redis.call('ZCOUNT', KEYS[9], '(' .. target, upto)
  -- Never fewer than none (an away place is never dead, but a gateway of an older release
  -- buries without forgetting it).
  local there = math.max((upto - target) - dead - gone, 0)
  present = present + there
  admitted = admitted + math.max((upto - target) - dead, 0)
  need = need - there
  target = upto
end
local away = {}
if target > frontier then
  -- At most PASS_MOST, each placed in line once: the work is its place's own, done once.
  away = redis.call('ZRANGEBYSCORE', KEYS[9], '(' .. frontier, target)
  redis.call('SET', KEYS[3], target)
  redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', target)
  redis.call('ZREMRANGEBYSCORE', KEYS[9], '(0', target)
end
local exp = 0
if admitted > 0 then
  local ttl = tonumber(meta[3] or '0')
  exp = now + ttl
  -- Written even when nobody present was admitted (0): a returner's token counts in its batch.
  redis.call('HINCRBY', KEYS[8], exp, present)
  -- Scored by the end of its hold on the stock, named by its tokens' expiry.
  local hold = math.min(tonumber(meta[4] or '0') or 0, ttl)
  if hold <= 0 then
    hold = ttl
  end
  redis.call('ZADD', KEYS[7], now + hold, exp)
  if present > 0 then
    redis.call('HINCRBY', KEYS[1], 'unspent', present)
  end
  for _, ticket in ipairs(away) do
    redis.call('ZADD', KEYS[10], exp, ticket)
  end
  redis.call('HINCRBY', KEYS[1], 'admitted_total', admitted)
  -- Gateways look up a batch's expiry here for as long as its tokens live (and a minute more).
  redis.call('XADD', KEYS[6], 'MINID', '~', now - ttl - 60000, '*',
    'from', frontier, 'to', target, 'n', admitted, 'exp', exp)
end
return {admitted, target, exp}
