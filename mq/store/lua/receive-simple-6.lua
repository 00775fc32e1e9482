--[[
  receive-simple: hand out messages of one queue to a simple consumer group, each invisible to the
  group's other receivers until acked or until its invisible time passes [RocketMQ 5 SimpleConsumer].

  First, messages whose invisible time has passed are handed out again with attempt + 1 (or, past
  the most attempts, returned as dead so the caller moves them to the DLQ and acks them); then new
  messages from the group's cursor, filtered in the store.

  KEYS[1] queue meta hash (seq = next offset)
  KEYS[2] queue log stream
  KEYS[3] queue offsets hash (group -> cursor: the next offset never handed out)
  KEYS[4] group's invisible zset for this queue (offset -> visible again at, ms)
  KEYS[5] group's attempts hash for this queue (offset -> deliveries so far)
  KEYS[6] queue's tier manifest zset (segment JSON -> start offset; empty without a tier)

  ARGV[1] group
  ARGV[2] now, epoch ms
  ARGV[3] invisible duration, ms
  ARGV[4] most messages to return
  ARGV[5] most delivery attempts (a message due for attempt ARGV[5] + 1 is dead)
  ARGV[6] filter type ("" / "TAG" / "SQL92"), ARGV[7] filter data (see pull-messages-2.lua)
  ARGV[8] most new entries to scan

  Returns a list of {kind, offset, attempt, visible_at, fields}: kind "m" (a message to process) or
  "d" (dead: attempts exhausted). A dead message stays invisible like any other until the caller
  has stored it in the DLQ and acked it, so a crash in between cannot lose it.

  Tiered storage: Redis holds a queue's messages from its log's first offset; the tier holds those
  below, up to the manifest's end. A message handed out again whose entry left Redis for the tier
  comes back with fields nil (the caller reads it from the tier). A cursor below the log's first
  offset where the tier holds it ends the list with {"t", cursor, 0, 0, nil} and moves nothing: the
  caller reads the tier from there and hands the messages out with claim-tiered (which checks the
  cursor did not move meanwhile). A cursor below the tier's start (the tier's retention removed
  those) moves up to it first.

  Raises "EVICTED …" when the queue's meta has no seq but its log exists (Redis evicted the meta: see
  includes/evicted.lua); nothing is written then.

  Flags: allow-oom (a consumer's bookkeeping goes on when the store is full: see scripts.py)
]]
--@include filter
--@include tier

--@include evicted
-- read first (no step below changes it): a meta Redis evicted is refused before any write
local seq = redis.call('HGET', KEYS[1], 'seq')
if meta_evicted(seq) then return redis.error_reply(EVICTED) end
local now, invisible, want = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local max_attempts = tonumber(ARGV[5])
local out, found = {}, 0
local visible_at = now + invisible

local function entry_at(offset)
  local e = redis.call('XRANGE', KEYS[2], '0-' .. (offset + 1), '0-' .. (offset + 1))
  if #e == 0 then return nil end
  return e[1][2]
end

-- 1. invisible time over: hand out again
local expired = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now, 'LIMIT', 0, want)
for _, raw in ipairs(expired) do
  local offset = tonumber(raw)
  local fields = entry_at(offset)
  local attempt = redis.call('HINCRBY', KEYS[5], raw, 1)
  if fields == nil then
    local lo, hi = tier_range(KEYS[6])
    if offset >= lo and offset < hi then fields = false end  -- in the tier: the caller reads it there
  end
  if fields == nil then
    redis.call('ZREM', KEYS[4], raw)
    redis.call('HDEL', KEYS[5], raw)
  elseif attempt > max_attempts then
    redis.call('ZADD', KEYS[4], visible_at, raw)
    out[#out + 1] = {'d', offset, attempt - 1, visible_at, fields}
  else
    redis.call('ZADD', KEYS[4], visible_at, raw)
    out[#out + 1] = {'m', offset, attempt, visible_at, fields}
    found = found + 1
  end
end

-- 2. new messages from the cursor
local matches = make_matcher(ARGV[6], ARGV[7])
local max_offset = tonumber(seq or '0')
local cursor = tonumber(redis.call('HGET', KEYS[3], ARGV[1]) or max_offset)
local scan = tonumber(ARGV[8])
if found < want and cursor < max_offset then
  local in_tier
  cursor, in_tier = tier_cursor(KEYS[2], KEYS[6], cursor, max_offset)
  if in_tier then
    redis.call('HSET', KEYS[3], ARGV[1], cursor)
    out[#out + 1] = {'t', cursor, 0, 0, false}
    return out
  end
  local entries = redis.call('XRANGE', KEYS[2], '0-' .. (cursor + 1), '+', 'COUNT', scan)
  for _, e in ipairs(entries) do
    local offset = tonumber(string.match(e[1], '-(%d+)$')) - 1
    cursor = offset + 1
    if matches(e[2]) then
      redis.call('ZADD', KEYS[4], visible_at, offset)
      redis.call('HSET', KEYS[5], offset, 1)
      out[#out + 1] = {'m', offset, 1, visible_at, e[2]}
      found = found + 1
      if found >= want then break end
    end
  end
  if found < want and #entries < scan then cursor = math.max(cursor, max_offset) end
end
redis.call('HSET', KEYS[3], ARGV[1], cursor)
return out
