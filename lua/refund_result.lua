-- refund_result: the provider reports the outcome of a refund this service asked for.
--
-- KEYS: see lib.lua; KEYS[9] the webhook event's memory.
-- ARGV[1] the provider's payment id   ARGV[2] "succeeded" or "failed"
--
-- Returns {outcome, ...}: "recorded" (RefundSucceeded or RefundFailed emitted), "duplicate",
-- "not_pending" (no refund of this payment was pending: nothing changed), "not_armed" (the
-- pool's state is missing: nothing changed), or "unknown".
local cfg, rec, early = webhook_start()
if early then
  return early
end
local field = 'refund:' .. ARGV[1]
local outcome = 'not_pending'
if redis.call('HGET', K.rsv, field) == 'pending' then
  redis.call('HSET', K.rsv, field, ARGV[2])
  local kind = (ARGV[2] == 'succeeded') and 'RefundSucceeded' or 'RefundFailed'
  emit(cfg, kind, 'refund_' .. ARGV[2] .. ':' .. ARGV[1], now_ms(), rec, ARGV[1])
  outcome = 'recorded'
end
redis.call('SET', K.extra, outcome, 'EX', WEBHOOK_MEMORY_SECS)
return {outcome}
