-- lease: take or renew the admission-controller lease of a sale.
--
-- KEYS[1] leader key   ARGV[1] this instance's id   ARGV[2] lease length (ms)
--
-- Returns 1 if this instance holds the lease for the next ARGV[2] ms, 0 if another one does.
local holder = redis.call('GET', KEYS[1])
if not holder then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
if holder == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
