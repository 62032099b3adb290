-- confirm: a payment succeeded. Only a live hold becomes sold; money for anything else is refunded.
--
-- KEYS: see lib.lua; KEYS[9] the webhook event's memory (its outcome, kept a week).
-- ARGV[1] the provider's payment id
--
-- Returns {outcome, detail}:
--   {"confirmed", "held"}                  the hold is sold now (PaymentConfirmed emitted)
--   {"confirmed", "sold"}                  already sold by this same payment (nothing changed)
--   {"refund_required", state}             the hold was not live (state: expired, released,
--                                          aborted, or sold by another payment); the money must
--                                          go back (RefundRequired emitted). If the hold had
--                                          lapsed but was not yet reaped, it is expired first
--                                          (HoldExpired emitted): state is then "expired".
--   {"duplicate", earlier outcome}         this webhook event was already processed
--   {"unknown", ""}                        no such reservation
--
-- Confirm and expire are both atomic and both check the state, so exactly one of them wins a
-- race; the caller of the loser learns which from `state`.
local rec, early = webhook_start()
if early then
  return early
end
local cfg = load(K.cfg)
local now = now_ms()
local payment = ARGV[1]
local outcome, detail

if rec.state == 'held' and now >= tonumber(rec.expires_ms) then
  -- Lapsed, and the reaper has not come by yet: it loses nothing by our doing its work.
  release_hold(rec, 'expired')
  emit(cfg, 'HoldExpired', 'expired', now, rec)
end

if rec.state == 'held' then
  redis.call('DECRBY', K.held, rec.seats)
  redis.call('INCRBY', K.sold, rec.seats)
  redis.call('HDEL', K.holds, rec.id)
  redis.call('ZREM', K.expiries, rec.id)
  redis.call('HSET', K.rsv, 'state', 'sold', 'payment_id', payment)
  emit(cfg, 'PaymentConfirmed', 'confirmed', now, rec, payment)
  outcome, detail = 'confirmed', 'held'
elseif rec.state == 'sold' and rec.payment_id == payment then
  outcome, detail = 'confirmed', 'sold'
else
  local field = 'refund:' .. payment
  if not redis.call('HGET', K.rsv, field) then
    redis.call('HSET', K.rsv, field, 'pending')
    emit(cfg, 'RefundRequired', 'refund_required:' .. payment, now, rec, payment)
  end
  outcome, detail = 'refund_required', rec.state
end
redis.call('SET', K.extra, outcome, 'EX', WEBHOOK_MEMORY_SECS)
return {outcome, detail}
