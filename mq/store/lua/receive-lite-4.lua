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

  ARGV[1] the parent's key prefix (each lite topic's stream, state hash and the group's in-flight
          zset are built from it in the shapes mq/keys.py documents, same slot)
  ARGV[2] group, ARGV[3] the member, ARGV[4] now, ms, ARGV[5] invisible duration, ms
  ARGV[6] most messages to return, ARGV[7] most delivery attempts (one due for attempt ARGV[7] + 1
  is dead), ARGV[8] most lite topics to look at

  Returns {deliveries, next_ready_ms, wake_id}: each delivery {kind, lite topic, offset, attempt,
  visible_at, fields} with kind "m" (a message) or "d" (dead: attempts exhausted; it stays invisible
  until the caller has stored it in the DLQ and acked it); next_ready_ms the earliest ready time left
  (-1: none); wake_id the wake stream's last entry id ("0-0": none), to block for entries after it.
  A lite topic that expired leaves the ready zset.

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
  local log, state, inflight = prefix .. 'm:' .. lite, prefix .. 's:' .. lite, prefix .. 'i:' .. group .. ':' .. lite
  local seq = redis.call('HGET', state, 'seq')
  if redis.call('HGET', KEYS[4], lite) ~= me or not seq then
    redis.call('ZREM', KEYS[1], lite)  -- taken by another member, or expired
  else
    seq = tonumber(seq)
    -- 1. invisible time over: hand out again
    for _, raw in ipairs(redis.call('ZRANGEBYSCORE', inflight, '-inf', now, 'LIMIT', 0, want - found)) do
      local id = '0-' .. (tonumber(raw) + 1)
      local e = redis.call('XRANGE', log, id, id)
      local attempts = 'a:' .. group .. ':' .. raw
      if #e == 0 then
        redis.call('ZREM', inflight, raw)
        redis.call('HDEL', state, attempts)
      else
        local attempt = redis.call('HINCRBY', state, attempts, 1)
        redis.call('ZADD', inflight, visible_at, raw)
        if attempt > max_attempts then
          out[#out + 1] = {'d', lite, tonumber(raw), attempt - 1, visible_at, e[1][2]}
        else
          out[#out + 1] = {'m', lite, tonumber(raw), attempt, visible_at, e[1][2]}
          found = found + 1
        end
      end
    end
    -- 2. new messages from the group's cursor
    local cursor = tonumber(redis.call('HGET', state, 'c:' .. group) or '0')
    if found < want and cursor < seq then
      local entries = redis.call('XRANGE', log, '0-' .. (cursor + 1), '+', 'COUNT', want - found)
      for _, e in ipairs(entries) do
        local offset = tonumber(string.match(e[1], '-(%d+)$')) - 1
        redis.call('ZADD', inflight, visible_at, offset)
        redis.call('HSET', state, 'a:' .. group .. ':' .. offset, 1)
        out[#out + 1] = {'m', lite, offset, 1, visible_at, e[2]}
        found = found + 1
        cursor = offset + 1
      end
      if #entries == 0 then cursor = seq end
      redis.call('HSET', state, 'c:' .. group, cursor)
      local ttl = redis.call('PTTL', log)
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
