--[[
  put-half: store a transaction's half message, invisible to consumers, in the queue it will be
  committed to, and schedule its first check-back.

  KEYS[1] queue meta hash (the queue must exist and be writable)
  KEYS[2] queue half stream (half messages, auto ids: the id's time part is the store time)
  KEYS[3] queue half index zset (half id -> earliest next check-back, ms)

  ARGV[1] earliest check-back, epoch ms (store time + transaction timeout or the message's immunity)
  ARGV[2..] field/value pairs of the message (as put-messages takes them, without the count)

  Returns the half id, or -1 (queue missing) / -2 (queue not writable).
]]
local writable = redis.call('HGET', KEYS[1], 'w')
if not writable then return -1 end
if writable ~= '1' then return -2 end
local id = redis.call('XADD', KEYS[2], '*', unpack(ARGV, 2))
redis.call('ZADD', KEYS[3], ARGV[1], id)
return id
