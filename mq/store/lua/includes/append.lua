-- append: store messages in a queue's log with consecutive dense offsets and index their ids and
-- keys. Used by put-messages and deliver-due. Expects KEYS[1] meta, KEYS[2] log, KEYS[3] ids
-- index, KEYS[4] key index (see put-messages-4.lua for their layout).
-- Each redis.call costs a few microseconds, as much as an XADD, so index writes are gathered
-- into one HSET and one ZADD per chunk (unpack() has a stack limit).

local APPEND_CHUNK = 512
local append_ids, append_members = {}, {}

-- take n offsets; returns the first one and the store time (server clock, ms, as a string)
local function append_reserve(n)
  local first = redis.call('HINCRBY', KEYS[1], 'seq', n) - n
  local t = redis.call('TIME')
  return first, tostring(tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
end

local function append_flush(force)
  if #append_ids >= APPEND_CHUNK or (force and #append_ids > 0) then
    redis.call('HSET', KEYS[3], unpack(append_ids))
    append_ids = {}
  end
  if #append_members >= APPEND_CHUNK or (force and #append_members > 0) then
    redis.call('ZADD', KEYS[4], unpack(append_members))
    append_members = {}
  end
end

-- store the entry whose field/value pairs are items[from..to] at offset
local function append_entry(offset, now, items, from, to)
  for j = from, to, 2 do
    local field = items[j]
    if field == 'i' then
      append_ids[#append_ids + 1] = items[j + 1]
      append_ids[#append_ids + 1] = offset
    elseif field == 'k' then
      local padded = string.format('%020d', offset)
      for key in string.gmatch(items[j + 1], '[^\31]+') do
        append_members[#append_members + 1] = 0
        append_members[#append_members + 1] = key .. '\31' .. padded
      end
    end
  end
  -- unpack() last in the argument list expands in full: no per-message table is built
  redis.call('XADD', KEYS[2], '0-' .. (offset + 1), 'st', now, unpack(items, from, to))
  append_flush(false)
end
