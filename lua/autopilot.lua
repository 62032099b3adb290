-- autopilot: the admission autopilot's step for a sale, by the lease holder only: the rate it
-- chose (if it changed), what it decided and why (for the console), and a notable change queued
-- for the audit trail.
--
-- KEYS[1] sale meta hash   KEYS[2] leader key   KEYS[3] the autopilot's last step
-- KEYS[4] the autopilot's audit stream
-- ARGV[1] the caller's fencing token (from lease.lua)
-- ARGV[2] the autopilot settings the step was made with (the meta's field, as read)
-- ARGV[3] the admission rate the step started from (as the meta held it)
-- ARGV[4] the new admission rate ('' to leave the rate as it is)
-- ARGV[5] the step (JSON)   ARGV[6] how long the step is kept (ms)
-- ARGV[7] the audit entry (JSON; '' when the change is not notable)
--
-- Returns 1 if applied; -1 if the caller does not hold the lease (nothing changed); 0 if the
-- settings or the rate are no longer those the step started from (an operator turned the
-- autopilot off, set a rate by hand, or changed its settings since the step read them: nothing
-- changed, so an override always wins, whatever else the operator's change kept).
if redis.call('GET', KEYS[2]) ~= ARGV[1] then
  return -1
end
if redis.call('HGET', KEYS[1], 'autopilot') ~= ARGV[2] then
  return 0
end
if tonumber(redis.call('HGET', KEYS[1], 'rate')) ~= tonumber(ARGV[3]) then
  return 0
end
if ARGV[4] ~= '' then
  redis.call('HSET', KEYS[1], 'rate', ARGV[4])
end
redis.call('SET', KEYS[3], ARGV[5], 'PX', ARGV[6])
if ARGV[7] ~= '' then
  -- Capped: were the booking services not draining it, the stream still stays small.
  redis.call('XADD', KEYS[4], 'MAXLEN', '~', 1000, '*', 'entry', ARGV[7])
end
return 1
