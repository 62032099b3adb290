-- arm_pool: load one pool's counters before its sale opens.
--
-- KEYS[1] cfg hash          KEYS[2] available   KEYS[3] held   KEYS[4] sold
-- KEYS[5] holds hash        KEYS[6] expiries zset
-- ARGV[1] capacity (seats)  ARGV[2] hold TTL (ms)   ARGV[3] opens_at (Unix ms), the sale's
-- ARGV[4] sale id   ARGV[5] pool id   ARGV[6] fare per seat (minor units)   ARGV[7] currency
--
-- Returns one of:
--   {"armed"}           counters set: available = capacity, held = sold = 0
--   {"opened", at_ms}   refused: the sale opened at at_ms (as armed before, or as asked now)
--
-- Redis' own clock decides "before the opening", the same clock the admission controller uses, so
-- no process clock skew can let a re-arm reset counters that a live sale is already spending.
-- Before the opening no admission can have happened, so resetting the counters is safe and makes
-- arming idempotent (and lets an operator fix a capacity before the opening).
local refused = refuse_if_opened(KEYS[1], ARGV[3])
if refused then
  return refused
end

-- `armed` is the marker that the counters below were written together with this config: a
-- pool whose counters are gone while the sale lists it has lost its state and is refused.
redis.call('HSET', KEYS[1], 'capacity', ARGV[1], 'hold_ttl_ms', ARGV[2], 'opens_at_ms', ARGV[3],
  'sale', ARGV[4], 'pool', ARGV[5], 'fare_minor', ARGV[6], 'currency', ARGV[7], 'armed', '1')
redis.call('SET', KEYS[2], ARGV[1])
redis.call('SET', KEYS[3], 0)
redis.call('SET', KEYS[4], 0)
redis.call('DEL', KEYS[5], KEYS[6])
return {'armed'}
