-- buyer_place: one place in line per buyer per sale. The buyer's record lives in a slot of its
-- own (platform/src/keys.rs, `{b:<sale>/<buyer>}`), so the index from buyers to tickets spreads
-- over the cluster instead of adding to the sale's slot.
--
-- KEYS[1] the buyer's record (hash: `ticket`, `joining`, `joining_until`, and the seats of each
--         reservation, `r:<token id>`, which buyer_seats.lua keeps)
-- ARGV[1] "find", "bind", "release" or "restore"   ARGV[2] the session's id (`<gateway>/<n>`)
-- ARGV[3] find: a ticket the caller found dead ("" if none), to forget; bind, restore: the
--         session's ticket
-- ARGV[4] the record's lifetime (ms)   ARGV[5] how long a join may hold the record (ms)
--
-- find returns {"ticket", n} (the buyer's ticket: take it back), {"take"} (none: this session
-- takes a new ticket, then binds it) or {"wait"} (another session of this buyer is taking one
-- right now: ask again shortly). bind returns {"bound"}, or {"ticket", n} when another session
-- bound first (its ticket wins; the caller gives its own back). release returns {"released"}: a
-- join that found it may take no new place (it skipped the door) lets the buyer's next join in
-- at once rather than after the mark lapses. restore (after the record's primary changed, from
-- a session still waiting on its ticket: the failover may have lost the record's last write)
-- returns {"restored"} if the record named no ticket or an earlier one (a stale copy: tickets
-- only grow, and a buyer's record names their newest place) and now names the session's, or
-- {"kept", n} if it already names that ticket or a later one (the buyer joined again since).
--
-- Between find and bind the record is marked as joining, so a buyer's three tabs opening at once
-- take one ticket between them, not three; the mark lapses if its gateway dies half-way.
local now = now_ms()
local rec = redis.call('HMGET', KEYS[1], 'ticket', 'joining', 'joining_until')
if ARGV[1] == 'release' then
  if rec[2] == ARGV[2] then
    redis.call('HDEL', KEYS[1], 'joining', 'joining_until')
  end
  return {'released'}
end
if ARGV[1] == 'restore' then
  if rec[1] and tonumber(rec[1]) >= tonumber(ARGV[3]) then
    return {'kept', rec[1]}
  end
  redis.call('HSET', KEYS[1], 'ticket', ARGV[3])
  redis.call('PEXPIRE', KEYS[1], ARGV[4])
  return {'restored'}
end
if ARGV[1] == 'bind' then
  if rec[1] then
    return {'ticket', rec[1]}
  end
  redis.call('HSET', KEYS[1], 'ticket', ARGV[3])
  redis.call('HDEL', KEYS[1], 'joining', 'joining_until')
  redis.call('PEXPIRE', KEYS[1], ARGV[4])
  return {'bound'}
end
if rec[1] and rec[1] ~= ARGV[3] then
  return {'ticket', rec[1]}
end
if rec[1] then
  redis.call('HDEL', KEYS[1], 'ticket')
end
if rec[2] and rec[2] ~= ARGV[2] and tonumber(rec[3] or '0') > now then
  return {'wait'}
end
redis.call('HSET', KEYS[1], 'joining', ARGV[2], 'joining_until', now + tonumber(ARGV[5]))
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return {'take'}
