-- lib.lua: helpers shared by every pool script. The booking service prepends clock.lua and this
-- file to each pool script when it loads it (platform/src/lua.rs), so each script is still one
-- atomic EVALSHA in one slot.
--
-- Every pool script takes the same KEYS, all in the pool's slot:
--   KEYS[1] cfg hash      KEYS[2] available   KEYS[3] held      KEYS[4] sold
--   KEYS[5] holds hash    KEYS[6] expiries    KEYS[7] outbox    KEYS[8] the reservation (hash)
--   KEYS[9] the script's own extra key (documented in each script)
local K = {
  cfg = KEYS[1], avail = KEYS[2], held = KEYS[3], sold = KEYS[4], holds = KEYS[5],
  expiries = KEYS[6], outbox = KEYS[7], rsv = KEYS[8], extra = KEYS[9],
}

-- A hash as a table, or nil when the key does not exist.
local function load(key)
  local flat = redis.call('HGETALL', key)
  if #flat == 0 then
    return nil
  end
  local t = {}
  for i = 1, #flat, 2 do
    t[flat[i]] = flat[i + 1]
  end
  return t
end

-- The pool's config, if the pool's whole state is there: its config (armed) and its three
-- counters. A script checks this before its first write: Redis does not roll back a script that
-- fails half-way, and INCRBY would even recreate a lost counter from zero, so a script that
-- wrote first and found the config missing later would leave a change with no event.
local function pool_state()
  local cfg = load(K.cfg)
  if not cfg or cfg.armed ~= '1' or not cfg.sale or not cfg.pool then
    return nil
  end
  if redis.call('EXISTS', K.avail, K.held, K.sold) ~= 3 then
    return nil
  end
  return cfg
end

-- Appends a transition's event to the pool's outbox, inside the caller's atomic step: the change
-- and its event cannot part. The envelope is protocol/src/events.rs, schema v1; `suffix` makes
-- the event id (`<reservation id>.<suffix>`) unique per transition and stable across retries.
-- Returns the stream entry id and the envelope's JSON.
local function emit(cfg, kind, suffix, at, rec, payment_id)
  local data = {
    reservation_id = rec.id, token_id = rec.jti, ticket = tonumber(rec.ticket),
    seats = tonumber(rec.seats), reserved_at_ms = tonumber(rec.at_ms),
    hold_expires_at_ms = tonumber(rec.expires_ms), buyer = rec.buyer,
  }
  if payment_id and payment_id ~= '' then
    data.payment_id = payment_id
  end
  -- The pool's event sequence (protocol/src/events.rs): compared with the highest number Kafka
  -- holds, it tells a pool that lost writes in a failover.
  local seq = redis.call('HINCRBY', K.cfg, 'seq', 1)
  local envelope = {
    v = 1, id = rec.id .. '.' .. suffix, at_ms = at, sale = cfg.sale, pool = cfg.pool,
    seq = seq, type = kind, data = data,
  }
  local json = cjson.encode(envelope)
  return redis.call('XADD', K.outbox, '*', 'e', json), json
end

-- Gives a live hold's seats back to the pool and marks the reservation `state`.
local function release_hold(rec, state)
  redis.call('INCRBY', K.avail, rec.seats)
  redis.call('DECRBY', K.held, rec.seats)
  redis.call('HDEL', K.holds, rec.id)
  redis.call('ZREM', K.expiries, rec.id)
  redis.call('HSET', K.rsv, 'state', state)
  rec.state = state
end

-- The pool's config and the reservation a script is about, or the reply to give at once:
-- `lost` when the pool's state is missing (nothing can be decided until it is rebuilt),
-- `missing` when there is no such reservation.
local function pool_and_record(lost, missing)
  local cfg = pool_state()
  if not cfg then
    return nil, nil, lost
  end
  local rec = load(K.rsv)
  if not rec then
    return nil, nil, missing
  end
  return cfg, rec, nil
end

-- The start of every webhook script: as pool_and_record, and first the reply to a provider
-- event that was already processed.
local function webhook_start()
  local done = redis.call('GET', K.extra)
  if done then
    return nil, nil, {'duplicate', done}
  end
  return pool_and_record({'not_armed', ''}, {'unknown', ''})
end

-- How long a webhook's outcome is remembered: longer than any provider retries a delivery.
local WEBHOOK_MEMORY_SECS = 7 * 24 * 3600
