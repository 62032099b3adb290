-- sale_lib: helpers shared by the waiting-room scripts of a sale's slot. The gateway prepends
-- clock.lua and this file to join, resume, standing, leave, sweep, advance and bury
-- (platform/src/lua.rs),
-- as the booking service does to its claim of a token, so there is one definition of "now" and
-- of closing the pre-queue.

-- Closes the pre-queue at the first script run at or after the opening: its size is the last
-- ticket handed out before, and its digest the hash chain over their draw nonces at that
-- moment. Nothing can join the pre-queue after this, so the digest is final.
local function close_prequeue(meta, seq, now)
  if redis.call('HEXISTS', meta, 'prequeue_size') == 1 then
    return
  end
  local opens = tonumber(redis.call('HGET', meta, 'opens_at_ms'))
  if not opens or now < opens then
    return
  end
  redis.call('HSET', meta,
    'prequeue_size', redis.call('GET', seq) or '0',
    'prequeue_digest', redis.call('HGET', meta, 'prequeue_chain') or '',
    'prequeue_closed_at_ms', now)
end

-- Registers sessions for tickets on a gateway (one SADD for a whole batch of joins), and in the
-- same step renews that gateway's liveness and its place in the sale's registry: a gateway that
-- holds a session is always seen alive, even if its room had just retired (retire.lua) and its
-- first tick has not come yet.
local function register_sessions(sessions, alive, registry, tickets, gateway, lease_ms)
  redis.call('SADD', sessions, unpack(tickets))
  redis.call('SET', alive, 1, 'PX', lease_ms)
  redis.call('SADD', registry, gateway)
end

-- Whether `ticket` still stands for whoever presents its resume token, the buyer marked `mark`
-- ("" for someone not signed in), by one rule for resume.lua and standing.lua: "unknown" (the
-- sale is not armed, or never handed the ticket out), "expired" (the sale has ended, or the
-- ticket's grace ran out), "foreign" (another buyer made it theirs) or "alive". Also returns the
-- sale's opening, the ticket's owner (false if none) and its grace deadline (false while a
-- session holds it).
local function ticket_standing(meta, seq, gone, owners, ticket, mark)
  local opens = redis.call('HGET', meta, 'opens_at_ms')
  if not opens or tonumber(ticket) > tonumber(redis.call('GET', seq) or '0') then
    return 'unknown', '0', false, false
  end
  if redis.call('HEXISTS', meta, 'ended_at_ms') == 1 then
    return 'expired', opens, false, false
  end
  local owner = redis.call('HGET', owners, ticket)
  if owner and owner ~= mark then
    return 'foreign', opens, owner, false
  end
  local deadline = redis.call('ZSCORE', gone, ticket)
  if deadline and tonumber(deadline) <= now_ms() then
    return 'expired', opens, owner, deadline
  end
  return 'alive', opens, owner, deadline
end
