--[[
  fence-message: a producer retry's look at the queue of an attempt whose outcome it does not know
  (a reply timed out or a connection was lost after the put was written), in one atomic step: is msg
  id X stored here? If so, where; if not, fence X, so no put of X is ever taken by this queue — the
  first attempt may still be executed by Redis after this look (D140). Either the retry finds the
  first write, or the first write can never happen.

  KEYS[1] msg id index hash (msg id -> offset)
  KEYS[2] dedup hash        ("\31" .. msg id -> "1": fences; dedup ids -> their first send)
  KEYS[3] dedup expiry zset (member of KEYS[2] -> when it expires, ms)

  ARGV[1] the msg id (a batch's first id: a put stores all of its call or nothing)
  ARGV[2] how long the fence stays, ms (longer than any put can wait to run)

  Returns the message's offset when it is stored here, or -1 when it is not (it is fenced now).
]]
--@include dedup
local known = redis.call('HGET', KEYS[1], ARGV[1])
if known then return tonumber(known) end
local ttl = tonumber(ARGV[2])
if ttl == nil or ttl < 1 or ARGV[1] == '' then return redis.error_reply('ERR malformed fence: ' .. tostring(ARGV[2])) end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local keys = {KEYS[2], KEYS[3]}
local wrong = dedup_problem(keys)
if wrong then return redis.error_reply('ERR corrupt queue: ' .. wrong) end
dedup_prune(keys, now)
dedup_set(keys, '\31' .. ARGV[1], '1', now, ttl)
return -1
