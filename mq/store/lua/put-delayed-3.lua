--[[
  put-delayed: keep a message out of sight until it is due, in the queue it will be delivered to.

  The message waits in the queue's `delayed` stream, its entry id scored by due time in the
  queue's `timer` zset; deliver-due moves it into the log when due. The caller then lowers the
  queue's score in the namespace's `timers` index (another slot: not atomic with this script, and
  repaired by the broker service's periodic sweep if that second write is lost).

  KEYS[1] queue meta hash (the queue must exist and be writable)
  KEYS[2] queue timer zset (delayed entry id -> due ms)
  KEYS[3] queue delayed stream

  ARGV[1] due time, epoch ms
  ARGV[2..] field/value pairs of the message (as put-messages takes them, without the count)

  Returns the delayed entry id, or -1 (queue missing) / -2 (queue not writable).
]]
local writable = redis.call('HGET', KEYS[1], 'w')
if not writable then return -1 end
if writable ~= '1' then return -2 end
local id = redis.call('XADD', KEYS[3], '*', unpack(ARGV, 2))
redis.call('ZADD', KEYS[2], ARGV[1], id)
return id
