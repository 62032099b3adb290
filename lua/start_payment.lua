-- start_payment: records the payment started at the provider for a held reservation; only that
-- payment, for exactly the reservation's price, can confirm it (confirm.lua), and only its
-- failure releases it (release.lua). The first recorded stays the one: a second start (a payer's
-- second click, or a stranger holding the reservation's secret) is answered with it, so no
-- checkout a payer was sent to is ever orphaned, and the provider is asked once a hold.
--
-- KEYS: see lib.lua; KEYS[9] is not used.
-- ARGV[1] the provider's payment id   ARGV[2] where the payer completes it
-- ARGV[3] the provider's status of it
--
-- Returns {"pending"} when recorded, {"started", payment id, checkout URL, status} for one
-- recorded before, {"not_held", state} for a reservation that is no longer held, {"unknown"}
-- for none, {"not_armed"} when the pool's state is missing (nothing changed).
local _, rec, early = pool_and_record({'not_armed'}, {'unknown'})
if early then
  return early
end
if rec.state ~= 'held' then
  return {'not_held', rec.state}
end
if rec.pending_payment_id and rec.pending_checkout_url then
  -- Written again as it is: the caller's wait for the replicas then covers it, so a start
  -- answered 202 is one a failover keeps, even when the first start's own wait failed.
  local status = rec.pending_status or ''
  redis.call('HSET', K.rsv, 'pending_payment_id', rec.pending_payment_id, 'pending_checkout_url',
    rec.pending_checkout_url, 'pending_status', status)
  return {'started', rec.pending_payment_id, rec.pending_checkout_url, status}
end
redis.call('HSET', K.rsv, 'pending_payment_id', ARGV[1], 'pending_checkout_url', ARGV[2],
  'pending_status', ARGV[3])
return {'pending'}
