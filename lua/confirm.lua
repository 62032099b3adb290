-- confirm: a payment succeeded. Only a live hold becomes sold, and only by the payment started
-- for it (api.rs records its id) for exactly its price; any other money is refunded.
--
-- KEYS: see lib.lua; KEYS[9] the webhook event's memory (its outcome, kept a week).
-- ARGV[1] the provider's payment id   ARGV[2] the amount paid (minor units)   ARGV[3] currency
--
-- Returns {outcome, detail}:
--   {"confirmed", "held"}                  the hold is sold now (PaymentConfirmed emitted)
--   {"confirmed", "sold"}                  already sold by this same payment (nothing changed)
--   {"refund_required", reason}            the money must go back (RefundRequired emitted), and
--                                          the reason is the hold's state if it was not live
--                                          (expired, released, aborted, or sold by another
--                                          payment; a lapsed hold not yet reaped is expired first,
--                                          HoldExpired emitted), or for a live hold
--                                          "unexpected_payment" (not the payment started for it)
--                                          or "wrong_amount" (not fare x seats in its currency):
--                                          the hold stays as it was
--   {"duplicate", earlier outcome}         this webhook event was already processed
--   {"not_armed", ""}                      the pool's state is missing: decide nothing (the
--                                          provider redelivers until it is rebuilt)
--   {"unknown", ""}                        no such reservation
--
-- Confirm and expire are both atomic and both check the state, so exactly one of them wins a
-- race; the caller of the loser learns which from `state`.
local cfg, rec, early = webhook_start()
if early then
  return early
end
local now = now_ms()
local payment = ARGV[1]
local outcome, detail
local price = tonumber(cfg.fare_minor) * tonumber(rec.seats)
local mismatch = nil
if payment ~= rec.pending_payment_id then
  mismatch = 'unexpected_payment'
elseif tonumber(ARGV[2]) ~= price or ARGV[3] ~= cfg.currency then
  mismatch = 'wrong_amount'
end

if rec.state == 'held' and now >= tonumber(rec.expires_ms) then
  -- Lapsed, and the reaper has not come by yet: it loses nothing by our doing its work.
  release_hold(rec, 'expired')
  emit(cfg, 'HoldExpired', 'expired', now, rec)
end

if rec.state == 'held' and not mismatch then
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
  if rec.state == 'held' then
    detail = mismatch
  end
end
redis.call('SET', K.extra, outcome, 'EX', WEBHOOK_MEMORY_SECS)
return {outcome, detail}
