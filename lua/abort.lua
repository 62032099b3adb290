-- abort: take a hold back because its SeatReserved could not be made durable in time.
--
-- KEYS: see lib.lua; KEYS[9] is the token's pointer in this pool (removed, so a retry with the
-- same Idempotency-Key reserves afresh instead of replaying an answer that was never given).
--
-- Returns {"aborted"} when the hold was live and its seats are back in the pool (with a
-- ReservationAborted event in the outbox), or {"not_held", state} when the reservation had
-- already left the held state (expired by the reaper, say): nothing to give back.
local rec = load(K.rsv)
if not rec then
  return {'not_held', 'unknown'}
end
redis.call('DEL', K.extra)
if rec.state ~= 'held' then
  return {'not_held', rec.state}
end
local cfg = load(K.cfg)
release_hold(rec, 'aborted')
emit(cfg, 'ReservationAborted', 'aborted', now_ms(), rec)
return {'aborted'}
