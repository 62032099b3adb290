-- standing: whether a ticket is still alive, for the status answer an app reads while it cannot
-- hold a socket (docs/protocol.md 1.5, `GET /v1/sales/{sale}/place`). It reads and changes
-- nothing, so a poll neither keeps a place nor costs more than a few lookups in the sale's slot.
--
-- KEYS[1] sale meta hash   KEYS[2] ticket sequence   KEYS[3] gone (sorted set)
-- KEYS[4] owners (hash: ticket -> buyer mark)
-- ARGV[1] ticket   ARGV[2] the mark of the buyer asking ("" for someone not signed in)
--
-- Returns {"alive", until} (until: when the grace of a departed holder runs out, Unix ms, or ""
-- while a session holds it), or {"expired"} (grace run out, or the sale ended), {"foreign"}
-- (another buyer made the ticket theirs) or {"unknown"} (not armed, or never handed out), by
-- the same rule as resume.lua (sale_lib.lua's ticket_standing).
local status, _, _, deadline =
  ticket_standing(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1], ARGV[2])
if status ~= 'alive' then
  return {status}
end
return {'alive', deadline or ''}
