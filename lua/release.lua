-- release: a payment failed; a live hold's seats go back to the pool.
--
-- KEYS: see lib.lua; KEYS[9] the webhook event's memory.
-- ARGV[1] the provider's payment id
--
-- Returns {outcome, state}:
--   {"released", "held"}     the seats are back (PaymentFailed emitted)
--   {"ignored", state}       the reservation was not held (sold, expired, ...): a failure that
--                            arrives late or out of order changes nothing
--   {"duplicate", earlier}   this webhook event was already processed
--   {"unknown", ""}          no such reservation
local rec, early = webhook_start()
if early then
  return early
end
local outcome, state = 'ignored', rec.state
if rec.state == 'held' then
  release_hold(rec, 'released')
  emit(load(K.cfg), 'PaymentFailed', 'failed', now_ms(), rec, ARGV[1])
  outcome = 'released'
end
redis.call('SET', K.extra, outcome, 'EX', WEBHOOK_MEMORY_SECS)
return {outcome, state}
