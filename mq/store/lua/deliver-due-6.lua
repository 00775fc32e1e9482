--[[
  deliver-due: move the queue's due delayed messages into its log with fresh offsets, atomically.

  Several broker services may run this on the same queue at once: each due message is moved by
  exactly one call (ZREM and XADD happen in the same script), none is skipped, and a crash
  between calls leaves the rest waiting in the timer. A queue whose topic was deleted has its
  timers dropped. Delivery ignores the queue's write flag: these messages were accepted already.

  KEYS[1] queue meta hash
  KEYS[2] queue log stream
  KEYS[3] queue msg id index hash
  KEYS[4] queue key index zset
  KEYS[5] queue timer zset (delayed entry id -> due ms)
  KEYS[6] queue delayed stream

  ARGV[1] now, epoch ms: messages due at or before it are delivered
  ARGV[2] most messages to move in this call

  Returns {moved, next_due_ms}: next_due_ms is the earliest remaining due time, -1 when none.
]]
--@include append
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('DEL', KEYS[5], KEYS[6])
  return {0, -1}
end
local due = redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
local entries = {}
for _, id in ipairs(due) do
  local e = redis.call('XRANGE', KEYS[6], id, id)
  if #e > 0 then entries[#entries + 1] = e[1][2] end
end
if #entries > 0 then
  local first, now = append_reserve(#entries)
  for i, fields in ipairs(entries) do
    append_entry(first + i - 1, now, fields, 1, #fields)
  end
  append_flush(true)
end
if #due > 0 then
  redis.call('ZREM', KEYS[5], unpack(due))
  redis.call('XDEL', KEYS[6], unpack(due))
end
local rest = redis.call('ZRANGE', KEYS[5], 0, 0, 'WITHSCORES')
if #rest == 0 then return {#entries, -1} end
return {#entries, tonumber(rest[2])}
