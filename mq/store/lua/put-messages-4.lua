--[[
  put-messages: append one message or a batch to a queue, in one atomic step.

  Assigns consecutive dense offsets from the queue's `seq`, stores each message as a stream entry
  with id 0-(offset+1), records the store time (server clock, ms), indexes the msg id and every
  message key for queries. Index writes are gathered into one HSET and one ZADD per batch: each
  redis.call costs a few microseconds, as much as the XADD itself.

  KEYS[1] queue meta hash   (fields: seq = next offset, w = "1" when writable)
  KEYS[2] queue log stream
  KEYS[3] msg id index hash (msg id -> offset)
  KEYS[4] key index zset    (members "key\x1f" .. offset as 20 digits, score 0: lex order = offset order)

  ARGV[1] number of messages N
  then, per message: ARGV[p] = 2F (number of field/value items), followed by F field/value pairs.
  Field "i" is the msg id, field "k" the message keys joined by \x1f; "st" is added here.

  Returns {first_offset, store_timestamp_ms} on success, or a negative code:
    -1 the queue does not exist (unknown topic or queue id)
    -2 the queue exists but is not writable (write_queues shrank, or perm lacks "w")
]]
local writable = redis.call('HGET', KEYS[1], 'w')
if not writable then return -1 end
if writable ~= '1' then return -2 end

local n = tonumber(ARGV[1])
local first = redis.call('HINCRBY', KEYS[1], 'seq', n) - n
local t = redis.call('TIME')
local now = tostring(tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))

-- unpack() has a stack limit, so index writes go out in chunks
local CHUNK = 512
local ids, members = {}, {}
local function flush(force)
  if #ids >= CHUNK or (force and #ids > 0) then
    redis.call('HSET', KEYS[3], unpack(ids))
    ids = {}
  end
  if #members >= CHUNK or (force and #members > 0) then
    redis.call('ZADD', KEYS[4], unpack(members))
    members = {}
  end
end

local p = 2
for m = 0, n - 1 do
  local offset = first + m
  local count = tonumber(ARGV[p])
  for j = p + 1, p + count, 2 do
    local field = ARGV[j]
    if field == 'i' then
      ids[#ids + 1] = ARGV[j + 1]
      ids[#ids + 1] = offset
    elseif field == 'k' then
      local padded = string.format('%020d', offset)
      for key in string.gmatch(ARGV[j + 1], '[^\31]+') do
        members[#members + 1] = 0
        members[#members + 1] = key .. '\31' .. padded
      end
    end
  end
  -- unpack() last in the argument list expands in full: no per-message table is built
  redis.call('XADD', KEYS[2], '0-' .. (offset + 1), 'st', now, unpack(ARGV, p + 1, p + count))
  flush(false)
  p = p + count + 1
end
flush(true)
return {first, tonumber(now)}
