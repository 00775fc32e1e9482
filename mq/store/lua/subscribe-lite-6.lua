--[[
  subscribe-lite: a member of a group starts consuming a lite topic (existing or not yet created).
  In a group one member owns a lite topic at a time (ordered, one queue): the latest subscriber; the
  member it is taken from no longer sees it. When the lite topic has messages for the group already,
  the member is woken.

  KEYS[1] the group's owner hash ({ns:P:lite}:owner:G; lite topic -> member)
  KEYS[2] the member's subscription set ({ns:P:lite}:subs:G:C)
  KEYS[3] the parent's set of subscribing groups ({ns:P:lite}:groups)
  KEYS[4] the member's ready zset ({ns:P:lite}:ready:G:C)
  KEYS[5] the member's wake stream ({ns:P:lite}:wake:G:C)
  KEYS[6] the group's alive zset ({ns:P:lite}:alive:G)

  ARGV[1] the parent's key prefix (a previous owner's keys and the lite topic's are built from it in
          the shapes mq/keys.py documents, same slot)
  ARGV[2] group, ARGV[3] the member, ARGV[4] the lite topic, ARGV[5] now, ms

  Returns 1 when the member had not subscribed it before, else 0.

  Flags: allow-oom (a consumer's bookkeeping goes on when the store is full: see scripts.py)
]]
local prefix, group, me, lite, now = ARGV[1], ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5])
redis.call('SADD', KEYS[3], group)
redis.call('ZADD', KEYS[6], now, me)
local old = redis.call('HGET', KEYS[1], lite)
if old and old ~= me then
  redis.call('SREM', prefix .. 'subs:' .. group .. ':' .. old, lite)
  redis.call('ZREM', prefix .. 'ready:' .. group .. ':' .. old, lite)
end
redis.call('HSET', KEYS[1], lite, me)
local added = redis.call('SADD', KEYS[2], lite)
local seq = redis.call('HGET', prefix .. 's:' .. lite, 'seq')
if seq then
  local cursor = tonumber(redis.call('HGET', prefix .. 's:' .. lite, 'c:' .. group) or '0')
  local first = redis.call('ZRANGE', prefix .. 'i:' .. group .. ':' .. lite, 0, 0, 'WITHSCORES')
  local at = nil
  if cursor < tonumber(seq) then at = now elseif #first > 0 then at = tonumber(first[2]) end
  if at then
    redis.call('ZADD', KEYS[4], at, lite)
    redis.call('XADD', KEYS[5], 'MAXLEN', '1', '*', 'l', lite)
  end
end
return added
