--[[
  deliver-due: move the queue's due delayed messages into its log with fresh offsets, atomically.

  Several broker services may run this on the same queue at once: each due message is moved by
  exactly one call (ZREM and XADD happen in the same script), none is skipped, and a crash
  between calls leaves the rest waiting in the timer. A queue whose topic was deleted has its
  timers dropped. Delivery ignores the queue's write flag: these messages were accepted already.
  Every due message is checked and every write computed before the first write: a message that
  cannot be stored (malformed, e.g. written around the library) goes to the queue's timer
  dead-letter stream with the reason, once, and never stops the others.

  KEYS[1] queue meta hash
  KEYS[2] queue log stream
  KEYS[3] queue msg id index hash
  KEYS[4] queue key index zset
  KEYS[5] queue timer zset (delayed entry id -> due ms)
  KEYS[6] queue delayed stream
  KEYS[7] queue timer dead-letter stream (fields: delayed_id, reason, then the message's fields)

  ARGV[1] now, epoch ms: messages due at or before it are delivered
  ARGV[2] most messages to move in this call (it also stops at the per-call byte and key bounds of
          includes/message.lua; what is left stays due for the next call)

  Returns {moved, next_due_ms, dead}: next_due_ms is the earliest remaining due time, -1 when
  none; dead is how many went to the dead-letter stream.
]]
--@include append
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('DEL', KEYS[5], KEYS[6])
  return {0, -1, 0}
end
local due = redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
local entries, dead = {}, {}
local taken, total_bytes, total_keys = 0, 0, 0
for _, id in ipairs(due) do
  local e = redis.call('XRANGE', KEYS[6], id, id)
  if #e > 0 then
    local fields = e[1][2]
    local problem = append_problem(fields, 1, #fields)
    if problem then
      dead[#dead + 1] = {id, problem, fields}
    else
      local bytes, keys = message_cost(fields, 1, #fields)
      if #entries > 0 and (total_bytes + bytes > CALL_MAX_BYTES or total_keys + keys > CALL_MAX_KEYS) then break end
      entries[#entries + 1] = {fields, 1, #fields}
      total_bytes, total_keys = total_bytes + bytes, total_keys + keys
    end
  end
  taken = taken + 1
end
-- what is not taken now stays due: the next call moves it
for i = #due, taken + 1, -1 do due[i] = nil end
local plan, problem = nil, nil
if #entries > 0 then
  plan, problem = append_plan(entries)
  if not plan then return redis.error_reply('ERR corrupt queue: ' .. problem) end
end
local rest = redis.call('ZRANGE', KEYS[5], #due, #due, 'WITHSCORES')
-- writes only from here
if plan then
  local refused = append_write(plan)
  if refused then return redis.error_reply(refused) end
end
for _, d in ipairs(dead) do
  redis.call('XADD', KEYS[7], '*', 'delayed_id', d[1], 'reason', d[2], append_kept_fields(d[3]))
end
for i = 1, #due, APPEND_CHUNK do
  local last = math.min(i + APPEND_CHUNK - 1, #due)
  redis.call('ZREM', KEYS[5], unpack(due, i, last))
  redis.call('XDEL', KEYS[6], unpack(due, i, last))
end
if #rest == 0 then return {#entries, -1, #dead} end
return {#entries, tonumber(rest[2]), #dead}
