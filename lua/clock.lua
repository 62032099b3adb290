-- clock.lua: Redis' own clock, in Unix ms. Every script that reads the time starts with this
-- file (the services prepend it when they load a script: platform/src/lua.rs), so arming,
-- opening, holds and every deadline are decided by one clock and gateways or booking services
-- with skewed clocks still agree.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The arming rule of arm_pool and arm_sale: once a sale has opened by this clock (as armed
-- before, in `hash`'s opens_at_ms, or as asked now, `asked`), arming is refused and answers
-- {"opened", at_ms}. Before the opening no admission can have happened, so arming may reset
-- what it writes. Returns nil when arming may go ahead.
local function refuse_if_opened(hash, asked)
  local now = now_ms()
  local armed_opens = tonumber(redis.call('HGET', hash, 'opens_at_ms'))
  if armed_opens and now >= armed_opens then
    return {'opened', tostring(armed_opens)}
  end
  if now >= tonumber(asked) then
    return {'opened', tostring(asked)}
  end
  return nil
end
