-- join: hand out the next waiting-room tickets of a sale, one per join of a batch.
--
-- KEYS[1] sale meta hash   KEYS[2] ticket sequence   KEYS[3] pre-queue nonce list
-- KEYS[4] this gateway's session set   KEYS[5] this gateway's liveness key
-- KEYS[6] the sale's gateway registry (set)   KEYS[7] the pre-queue's batches (sorted set)
-- ARGV[1] the batch's Merkle root (lowercase hex; contract/src/lottery.rs computes it from the
--         nonces)   ARGV[2] this gateway's instance id   ARGV[3] the liveness key's lifetime (ms)
-- ARGV[4..] the draw nonces of the batch's joins, in the order their tickets are to be given
--
-- Returns {first ticket, opens_at_ms, in pre-queue (0/1), sold_out (0/1), lottery commitment}
-- (all strings), or {} if the sale is not armed (unknown to the waiting room): the batch's
-- tickets are first, first + 1, ... Checking the sale and taking the numbers in one script means
-- an unknown sale never consumes a ticket number.
--
-- Tickets taken before the opening join the pre-queue: their nonces are published in ticket
-- order, the batch is recorded with its root, and the pre-queue's chain, the input of the draw,
-- takes one link for the whole batch: SHA1-hex(chain || "<first>:<count>:<root>").
local opens_at = redis.call('HGET', KEYS[1], 'opens_at_ms')
if not opens_at then
  return {}
end
local opens = tonumber(opens_at)
local now = now_ms()
close_prequeue(KEYS[1], KEYS[2], now)
local count = #ARGV - 3
local last = redis.call('INCRBY', KEYS[2], count)
local first = last - count + 1
for ticket = first, last do
  register_session(KEYS[4], KEYS[5], KEYS[6], ticket, ARGV[2], ARGV[3])
end
local in_prequeue = 0
if now < opens then
  in_prequeue = 1
  for i = 4, #ARGV do
    redis.call('RPUSH', KEYS[3], ARGV[i])
  end
  local previous = redis.call('HGET', KEYS[1], 'prequeue_chain') or ''
  local link = first .. ':' .. count .. ':' .. ARGV[1]
  local chain = redis.sha1hex(previous .. link)
  redis.call('HSET', KEYS[1], 'prequeue_chain', chain)
  redis.call('ZADD', KEYS[7], first, link .. ':' .. chain)
end
local sold_out = 0
if redis.call('HGET', KEYS[1], 'sold_out') == '1' then
  sold_out = 1
end
return {tostring(first), opens_at, tostring(in_prequeue), tostring(sold_out),
  redis.call('HGET', KEYS[1], 'lottery_commitment') or ''}
