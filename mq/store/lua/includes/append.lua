-- append: store messages in a queue's log with consecutive dense offsets and index their ids and
-- keys. Used by put-messages, deliver-due and end-transaction; put-pending uses append_problem.
-- Expects KEYS[1] meta, KEYS[2] log, KEYS[3] ids index, KEYS[4] key index (see put-messages-4.lua).
--
-- Never half-applies: append_problem checks a message and append_plan computes every offset, index
-- entry and the store time with reads only; append_write then only writes (its first write is the
-- only one Redis can refuse for OOM, so an error leaves the store as it was). Index writes are
-- gathered into HSET/ZADD calls of at most APPEND_CHUNK items (unpack() has a stack limit).
--@include message

local APPEND_CHUNK = 512
-- the plan of appending entries {items, from, to} (each checked by append_problem): reads only.
-- Returns a plan for append_write, or nil and a reason when the log is ahead of the queue's seq or
-- an index key has the wrong type.
local function append_plan(entries)
  -- a key of the wrong type would fail a write half-way: refuse before the first one
  for _, check in ipairs({{KEYS[3], 'hash'}, {KEYS[4], 'zset'}}) do
    local kind = redis.call('TYPE', check[1])['ok']
    if kind ~= 'none' and kind ~= check[2] then return nil, check[1] .. ' is a ' .. kind .. ', not a ' .. check[2] end
  end
  local first = tonumber(redis.call('HGET', KEYS[1], 'seq') or '0')
  local last = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)
  if #last > 0 and tonumber(string.match(last[1][1], '-(%d+)$')) > first then
    return nil, 'the log holds entries beyond the queue sequence ' .. first
  end
  local t = redis.call('TIME')
  local now = tostring(tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
  local ids, members = {}, {}
  for m, e in ipairs(entries) do
    local items, offset = e[1], first + m - 1
    for j = e[2], e[3], 2 do
      local field = items[j]
      if field == 'i' then
        ids[#ids + 1] = items[j + 1]
        ids[#ids + 1] = offset
      elseif field == 'k' then
        local padded = string.format('%020d', offset)
        for key in string.gmatch(items[j + 1], '[^\31]+') do
          members[#members + 1] = 0
          members[#members + 1] = key .. '\31' .. padded
        end
      end
    end
  end
  return {first = first, now = now, entries = entries, ids = ids, members = members}
end

-- carry out a plan: writes only, every call with a bounded number of arguments
local function append_write(plan)
  redis.call('HSET', KEYS[1], 'seq', plan.first + #plan.entries)
  for m, e in ipairs(plan.entries) do
    -- unpack() last in the argument list expands in full: no per-message table is built
    redis.call('XADD', KEYS[2], '0-' .. (plan.first + m), 'st', plan.now, unpack(e[1], e[2], e[3]))
  end
  for i = 1, #plan.ids, APPEND_CHUNK do
    redis.call('HSET', KEYS[3], unpack(plan.ids, i, math.min(i + APPEND_CHUNK - 1, #plan.ids)))
  end
  for i = 1, #plan.members, APPEND_CHUNK do
    redis.call('ZADD', KEYS[4], unpack(plan.members, i, math.min(i + APPEND_CHUNK - 1, #plan.members)))
  end
end
