-- reserve: the pool step of a reservation: check stock, take seats, record a hold. Idempotent.
--
-- KEYS: see lib.lua; KEYS[8] is the new reservation's record, KEYS[9] the token's pointer in
-- this pool (hash: the reservation it made, with its key and answer).
-- ARGV[1] token id (jti)   ARGV[2] Idempotency-Key   ARGV[3] seats
-- ARGV[4] new reservation id (names KEYS[8])   ARGV[5] new secret   ARGV[6] ticket
-- ARGV[7] the attempt's deadline (Unix ms, from claim_token.lua): no new hold after it
-- ARGV[8] the buyer the admission token names ("" for none): kept on the record, carried by
--         every event of the reservation
--
-- Returns a flat array of strings, first the outcome:
--   {"reserved", id, secret, seats, hold_expires_at_ms, reserved_at_ms, outbox entry, event}
--       a new hold; `event` is the SeatReserved envelope (JSON) just written to the outbox
--   {"replay", id, secret, seats, hold_expires_at_ms, reserved_at_ms, outbox entry, event}
--       this key's earlier answer; `event` is "" once the outbox entry is gone, which happens
--       only after the broker acknowledged it
--   {"sold_out", available, now}   fewer seats left than asked (nothing changed); `now` is when,
--                             by Redis' clock, which release_claim.lua reasons from
--   {"late", now}             the attempt's deadline has passed: it may no longer take seats
--                             (nothing changed)
--   {"spent"}                 this token reserved here under another Idempotency-Key
--   {"not_armed"}             the pool's config or a counter is missing: its state was lost or
--                             it was never armed (nothing changed; never read as zero)
--   {"diverged"}              the pool lost writes in a failover and is refused until rebuilt
--                             (diverge.lua; nothing changed)
--   {"ended"}                 the sale is over (end_pool.lua; nothing changed)
--
-- The replay check comes first, so a retry gets its original answer even after a sell-out (or
-- past its own deadline). An aborted reservation (abort.lua) removes the pointer, so a retry
-- after a 503 reserves afresh.
local prior = redis.call('HMGET', K.extra, 'id', 'idem', 'secret', 'seats', 'expires_ms', 'at_ms', 'entry')
if prior[1] then
  if prior[2] ~= ARGV[2] then
    return {'spent'}
  end
  local pending = redis.call('XRANGE', K.outbox, prior[7], prior[7])
  local event = ''
  if #pending > 0 then
    event = pending[1][2][2]
  end
  return {'replay', prior[1], prior[3], prior[4], prior[5], prior[6], prior[7], event}
end

local cfg = pool_state()
if not cfg then
  return {'not_armed'}
end
if cfg.diverged then
  -- It lost writes in a failover (diverge.lua): no new hold until it is rebuilt.
  return {'diverged'}
end
if cfg.ended_at_ms then
  return {'ended'}
end
local available = tonumber(redis.call('GET', K.avail))
local seats = tonumber(ARGV[3])
local now = now_ms()
if now > tonumber(ARGV[7]) then
  return {'late', tostring(now)}
end
if available < seats then
  return {'sold_out', tostring(available), tostring(now)}
end

local rec = {
  id = ARGV[4], jti = ARGV[1], idem = ARGV[2], secret = ARGV[5], seats = ARGV[3],
  ticket = ARGV[6], expires_ms = tostring(now + tonumber(cfg.hold_ttl_ms)), at_ms = tostring(now),
  state = 'held',
}
if ARGV[8] ~= '' then
  rec.buyer = ARGV[8]
end
redis.call('DECRBY', K.avail, seats)
redis.call('INCRBY', K.held, seats)
redis.call('HSET', K.holds, rec.id, rec.seats)
redis.call('ZADD', K.expiries, rec.expires_ms, rec.id)
redis.call('HSET', K.rsv, 'id', rec.id, 'jti', rec.jti, 'idem', rec.idem, 'secret', rec.secret,
  'seats', rec.seats, 'ticket', rec.ticket, 'expires_ms', rec.expires_ms, 'at_ms', rec.at_ms,
  'state', rec.state)
if rec.buyer then
  redis.call('HSET', K.rsv, 'buyer', rec.buyer)
end
local entry, event = emit(cfg, 'SeatReserved', 'reserved', now, rec)
redis.call('HSET', K.extra, 'id', rec.id, 'idem', rec.idem, 'secret', rec.secret,
  'seats', rec.seats, 'expires_ms', rec.expires_ms, 'at_ms', rec.at_ms, 'entry', entry)
return {'reserved', rec.id, rec.secret, rec.seats, rec.expires_ms, rec.at_ms, entry, event}
