-- join: hand out the next waiting-room ticket of a sale.
--
-- KEYS[1] sale meta hash   KEYS[2] ticket sequence   KEYS[3] pre-queue nonce list
-- KEYS[4] this gateway's session set   KEYS[5] this gateway's liveness key
-- KEYS[6] the sale's gateway registry (set)
-- ARGV[1] a fresh random draw nonce (hex)   ARGV[2] this gateway's instance id
-- ARGV[3] the liveness key's lifetime (ms)
--
-- Returns {ticket, opens_at_ms, draw nonce or "", sold_out (0/1), lottery commitment} (all
-- strings), or {} if the sale is not
-- armed (unknown to the waiting room). Checking the sale and taking the number in one script
-- means an unknown sale never consumes a ticket number. A ticket taken before the opening joins
-- the pre-queue: its nonce extends the hash chain the lottery's seed is mixed with.
local opens_at = redis.call('HGET', KEYS[1], 'opens_at_ms')
if not opens_at then
  return {}
end
local opens = tonumber(opens_at)
local now = now_ms()
close_prequeue(KEYS[1], KEYS[2], now)
local ticket = redis.call('INCR', KEYS[2])
register_session(KEYS[4], KEYS[5], KEYS[6], ticket, ARGV[2], ARGV[3])
local nonce = ''
if now < opens then
  nonce = ARGV[1]
  local chain = redis.call('HGET', KEYS[1], 'prequeue_chain') or ''
  redis.call('HSET', KEYS[1], 'prequeue_chain', redis.sha1hex(chain .. ARGV[1]))
  redis.call('RPUSH', KEYS[3], ARGV[1])
end
local sold_out = 0
if redis.call('HGET', KEYS[1], 'sold_out') == '1' then
  sold_out = 1
end
return {tostring(ticket), opens_at, nonce, tostring(sold_out),
  redis.call('HGET', KEYS[1], 'lottery_commitment') or ''}
