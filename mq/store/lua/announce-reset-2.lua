--[[
  announce-reset: record an offset reset of a consumer group on one topic, for its running members.
  The offsets themselves are written to the queues' offsets hashes first (other slots); members see
  the counter move with their next heartbeat, read the reset and continue from the new offsets
  [RocketMQ resetOffsetByTime on a live group].

  KEYS[1] group resets hash (topic -> "seq \x1f offsets JSON")
  KEYS[2] group config hash (field reset_seq: the group's offset-reset counter)

  ARGV[1] topic
  ARGV[2] offsets JSON: {"queue id": offset, ...}

  Returns the reset's sequence number.

  Flags: allow-oom (a consumer's bookkeeping goes on when the store is full: see scripts.py)
]]
local seq = redis.call('HINCRBY', KEYS[2], 'reset_seq', 1)
redis.call('HSET', KEYS[1], ARGV[1], seq .. '\31' .. ARGV[2])
return seq
