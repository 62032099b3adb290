-- abort: take a hold back because its SeatReserved could not be made durable in time.
--
-- KEYS: see lib.lua; KEYS[9] is the token's pointer in this pool (its answer is removed when the
-- hold is aborted, so a retry with the same Idempotency-Key reserves afresh instead of replaying
-- an answer that was never given; the keys' fences, `f:<key>`, stay: reserve.lua).
--
-- Returns {"aborted"} when the hold was live and not yet durable: its seats are back in the pool
-- (with a ReservationAborted event in the outbox). Otherwise nothing changes at all, the pointer
-- included, and the reply says why:
--   {"durable", state}    another request saw its SeatReserved acknowledged (ack.lua) and may
--                         have answered 201: it is not taken back
--   {"not_held", state}   it already left the held state (expired, paid, ...), or is unknown
--   {"not_armed"}         the pool's state is missing
local cfg, rec, early = pool_and_record({'not_armed'}, {'not_held', 'unknown'})
if early then
  return early
end
if rec.durable == '1' then
  return {'durable', rec.state}
end
if rec.state ~= 'held' then
  return {'not_held', rec.state}
end
release_hold(rec, 'aborted')
emit(cfg, 'ReservationAborted', 'aborted', now_ms(), rec)
redis.call('HDEL', K.extra, 'id', 'idem', 'secret', 'seats', 'expires_ms', 'at_ms', 'entry')
return {'aborted'}
