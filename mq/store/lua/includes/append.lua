-- append: store messages in a queue's log with consecutive dense offsets and index their ids and
-- keys. Used by put-messages, deliver-due and end-transaction; put-pending uses append_problem.
-- Expects KEYS[1] meta, KEYS[2] log, KEYS[3] ids index, KEYS[4] key index (see put-messages-6.lua).
--
-- Never half-applies: append_problem checks a message and append_plan computes every offset, index
-- entry and the store time with reads only; append_write's first write is the first message's XADD,
-- the one write that can still be refused (a log already holding that id, a log of the wrong type, or
-- OOM): then nothing is written and it returns the reason, which the caller returns before any write
-- of its own. Index writes are gathered into HSET/ZADD calls of at most APPEND_CHUNK items (unpack()
-- has a stack limit). Each redis.call costs a few microseconds on Redis 7.0 (D51): the log's top entry
-- is not read (XADD refuses an id at or below it), an index key's type is checked only when written.
--@include message

local APPEND_CHUNK = 512
--@include lognext
-- the plan of appending entries {items, from, to} (each checked by append_problem): reads only.
-- Returns a plan for append_write, or nil and a reason when the log is ahead of the queue's seq or
-- an index key has the wrong type.
-- seq: the queue's next offset when the caller has read it (nil: read here). A meta without seq is a
-- queue never written to, or one whose meta Redis evicted and create_topic made again: the log's last
-- id then says where the queue is (the stream keeps it even when trimmed empty), so no offset is reused.
local function append_plan(entries, seq)
  local first = tonumber(seq or redis.call('HGET', KEYS[1], 'seq') or log_next_offset(KEYS[2]))
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
  -- a key of the wrong type would fail a write half-way: refuse before the first one
  local checks = {{KEYS[3], 'hash'}}
  if #members > 0 then checks[2] = {KEYS[4], 'zset'} end
  for _, check in ipairs(checks) do
    local kind = redis.call('TYPE', check[1])['ok']
    if kind ~= 'none' and kind ~= check[2] then return nil, check[1] .. ' is a ' .. kind .. ', not a ' .. check[2] end
  end
  return {first = first, now = now, entries = entries, ids = ids, members = members}
end

-- carry out a plan: writes only, every call with a bounded number of arguments. Returns nil, or the
-- reason the first XADD was refused (nothing written then: the caller returns it as an error).
local function append_write(plan)
  -- unpack() last in the argument list expands in full: no per-message table is built
  local e = plan.entries[1]
  local added = redis.pcall('XADD', KEYS[2], '0-' .. (plan.first + 1), 'st', plan.now, unpack(e[1], e[2], e[3]))
  if type(added) == 'table' and added.err then
    if string.find(added.err, 'equal or smaller', 1, true) then
      return 'ERR corrupt queue: the log holds entries beyond the queue sequence ' .. plan.first
    end
    return added.err
  end
  for m = 2, #plan.entries do
    e = plan.entries[m]
    redis.call('XADD', KEYS[2], '0-' .. (plan.first + m), 'st', plan.now, unpack(e[1], e[2], e[3]))
  end
  redis.call('HSET', KEYS[1], 'seq', plan.first + #plan.entries)
  for i = 1, #plan.ids, APPEND_CHUNK do
    redis.call('HSET', KEYS[3], unpack(plan.ids, i, math.min(i + APPEND_CHUNK - 1, #plan.ids)))
  end
  for i = 1, #plan.members, APPEND_CHUNK do
    redis.call('ZADD', KEYS[4], unpack(plan.members, i, math.min(i + APPEND_CHUNK - 1, #plan.members)))
  end
  return nil
end
