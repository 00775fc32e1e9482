--[[
  trace-append: add one event to a message's trace (Admin.message_trace, `mq trace`), keeping at most
  ARGV[3] bytes of events per message (the oldest go first), so a message retried forever cannot
  grow its trace without bound.

  KEYS[1] the queue's trace hash (msg id -> events as JSON lines)

  ARGV[1] msg id
  ARGV[2] the event, one line of JSON
  ARGV[3] most bytes kept per message

  Returns the bytes now kept for the message.
]]
local v = redis.call('HGET', KEYS[1], ARGV[1])
if v then v = v .. '\n' .. ARGV[2] else v = ARGV[2] end
local cap = tonumber(ARGV[3])
if #v > cap then
  local cut = string.find(v, '\n', #v - cap, true)
  if cut then v = string.sub(v, cut + 1) else v = ARGV[2] end
end
redis.call('HSET', KEYS[1], ARGV[1], v)
return #v
