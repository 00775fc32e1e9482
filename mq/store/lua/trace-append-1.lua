--[[
  trace-append: add events to the traces of messages of one queue (Admin.message_trace, `mq trace`),
  keeping at most ARGV[1] bytes of events per message (the oldest go first), so a message retried
  forever cannot grow its trace without bound. One call takes every event a client gathered for the
  queue since its last write.

  KEYS[1] the queue's trace hash (msg id -> events as JSON lines)

  ARGV[1] most bytes kept per message
  ARGV[2], ARGV[3], ... pairs: msg id, the event (one line of JSON)

  Returns the number of events added.
]]
local cap = tonumber(ARGV[1])
local added = 0
for i = 2, #ARGV - 1, 2 do
  local v = redis.call('HGET', KEYS[1], ARGV[i])
  if v then v = v .. '\n' .. ARGV[i + 1] else v = ARGV[i + 1] end
  if #v > cap then
    local cut = string.find(v, '\n', #v - cap, true)
    if cut then v = string.sub(v, cut + 1) else v = ARGV[i + 1] end
  end
  redis.call('HSET', KEYS[1], ARGV[i], v)
  added = added + 1
end
return added
