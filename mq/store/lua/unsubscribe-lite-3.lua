--[[
  unsubscribe-lite: a member stops consuming a lite topic. The group keeps its cursor and in-flight
  messages of it (they expire with the lite topic), so a later subscriber goes on from there.

  KEYS[1] the group's owner hash ({ns:P:lite}:owner:G; lite topic -> member)
  KEYS[2] the member's subscription set ({ns:P:lite}:subs:G:C)
  KEYS[3] the member's ready zset ({ns:P:lite}:ready:G:C)

  ARGV[1] the member, ARGV[2] the lite topic

  Returns 1 when the member had subscribed it, else 0.

  Flags: allow-oom (a consumer's bookkeeping goes on when the store is full: see scripts.py)
]]
if redis.call('HGET', KEYS[1], ARGV[2]) == ARGV[1] then redis.call('HDEL', KEYS[1], ARGV[2]) end
redis.call('ZREM', KEYS[3], ARGV[2])
return redis.call('SREM', KEYS[2], ARGV[2])
