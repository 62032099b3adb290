-- join: hand out the next waiting-room tickets of a sale, one per join of a batch. A gateway
-- sends the joins it received while its previous batch was in flight as one batch, so the sale's
-- slot does the work below once per batch, not once per join.
--
-- KEYS[1] sale meta hash   KEYS[2] ticket sequence   KEYS[3] pre-queue nonce list
-- KEYS[4] this gateway's session set   KEYS[5] this gateway's liveness key
-- KEYS[6] the sale's gateway registry (set)   KEYS[7] the pre-queue's batches (sorted set)
-- ARGV[1] the batch's Merkle root (lowercase hex; protocol/src/lottery.rs computes it from the
--         nonces)   ARGV[2] this gateway's instance id   ARGV[3] the liveness key's lifetime (ms)
-- ARGV[4..] the draw nonces of the batch's joins, in the order their tickets are to be given
--         (at most a few thousand: Lua's unpack limit; the gateway sends at most 500)
--
-- Returns {first ticket, opens_at_ms, in pre-queue (0/1), sold_out (0/1), lottery commitment}
-- (all strings), or {} if the sale is not armed (unknown to the waiting room): the batch's
-- tickets are first, first + 1, ... in the order of the nonces. Checking the sale and taking the
-- numbers in one script means an unknown sale never consumes a ticket number.
--
-- Tickets taken before the opening join the pre-queue: their nonces are published in ticket
-- order, the batch is recorded with its root, and the pre-queue's chain, the input of the draw,
-- takes one link for the whole batch: SHA1-hex(chain || "<first>:<count>:<root>").
local meta = redis.call('HMGET', KEYS[1], 'opens_at_ms', 'sold_out', 'lottery_commitment',
  'prequeue_chain')
local opens_at = meta[1]
if not opens_at then
  return {}
end
local now = now_ms()
close_prequeue(KEYS[1], KEYS[2], now)
local count = #ARGV - 3
local last = redis.call('INCRBY', KEYS[2], count)
local first = last - count + 1
local tickets = {}
for i = 1, count do
  tickets[i] = first + i - 1
end
register_sessions(KEYS[4], KEYS[5], KEYS[6], tickets, ARGV[2], ARGV[3])
local in_prequeue = 0
if now < tonumber(opens_at) then
  in_prequeue = 1
  redis.call('RPUSH', KEYS[3], unpack(ARGV, 4))
  local link = first .. ':' .. count .. ':' .. ARGV[1]
  local chain = redis.sha1hex((meta[4] or '') .. link)
  redis.call('HSET', KEYS[1], 'prequeue_chain', chain)
  redis.call('ZADD', KEYS[7], first, link .. ':' .. chain)
end
local sold_out = 0
if meta[2] == '1' then
  sold_out = 1
end
return {tostring(first), opens_at, tostring(in_prequeue), tostring(sold_out), meta[3] or ''}
