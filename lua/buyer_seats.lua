-- buyer_seats: the per-buyer seat limit of a sale, kept in the buyer's record (the same hash as
-- their place in line, buyer_place.lua; a slot of its own, platform/src/keys.rs).
--
-- KEYS[1] the buyer's record (hash; `r:<token id>` = `<seats>:<stamp>`, the seats of the
--         reservation that token makes and the latest attempt that counted them,
--         `f:<token id>` = the stamp below which that token's attempts are refused)
-- ARGV[1] "take" or "give"   ARGV[2] the admission token's id   ARGV[3] seats asked (take)
-- ARGV[4] the sale's limit (take)   ARGV[5] the record's lifetime (ms)
-- ARGV[6] the attempt's stamp (take; give: the attempt giving back, or 0 when the hold ended)
--
-- take returns {"ok"} (the token's seats now count against the buyer; a retry of the same token
-- finds them counted already), {"over", counted, fence} (the buyer holds or bought `counted`
-- seats, and these would pass the limit) or {"fenced", counted, fence, counted_here} (a later
-- attempt of the token was over first: see below). give returns {"given"}: the token's seats no
-- longer count (its hold ended unsold, or the pool refused it); giving twice changes nothing.
--
-- An "over" fences off the token's attempts stamped below this one (`fence`, the attempt's own
-- stamp, kept in the record as `f:<token id>`): each is refused here ("fenced"), before its
-- seats could count, so none of them can reach the pool. No earlier attempt had counted (its
-- seats would be found counted, and this one would be "ok"), so once the fence is on the
-- record's replicas, the refusal may give the token back without waiting out the earlier
-- copies' deadlines (release_claim.lua), and so may a fenced copy, with the same fence: copies
-- of one request racing at the buyer's limit all answer `buyer_limit`, none 503. `counted_here`
-- is 1 when a later attempt's seats count now (the buyer got room meanwhile): that attempt's
-- answer settles the token, and a fenced copy gives nothing back.
--
-- A count names the latest attempt that relied on it (a copy finding the seats counted takes
-- them over): an attempt gives back only a count no later attempt relies on, so a refused
-- attempt's give-back, arriving after a copy of the request claimed afresh and found its seats
-- counted, cannot leave that copy's seats uncounted. The relay's give-back (0: the hold ended)
-- always gives back.
--
-- One field per token, never a running total: every step is idempotent, so a retried request,
-- a relay that publishes an event twice, or a crash between steps can never count a seat twice
-- or give one back twice.
-- A count's seats and the stamp of the latest attempt relying on it (0 for a count of an older
-- release, which named none).
local function count_of(value)
  local seats, stamp = string.match(value, '^(%d+):(%d+)$')
  if seats then
    return tonumber(seats), tonumber(stamp)
  end
  return tonumber(value), 0
end
local stamp = tonumber(ARGV[6])
if ARGV[1] == 'give' then
  local value = redis.call('HGET', KEYS[1], 'r:' .. ARGV[2])
  if value then
    local _, relied = count_of(value)
    if stamp == 0 or relied <= stamp then
      redis.call('HDEL', KEYS[1], 'r:' .. ARGV[2])
    end
  end
  return {'given'}
end
local field = 'r:' .. ARGV[2]
local fence = tonumber(redis.call('HGET', KEYS[1], 'f:' .. ARGV[2]) or '0')
local counted = 0
local fields = redis.call('HGETALL', KEYS[1])
for i = 1, #fields, 2 do
  if string.sub(fields[i], 1, 2) == 'r:' then
    counted = counted + count_of(fields[i + 1])
  end
end
local mine = redis.call('HGET', KEYS[1], field)
if stamp < fence then
  local here = '0'
  if mine then
    here = '1'
  end
  return {'fenced', tostring(counted), tostring(fence), here}
end
if mine then
  local seats, relied = count_of(mine)
  if relied < stamp then
    redis.call('HSET', KEYS[1], field, seats .. ':' .. stamp)
  end
  return {'ok'}
end
if counted + tonumber(ARGV[3]) > tonumber(ARGV[4]) then
  redis.call('HSET', KEYS[1], 'f:' .. ARGV[2], stamp)
  redis.call('PEXPIRE', KEYS[1], ARGV[5])
  return {'over', tostring(counted), tostring(stamp)}
end
redis.call('HSET', KEYS[1], field, ARGV[3] .. ':' .. stamp)
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return {'ok'}
