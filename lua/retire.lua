-- retire: a gateway's room for a sale has had no session for its idle time; it stops, and takes
-- this gateway's keys in the sale's slot with it.
--
-- KEYS[1] this gateway's liveness key   KEYS[2] its session set   KEYS[3] the sale's gateway
-- registry (set)   KEYS[4] the controller lease
-- ARGV[1] this gateway's instance id
--
-- Returns 1 if the keys were removed, 0 if a session registered meanwhile (nothing changed).
-- join.lua and resume.lua renew the liveness key and the registry in the same step as they
-- register a session, so either this runs first (and the join puts them back) or the join does
-- (and this changes nothing): the leader's sweep never takes a live session for a dead gateway's.
if redis.call('SCARD', KEYS[2]) > 0 then
  return 0
end
redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[3], ARGV[1])
-- A lease this gateway holds is handed on now rather than when it lapses.
local holder = redis.call('GET', KEYS[4])
if holder and string.sub(holder, 1, #ARGV[1] + 1) == ARGV[1] .. '#' then
  redis.call('DEL', KEYS[4])
end
return 1
