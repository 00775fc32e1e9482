--[[
  ack-lite: a simple consumer acknowledges a message of a lite topic, or changes how long it stays
  invisible (as ack-simple does for a queue), and says the member is alive.

  KEYS[1] the group's in-flight zset of the lite topic ({ns:P:lite}:i:G:L; offset -> visible again at, ms)
  KEYS[2] the lite topic's state hash ({ns:P:lite}:s:L; field a:G:OFFSET = delivery attempts)
  KEYS[3] the group's alive zset ({ns:P:lite}:alive:G; member -> last seen, ms)

  ARGV[1] group
  ARGV[2] offset
  ARGV[3] visible_at the receipt was issued with
  ARGV[4] new visible_at, ms, or "" to acknowledge
  ARGV[5] the member, ARGV[6] now, ms

  Returns 1 (done) or 0 (the receipt expired, or the lite topic did).

  Flags: allow-oom (a consumer's bookkeeping goes on when the store is full: see scripts.py)
]]
redis.call('ZADD', KEYS[3], ARGV[6], ARGV[5])
local current = redis.call('ZSCORE', KEYS[1], ARGV[2])
if not current or tonumber(current) ~= tonumber(ARGV[3]) then return 0 end
if ARGV[4] == '' then
  redis.call('ZREM', KEYS[1], ARGV[2])
  redis.call('HDEL', KEYS[2], 'a:' .. ARGV[1] .. ':' .. ARGV[2])
else
  redis.call('ZADD', KEYS[1], ARGV[4], ARGV[2])
end
return 1
