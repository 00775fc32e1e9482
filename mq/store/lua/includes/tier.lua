-- Tiered storage for the simple-consumer receive scripts (receive-simple, receive-fifo; D94).
-- tier_range(manifest): the tier's offsets [start, end) from a queue's manifest zset (0, 0: none).
-- tier_cursor(log, manifest, cursor, max_offset): a group's cursor, moved up to the tier's start when
-- the tier's retention removed what it points at, and whether the caller must read it from the tier
-- (below the log's first offset and held by the tier).
local function tier_range(manifest)
  local lowest = redis.call('ZRANGE', manifest, 0, 0, 'WITHSCORES')
  if #lowest == 0 then return 0, 0 end
  return tonumber(lowest[2]), cjson.decode(redis.call('ZRANGE', manifest, -1, -1)[1])['e']
end

local function tier_cursor(log, manifest, cursor, max_offset)
  local first = redis.call('XRANGE', log, '-', '+', 'COUNT', 1)
  local log_first = max_offset
  if #first > 0 then log_first = tonumber(string.match(first[1][1], '-(%d+)$')) - 1 end
  if cursor >= log_first then return cursor, false end
  local lo, hi = tier_range(manifest)
  if hi > 0 and cursor < lo then cursor = lo end
  return cursor, cursor < hi
end
