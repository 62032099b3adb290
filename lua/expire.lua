-- expire: the reaper's step for one hold whose expiry has passed.
--
-- KEYS: see lib.lua; KEYS[9] is not used.
-- ARGV[1] the reservation id (its member in the expiries index)
--
-- Returns {"expired"} when the hold was live and due (seats back, HoldExpired emitted), else
-- {"skipped", state} (already sold, released, expired by another reaper, or not yet due), or
-- {"not_armed"} when the pool's state is missing (nothing changed).
-- Any number of reapers may call this for the same hold: only one finds it held and due.
local cfg = pool_state()
if not cfg then
  return {'not_armed'}
end
local rec = load(K.rsv)
if not rec then
  -- An index entry without its reservation: drop it so the reaper stops coming back to it.
  redis.call('ZREM', K.expiries, ARGV[1])
  return {'skipped', 'unknown'}
end
local now = now_ms()
if rec.state ~= 'held' or now < tonumber(rec.expires_ms) then
  return {'skipped', rec.state}
end
release_hold(rec, 'expired')
emit(cfg, 'HoldExpired', 'expired', now, rec)
return {'expired'}
