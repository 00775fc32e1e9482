-- dedup: the queue's window of deduplication ids and retry fences (D140). Used by put-messages and
-- fence-message, which take the window's keys as DEDUP_KEYS {hash, expiry zset}.
--
-- The hash maps a dedup id to "offset \31 msg id \31 store ms" of its first send, and "\31" .. msg id
-- to "1": a producer retry's fence (no put of that msg id is taken here any more). The zset holds
-- every hash field with the time it expires (ms). Both keys expire with their last member, so an idle
-- queue keeps nothing; while members come and go, each call that adds one removes at most
-- DEDUP_PRUNE expired ones first (bounded work, and the window's memory follows the send rate).

local DEDUP_PRUNE = 32
-- the window of a queue whose meta has none (mq.model.topic.DEFAULT_DEDUP_WINDOW_S)
local DEDUP_DEFAULT_WINDOW_MS = 120000

-- nil when the window's keys can be written (absent, or a hash and a zset), else the reason: checked
-- before a script's first write, so a key of the wrong type never leaves it half-applied
local function dedup_problem(keys)
  for i, kind in ipairs({'hash', 'zset'}) do
    local found = redis.call('TYPE', keys[i])['ok']
    if found ~= 'none' and found ~= kind then return keys[i] .. ' is a ' .. found .. ', not a ' .. kind end
  end
  return nil
end

-- remove at most DEDUP_PRUNE members that expired at or before now_ms
local function dedup_prune(keys, now_ms)
  local gone = redis.call('ZRANGEBYSCORE', keys[2], '-inf', now_ms, 'LIMIT', 0, DEDUP_PRUNE)
  if #gone > 0 then
    redis.call('HDEL', keys[1], unpack(gone))
    redis.call('ZREM', keys[2], unpack(gone))
  end
end

-- the value of field (nil when absent or expired: pruning is bounded, so an expired one may linger)
local function dedup_get(keys, field, now_ms)
  local value = redis.call('HGET', keys[1], field)
  if not value then return nil end
  local expires = tonumber(redis.call('ZSCORE', keys[2], field))
  if expires == nil or expires <= now_ms then return nil end
  return value
end

-- remember field = value for ttl_ms from now_ms; both keys live at least as long
local function dedup_set(keys, field, value, now_ms, ttl_ms)
  redis.call('HSET', keys[1], field, value)
  redis.call('ZADD', keys[2], now_ms + ttl_ms, field)
  for _, key in ipairs(keys) do
    if redis.call('PTTL', key) < ttl_ms then redis.call('PEXPIRE', key, ttl_ms) end
  end
end

-- the store time (ms) of the entry at offset in log, or 0 when it is no longer there
local function dedup_store_ms(log, offset)
  local found = redis.call('XRANGE', log, '0-' .. (offset + 1), '0-' .. (offset + 1))
  if #found == 0 then return 0 end
  local fields = found[1][2]
  for j = 1, #fields, 2 do
    if fields[j] == 'st' then return tonumber(fields[j + 1]) end
  end
  return 0
end
