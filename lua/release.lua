-- release: the payment started for a live hold failed; the hold's seats go back to the pool.
--
-- KEYS: see lib.lua; KEYS[9] the webhook event's memory.
-- ARGV[1] the provider's payment id
--
-- Returns {outcome, state}:
--   {"released", "held"}     the seats are back (PaymentFailed emitted)
--   {"ignored", state}       the reservation was not held (sold, expired, ...), or the failed
--                            payment is not the one started for it: a failure that arrives
--                            late, out of order or for someone else's payment changes nothing
--   {"duplicate", earlier}   this webhook event was already processed
--   {"not_armed", ""}        the pool's state is missing (nothing changed)
--   {"unknown", ""}          no such reservation
local cfg, rec, early = webhook_start()
if early then
  return early
end
local outcome, state = 'ignored', rec.state
if rec.state == 'held' and ARGV[1] == rec.pending_payment_id then
  release_hold(rec, 'released')
  emit(cfg, 'PaymentFailed', 'failed', now_ms(), rec, ARGV[1])
  outcome = 'released'
end
redis.call('SET', K.extra, outcome, 'EX', WEBHOOK_MEMORY_SECS)
return {outcome, state}
