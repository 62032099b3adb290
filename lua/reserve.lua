-- reserve: the pool step of a reservation: check stock, take seats, record a hold. Idempotent.
--
-- KEYS: see lib.lua; KEYS[8] is the new reservation's record, KEYS[9] the token's pointer in
-- this pool (hash: the reservation it made, with its key and answer).
-- ARGV[1] token id (jti)   ARGV[2] Idempotency-Key   ARGV[3] seats
-- ARGV[4] new reservation id (names KEYS[8])   ARGV[5] new secret   ARGV[6] ticket
-- ARGV[7] the attempt's deadline (Unix ms, from claim_token.lua): no new hold after it
-- ARGV[8] the buyer the admission token names ("" for none): kept on the record, carried by
--         every event of the reservation
-- ARGV[9] the attempt's stamp (claim_token.lua)
-- ARGV[10] "1" if the attempt is a retry of its key (earlier attempts of the key exist), else "0"
-- ARGV[11] when the token's claim may go (Unix ms): a pointer that holds only a fence goes then
--
-- Returns a flat array of strings, first the outcome:
--   {"reserved", id, secret, seats, hold_expires_at_ms, reserved_at_ms, outbox entry, event}
--       a new hold; `event` is the SeatReserved envelope (JSON) just written to the outbox
--   {"replay", id, secret, seats, hold_expires_at_ms, reserved_at_ms, outbox entry, event}
--       this key's earlier answer; `event` is "" once the outbox entry is gone, which happens
--       only after the broker acknowledged it
--   {"sold_out", available, now, fence}   fewer seats left than asked (no seat changed);
--                             `now` is when, by Redis' clock, which release_claim.lua reasons
--                             from; `fence` is the stamp below which no attempt of the key may take
--                             seats any more: this retry's own (it fenced its key's earlier
--                             attempts), or a later attempt's fence that covers this one, or "0"
--   {"late", now, fence}      the attempt's deadline has passed: it may no longer take seats
--   {"superseded", now}       there are seats, but a later attempt of the same key was refused here
--                             first (its fence): this one may no longer take them (nothing changed)
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
--
-- The fence: when a retry is refused here, the pointer keeps the retry's stamp under its key
-- (`f:<Idempotency-Key>`), and from then on no attempt of that key stamped earlier may take seats (one that
-- arrives late is answered as every attempt is, but `superseded` where it would have taken
-- seats). A retry's refusal thus proves that no earlier attempt of the key can take seats any
-- more, however long it was delayed, and the token's claim is given back at once
-- (release_claim.lua). No other key is affected by it; a hold taken back (abort.lua) leaves every
-- key's fence in place; and a first attempt writes nothing when refused (the hot path of a
-- sell-out).
local prior = redis.call('HMGET', K.extra, 'id', 'idem', 'secret', 'seats', 'expires_ms', 'at_ms', 'entry',
  'f:' .. ARGV[2])
local fenced_at = tonumber(prior[8])
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
-- A retry refused: its key's earlier attempts are fenced off (above). The answer is the stamp
-- of the fence in force, so that release_claim.lua knows every attempt below it is stopped.
local function fence()
  if fenced_at and fenced_at > tonumber(ARGV[9]) then
    -- A later attempt of the key fenced already, and stopped every earlier attempt (this one
    -- included): this refusal is covered by that fence, and writes none of its own.
    return tostring(fenced_at)
  end
  if ARGV[10] ~= '1' then
    return '0'
  end
  redis.call('HSET', K.extra, 'f:' .. ARGV[2], ARGV[9])
  -- It holds no answer (that was replayed above): fences only, which go with the claim.
  redis.call('PEXPIREAT', K.extra, ARGV[11])
  return ARGV[9]
end
if now > tonumber(ARGV[7]) then
  return {'late', tostring(now), fence()}
end
if available < seats then
  return {'sold_out', tostring(available), tostring(now), fence()}
end
-- Only now, where it would take seats, is an attempt behind its key's fence turned away: one
-- that finds the pool sold out says so, as every other attempt of its key does.
if fenced_at and fenced_at > tonumber(ARGV[9]) then
  return {'superseded', tostring(now)}
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
-- It may have held only fences, which expire; the answer it now keeps is replayed for good.
redis.call('PERSIST', K.extra)
return {'reserved', rec.id, rec.secret, rec.seats, rec.expires_ms, rec.at_ms, entry, event}
