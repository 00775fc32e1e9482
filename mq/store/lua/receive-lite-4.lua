--[[
  receive-lite: hand out messages of the lite topics a member owns, each invisible to the group's
  other receivers until acked or until its invisible time passes (as receive-simple does for a queue).

  Only the member's ready zset is read: a lite topic is in it (score: when it may next hand out
  something, ms) from the send that gave it a message, or from a message's invisible time, until it
  has nothing left. So a receive costs the lite topics that have something, never the member's
  subscriptions. Within a lite topic messages come in offset order (one queue); messages whose
  invisible time passed come before new ones.

  KEYS[1] the member's ready zset ({ns:P:lite}:ready:G:C; lite topic -> ready at, ms)
  KEYS[2] the member's wake stream ({ns:P:lite}:wake:G:C)
  KEYS[3] the group's alive zset ({ns:P:lite}:alive:G; this member's score is set to now)
  KEYS[4] the group's owner hash ({ns:P:lite}:owner:G; a lite topic the member no longer owns leaves
          its ready zset)

  ARGV[1] the parent's key prefix (each lite topic's hash and the group's in-flight zset of it are
          built from it in the shapes mq/keys.py documents, same slot)
  ARGV[2] group, ARGV[3] the member, ARGV[4] now, ms, ARGV[5] invisible duration, ms
  ARGV[6] most messages to return, ARGV[7] most delivery attempts (one due for attempt ARGV[7] + 1
  is dead), ARGV[8] most lite topics to look at

  Returns {deliveries, next_ready_ms, wake_id}: each delivery {kind, lite topic, offset, attempt,
  visible_at, packed message} with kind "m" (a message) or "d" (dead: attempts exhausted; it stays invisible
  until the caller has stored it in the DLQ and acked it); next_ready_ms the earliest ready time left
  (-1: none); wake_id the wake stream's last entry id ("0-0": none), to block for entries after it.
  A lite topic that expired leaves the ready zset. Each message is returned as put-lite stored it
  (packed fields, "st" last); a message no longer kept (the lite topic's bound of kept messages
  passed it) is passed by.

  Flags: allow-oom (a consumer's bookkeeping goes on when the store is full: see scripts.py)
]]
local prefix, group, me = ARGV[1], ARGV[2], ARGV[3]
local now, invisible, want = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local max_attempts = tonumber(ARGV[7])
local visible_at = now + invisible
redis.call('ZADD', KEYS[3], now, me)
local last = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)
local wake_id = '0-0'
if #last > 0 then wake_id = last[1][1] end

local out, found = {}, 0
local ready = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[8]))
for _, lite in ipairs(ready) do
  if found >= want then break end
  local state, inflight = prefix .. 's:' .. lite, prefix .. 'i:' .. group .. ':' .. lite
  local seq = redis.call('HGET', state, 'seq')
  if redis.call('HGET', KEYS[4], lite) ~= me or not seq then
    redis.call('ZREM', KEYS[1], lite)  -- taken by another member, or expired
  else
    seq = tonumber(seq)
    -- 1. invisible time over: hand out again
    for _, raw in ipairs(redis.call('ZRANGEBYSCORE', inflight, '-inf', now, 'LIMIT', 0, want - found)) do
      local packed = redis.call('HGET', state, 'm:' .. raw)
      local attempts = 'a:' .. group .. ':' .. raw
      if not packed then
        redis.call('ZREM', inflight, raw)
        redis.call('HDEL', state, attempts)
      else
        local attempt = redis.call('HINCRBY', state, attempts, 1)
        redis.call('ZADD', inflight, visible_at, raw)
        if attempt > max_attempts then
          out[#out + 1] = {'d', lite, tonumber(raw), attempt - 1, visible_at, packed}
        else
          out[#out + 1] = {'m', lite, tonumber(raw), attempt, visible_at, packed}
          found = found + 1
        end
      end
    end
    -- 2. new messages from the group's cursor
    local cursor = tonumber(redis.call('HGET', state, 'c:' .. group) or '0')
    cursor = math.max(cursor, tonumber(redis.call('HGET', state, 'lo') or '0'))  -- messages no longer kept
    if found < want and cursor < seq then
      while found < want and cursor < seq do
        local packed = redis.call('HGET', state, 'm:' .. cursor)
        if packed then
          redis.call('ZADD', inflight, visible_at, cursor)
          redis.call('HSET', state, 'a:' .. group .. ':' .. cursor, 1)
          out[#out + 1] = {'m', lite, cursor, 1, visible_at, packed}
          found = found + 1
        end
        cursor = cursor + 1
      end
      redis.call('HSET', state, 'c:' .. group, cursor)
      local ttl = redis.call('PTTL', state)
      if ttl > 0 then redis.call('PEXPIRE', inflight, ttl) end
    end
    -- 3. the lite topic's next turn
    if cursor < seq then
      redis.call('ZADD', KEYS[1], now, lite)
    else
      local first = redis.call('ZRANGE', inflight, 0, 0, 'WITHSCORES')
      if #first > 0 then redis.call('ZADD', KEYS[1], first[2], lite) else redis.call('ZREM', KEYS[1], lite) end
    end
  end
end
local nxt = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local next_ready = -1
if #nxt > 0 then next_ready = tonumber(nxt[2]) end
return {out, next_ready, wake_id}
