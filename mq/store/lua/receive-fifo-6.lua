--[[
  receive-fifo: hand out messages of one queue to a simple-consumer group that consumes message
  groups in order (a "fifo" group of the RocketMQ 5 endpoint) [RocketMQ 5 FIFO SimpleConsumer].

  Order is kept by queue: the hash selector puts every message of a message group into one queue,
  and a queue hands out nothing while any message it handed out is still invisible (not acked, its
  time not passed). A batch holds at most one message per message group: the scan stops at the
  first matching message whose group is already in the batch, so a message group's next message is
  handed out only after the previous one is acked (or dead-lettered). Messages whose invisible time
  passed are handed out again (attempt + 1, lowest offset first) before any new message.

  KEYS and ARGV as receive-simple-6.lua (the same keys: acks go through ack-simple-2.lua):
  KEYS[1] queue meta hash, KEYS[2] queue log stream, KEYS[3] queue offsets hash (group -> cursor),
  KEYS[4] group's invisible zset for this queue, KEYS[5] group's attempts hash for this queue,
  KEYS[6] queue's tier manifest zset (empty without a tier)
  ARGV[1] group, ARGV[2] now (ms), ARGV[3] invisible duration (ms), ARGV[4] most messages,
  ARGV[5] most delivery attempts, ARGV[6]/ARGV[7] filter type and data, ARGV[8] most entries to scan

  The message group is the system property __SHARDINGKEY (field "s", a JSON object); a message
  without one is a group of its own.

  Returns a list of {kind, offset, attempt, visible_at, fields} like receive-simple, with its tier
  answers too (D94): a message handed out again whose entry is only in the tier has fields nil; a
  cursor below the log's first offset that the tier holds is answered {"t", cursor, 0, 0, nil} with
  nothing handed out (the caller reads the tier, keeps one message a group, and claims with
  claim-tiered).

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
local out = {}
local visible_at = now + invisible

-- 1. a message handed out and still invisible: the queue waits for it
if #redis.call('ZRANGEBYSCORE', KEYS[4], '(' .. now, '+inf', 'LIMIT', 0, 1) > 0 then return out end

-- 2. invisible time over: hand out again, lowest offset first
local expired = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now)
if #expired > 0 then
  local offsets = {}
  for _, raw in ipairs(expired) do offsets[#offsets + 1] = tonumber(raw) end
  table.sort(offsets)
  for _, offset in ipairs(offsets) do
    if #out >= want then break end
    local raw = tostring(offset)
    local e = redis.call('XRANGE', KEYS[2], '0-' .. (offset + 1), '0-' .. (offset + 1))
    local attempt = redis.call('HINCRBY', KEYS[5], raw, 1)
    local fields = nil
    if #e > 0 then
      fields = e[1][2]
    else
      local lo, hi = tier_range(KEYS[6])
      if offset >= lo and offset < hi then fields = false end  -- in the tier: the caller reads it there
    end
    if fields == nil then
      redis.call('ZREM', KEYS[4], raw)
      redis.call('HDEL', KEYS[5], raw)
    else
      redis.call('ZADD', KEYS[4], visible_at, raw)
      if attempt > max_attempts then
        out[#out + 1] = {'d', offset, attempt - 1, visible_at, fields}
      else
        out[#out + 1] = {'m', offset, attempt, visible_at, fields}
      end
    end
  end
  if #out > 0 then return out end
end

-- 3. new messages from the cursor, one per message group
local function message_group(fields, offset)
  for j = 1, #fields, 2 do
    if fields[j] == 's' then
      local ok, system = pcall(cjson.decode, fields[j + 1])
      if ok and type(system) == 'table' and type(system['__SHARDINGKEY']) == 'string' then
        return 'g' .. system['__SHARDINGKEY']
      end
    end
  end
  return 'o' .. offset
end

local matches = make_matcher(ARGV[6], ARGV[7])
local max_offset = tonumber(seq or '0')
local cursor = tonumber(redis.call('HGET', KEYS[3], ARGV[1]) or max_offset)
local scan = tonumber(ARGV[8])
if cursor < max_offset then
  local in_tier
  cursor, in_tier = tier_cursor(KEYS[2], KEYS[6], cursor, max_offset)
  if in_tier then
    redis.call('HSET', KEYS[3], ARGV[1], cursor)
    out[#out + 1] = {'t', cursor, 0, 0, false}
    return out
  end
  local entries = redis.call('XRANGE', KEYS[2], '0-' .. (cursor + 1), '+', 'COUNT', scan)
  local taken, stopped = {}, false
  for _, e in ipairs(entries) do
    local offset = tonumber(string.match(e[1], '-(%d+)$')) - 1
    if matches(e[2]) then
      local g = message_group(e[2], offset)
      if taken[g] or #out >= want then
        stopped = true
        break
      end
      taken[g] = true
      redis.call('ZADD', KEYS[4], visible_at, offset)
      redis.call('HSET', KEYS[5], offset, 1)
      out[#out + 1] = {'m', offset, 1, visible_at, e[2]}
    end
    cursor = offset + 1
  end
  if not stopped and #entries < scan then cursor = math.max(cursor, max_offset) end
end
redis.call('HSET', KEYS[3], ARGV[1], cursor)
return out
