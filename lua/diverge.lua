-- diverge: refuses a pool whose Redis lost writes in a failover (booking/src/worker.rs). Its
-- event sequence (cfg `seq`, lib.lua's emit) is behind the highest number Kafka delivered, or
-- PostgreSQL saw one of its numbers twice: decisions the clients and Kafka know of are missing
-- here. reserve.lua then answers `diverged` until `sale reconcile --repair` rebuilds the pool
-- (rebuild_pool.lua clears the mark). Compared here, atomically, so an event written meanwhile
-- cannot make a healthy pool look behind.
--
-- KEYS[1] cfg hash
-- ARGV[1] the highest sequence number Kafka delivered for the pool (PostgreSQL's record)
-- ARGV[2] '1' if PostgreSQL saw a number twice
--
-- Returns 1 if the pool is now marked (this call marked it), 2 if it was marked already, 0 if it
-- is in step, -1 if it is not armed (a lost pool is refused anyway).
local cfg = redis.call('HMGET', KEYS[1], 'armed', 'seq', 'diverged')
if cfg[1] ~= '1' then
  return -1
end
if cfg[3] then
  return 2
end
if ARGV[2] == '1' or tonumber(cfg[2] or '0') < tonumber(ARGV[1]) then
  redis.call('HSET', KEYS[1], 'diverged', ARGV[1])
  return 1
end
return 0
