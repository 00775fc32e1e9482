--[[
  ack-simple: a simple consumer acknowledges a message, or changes how long it stays invisible.

  The receipt is valid only while the message's invisible time is the one it was handed out with:
  a message handed out again (its time passed) cannot be acked or extended through an old receipt.

  KEYS[1] group's invisible zset for the queue (offset -> visible again at, ms)
  KEYS[2] group's attempts hash for the queue

  ARGV[1] offset
  ARGV[2] visible_at the receipt was issued with
  ARGV[3] new visible_at, ms, or "" to acknowledge

  Returns 1 (done) or 0 (the receipt expired).

  Flags: allow-oom (a consumer's bookkeeping goes on when the store is full: see scripts.py)
]]
local current = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not current or tonumber(current) ~= tonumber(ARGV[2]) then return 0 end
if ARGV[3] == '' then
  redis.call('ZREM', KEYS[1], ARGV[1])
  redis.call('HDEL', KEYS[2], ARGV[1])
else
  redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
end
return 1
