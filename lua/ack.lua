-- ack: a reservation's SeatReserved was acknowledged by the broker: it is durable from now on.
--
-- KEYS: see lib.lua; KEYS[9] is not used.
-- ARGV[1] the SeatReserved's outbox entry (removed: the relay need not send it again)
--
-- Returns {outcome, state}:
--   {"acked", state}      this call made it durable (state: what it is now, normally "held")
--   {"already", state}    an earlier request or the relay had made it durable
--   {"aborted", ""}       it was taken back before the ack (abort.lua): it must not be answered 2xx
--   {"unknown", ""}       no such reservation (nothing changed)
-- A durable reservation is never aborted (abort.lua), so a request that sees "acked" or
-- "already" may answer 201 for as long as it likes.
local rec = load(K.rsv)
if not rec then
  return {'unknown', ''}
end
redis.call('XDEL', K.outbox, ARGV[1])
if rec.state == 'aborted' then
  return {'aborted', ''}
end
if rec.durable == '1' then
  return {'already', rec.state}
end
redis.call('HSET', K.rsv, 'durable', '1')
return {'acked', rec.state}
