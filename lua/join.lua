-- join: hand out the next waiting-room ticket of a sale.
--
-- KEYS[1] sale meta hash   KEYS[2] ticket sequence
--
-- Returns {ticket, opens_at_ms}, or {} if the sale is not armed (unknown to the waiting room).
-- Checking the sale and taking the number in one script means an unknown sale never consumes a
-- ticket number and a known one never hands out a ticket without its opening time.
local opens = redis.call('HGET', KEYS[1], 'opens_at_ms')
if not opens then
  return {}
end
local ticket = redis.call('INCR', KEYS[2])
return {tostring(ticket), opens}
