--[[
  pull-messages: read the next messages of a queue for a consumer, filtered in the store so that
  messages the subscription does not match never cross the network.

  KEYS[1] queue meta hash (field seq = next offset to be written)
  KEYS[2] queue log stream (entry id 0-(offset+1))

  ARGV[1] offset to read from (trimmed offsets are skipped: reading resumes at the oldest entry)
  ARGV[2] most messages to return
  ARGV[3] most entries to scan in this call (bounds the work when few messages match)
  ARGV[4] filter type: "" (everything), "TAG" or "SQL92"
  ARGV[5] filter data: TAG: the tags joined by \x1f; SQL92: the expression's JSON tree
          (see mq/filter/sql92.py for its node format)

  Returns {next_offset, max_offset, entry1, entry2, ...} where each entry is {id, {field, value, ...}}
  as XRANGE returns it, and next_offset is where the next pull starts (one past the last entry
  scanned, matched or not; never beyond max_offset).
]]
--@include filter
local offset = tonumber(ARGV[1])
local want = tonumber(ARGV[2])
local scan = tonumber(ARGV[3])
local ftype = ARGV[4]
local max_offset = tonumber(redis.call('HGET', KEYS[1], 'seq') or '0')
if offset >= max_offset then return {max_offset, max_offset} end

local matches = make_matcher(ftype, ARGV[5])

local out = {0, max_offset}
local next_offset = offset
local found = 0
while found < want and scan > 0 and next_offset < max_offset do
  local batch = math.min(scan, want * 4)
  local entries = redis.call('XRANGE', KEYS[2], '0-' .. (next_offset + 1), '+', 'COUNT', batch)
  if #entries == 0 then next_offset = max_offset break end
  for _, entry in ipairs(entries) do
    local entry_offset = tonumber(string.match(entry[1], '-(%d+)$')) - 1
    next_offset = entry_offset + 1
    scan = scan - 1
    if matches(entry[2]) then
      out[#out + 1] = entry
      found = found + 1
      if found >= want then break end
    end
  end
  if #entries < batch then
    if found < want then next_offset = math.max(next_offset, max_offset) end
    break
  end
end
out[1] = next_offset
return out
