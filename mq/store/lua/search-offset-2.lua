--[[
  search-offset: the offset of the first message stored at or after a time (binary search over
  the queue's store timestamps, which never decrease along the offsets).

  KEYS[1] queue meta hash
  KEYS[2] queue log stream
  ARGV[1] timestamp_ms

  Returns the offset (max_offset when every stored message is older), or -1 when the queue
  does not exist. Raises for a timestamp that is not a number (read-only: nothing to undo).
]]
local target = tonumber(ARGV[1])
if target == nil or target ~= target then return redis.error_reply('ERR search-offset: timestamp_ms must be a number') end
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local hi = tonumber(redis.call('HGET', KEYS[1], 'seq') or '0')
local first = redis.call('XRANGE', KEYS[2], '-', '+', 'COUNT', 1)
if #first == 0 then return hi end
local lo = tonumber(string.match(first[1][1], '-(%d+)$')) - 1

local function store_time(offset)
  -- the first entry at or after offset (entries below the trim point are gone)
  local e = redis.call('XRANGE', KEYS[2], '0-' .. (offset + 1), '+', 'COUNT', 1)
  if #e == 0 then return nil end
  local fields = e[1][2]
  for j = 1, #fields, 2 do
    if fields[j] == 'st' then return tonumber(fields[j + 1]) end
  end
  return nil
end

-- invariant: every offset < lo is older than target; the answer lies in [lo, hi]
while lo < hi do
  local mid = math.floor((lo + hi) / 2)
  local ts = store_time(mid)
  if ts == nil or ts >= target then hi = mid else lo = mid + 1 end
end
return lo
