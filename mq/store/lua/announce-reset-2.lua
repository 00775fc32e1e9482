--[[
  announce-reset: record an offset reset of a consumer group on one topic, for its running members.
  The offsets themselves are written to the queues' offsets hashes first (other slots); members see
  the counter move with their next heartbeat, read the reset and continue from the new offsets
  [RocketMQ resetOffsetByTime on a live group].

  KEYS[1] group resets hash (topic -> "seq \x1f offsets JSON")
  KEYS[2] group offset-reset counter (string)

  ARGV[1] topic
  ARGV[2] offsets JSON: {"queue id": offset, ...}

  Returns the reset's sequence number.
]]
local seq = redis.call('INCR', KEYS[2])
redis.call('HSET', KEYS[1], ARGV[1], seq .. '\31' .. ARGV[2])
return seq
