-- repair_pool: apply a reconciliation's safe repair to one pool's counters, only if they are
-- still what the report read (the sale goes on while an operator reads the report).
--
-- KEYS[1] available   KEYS[2] sold
-- ARGV[1] available as read   ARGV[2] sold as read   ARGV[3] new available   ARGV[4] new sold
--
-- Returns "repaired", or "moved" if a counter changed since it was read (nothing changed: run
-- the reconciliation again). Repairs only ever lower what can be sold (the caller checks), so
-- no seat can be sold twice because of one.
if redis.call('GET', KEYS[1]) ~= ARGV[1] or (redis.call('GET', KEYS[2]) or '0') ~= ARGV[2] then
  return 'moved'
end
redis.call('SET', KEYS[1], ARGV[3])
redis.call('SET', KEYS[2], ARGV[4])
return 'repaired'
