-- lease: take or renew the admission-controller lease of a sale.
--
-- KEYS[1] leader key   KEYS[2] epoch counter
-- ARGV[1] this instance's id   ARGV[2] lease length (ms)
--
-- Returns the fencing token `<id>#<epoch>` if this instance holds the lease for the next ARGV[2]
-- ms, or "" if another one does. Each change of hands takes a new epoch, and advance.lua only
-- acts for the exact token that holds the lease now: a former leader that was paused past its
-- lease (or that lost it and took it back) cannot move the frontier with its old token.
local holder = redis.call('GET', KEYS[1])
if not holder then
  local token = ARGV[1] .. '#' .. redis.call('INCR', KEYS[2])
  redis.call('SET', KEYS[1], token, 'PX', ARGV[2])
  return token
end
if string.sub(holder, 1, #ARGV[1] + 1) == ARGV[1] .. '#' then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return holder
end
return ''
