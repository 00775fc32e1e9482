--[[
  put-pending: keep a message out of consumers' sight in the queue it belongs to, until a time:
  a delayed message until it is due (then deliver-due moves it into the log), or a transaction's
  half message until its first check-back (end-transaction commits or rolls it back).

  The message is checked as put-messages checks it (append_problem), so what is accepted here can
  always be moved into the log later; nothing is written when it is refused.
  The caller then lowers the queue's score in the namespace index for that kind of work (another
  slot: not atomic with this script; the broker's periodic sweep repairs a lost index write).

  KEYS[1] queue meta hash (the queue must exist and be writable)
  KEYS[2] the side stream (the queue's `delayed` or `half` stream; auto ids, so the id's time part
          is the store time)
  KEYS[3] its schedule zset (entry id -> due or next check-back, epoch ms)

  ARGV[1] the time, epoch ms
  ARGV[2..] field/value pairs of the message (as put-messages takes them, without the count)

  Returns the entry id, or -1 (queue missing) / -2 (queue not writable).
  Raises "ERR malformed …" for a message put-messages would refuse, or a time that is not a number.
]]
--@include message
local writable = redis.call('HGET', KEYS[1], 'w')
if not writable then return -1 end
if writable ~= '1' then return -2 end
if tonumber(ARGV[1]) == nil then return redis.error_reply('ERR malformed pending message: time ' .. ARGV[1]) end
local problem = append_problem(ARGV, 2, #ARGV)
if problem then return redis.error_reply('ERR malformed pending message: ' .. problem) end
local id = redis.call('XADD', KEYS[2], '*', unpack(ARGV, 2))
redis.call('ZADD', KEYS[3], ARGV[1], id)
return id
