-- start_payment: records the payment started at the provider for a held reservation; only that
-- payment, for exactly the reservation's price, can confirm it (confirm.lua), and only its
-- failure releases it (release.lua).
--
-- KEYS: see lib.lua; KEYS[9] is not used.
-- ARGV[1] the provider's payment id
--
-- Returns {"pending"} when recorded, {"not_held", state} for a reservation that is no longer
-- held, {"unknown"} for none, {"not_armed"} when the pool's state is missing (nothing changed).
local _, rec, early = pool_and_record({'not_armed'}, {'unknown'})
if early then
  return early
end
if rec.state ~= 'held' then
  return {'not_held', rec.state}
end
redis.call('HSET', K.rsv, 'pending_payment_id', ARGV[1])
return {'pending'}
