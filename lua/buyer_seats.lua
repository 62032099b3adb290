-- buyer_seats: the per-buyer seat limit of a sale, kept in the buyer's record (the same hash as
-- their place in line, buyer_place.lua; a slot of its own, platform/src/keys.rs).
--
-- KEYS[1] the buyer's record (hash; `r:<token id>` = seats of the reservation that token makes)
-- ARGV[1] "take" or "give"   ARGV[2] the admission token's id   ARGV[3] seats asked (take)
-- ARGV[4] the sale's limit (take)   ARGV[5] the record's lifetime (ms)
--
-- take returns {"ok"} (the token's seats now count against the buyer; a retry of the same token
-- finds them counted already) or {"over", counted} (the buyer holds or bought `counted` seats,
-- and these would pass the limit: nothing changed). give returns {"given"}: the token's seats no
-- longer count (its hold ended unsold, or the pool refused it); giving twice changes nothing.
--
-- One field per token, never a running total: every step is idempotent, so a retried request,
-- a relay that publishes an event twice, or a crash between steps can never count a seat twice
-- or give one back twice.
if ARGV[1] == 'give' then
  redis.call('HDEL', KEYS[1], 'r:' .. ARGV[2])
  return {'given'}
end
local field = 'r:' .. ARGV[2]
if redis.call('HEXISTS', KEYS[1], field) == 1 then
  return {'ok'}
end
local counted = 0
local fields = redis.call('HGETALL', KEYS[1])
for i = 1, #fields, 2 do
  if string.sub(fields[i], 1, 2) == 'r:' then
    counted = counted + tonumber(fields[i + 1])
  end
end
if counted + tonumber(ARGV[3]) > tonumber(ARGV[4]) then
  return {'over', tostring(counted)}
end
redis.call('HSET', KEYS[1], field, ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return {'ok'}
