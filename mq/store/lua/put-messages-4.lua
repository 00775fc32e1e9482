--[[
  put-messages: append one message or a batch to a queue, in one atomic step.

  Assigns consecutive dense offsets from the queue's `seq`, stores each message as a stream entry
  with id 0-(offset+1), records the store time (server clock, ms), indexes the msg id and every
  message key for queries. Checks every message and computes every write before the first one, so
  a refusal or an error leaves the queue exactly as it was.

  KEYS[1] queue meta hash   (fields: seq = next offset, w = "1" when writable)
  KEYS[2] queue log stream
  KEYS[3] msg id index hash (msg id -> offset)
  KEYS[4] key index zset    (members "key\x1f" .. offset as 20 digits, score 0: lex order = offset order)

  ARGV[1] number of messages N
  then, per message: ARGV[p] = 2F (number of field/value items), followed by F field/value pairs.
  Field "i" is the msg id, field "k" the message keys joined by \x1f; "st" is added here.

  Returns {first_offset, store_timestamp_ms} on success, or a negative code:
    -1 the queue does not exist (unknown topic or queue id)
    -2 the queue exists but is not writable (write_queues shrank, or perm lacks "w")
    -3 the queue's meta is gone but its log is there: Redis evicted it (maxmemory-policy is not
       noeviction); looked at only on this refusal path (one EXISTS), never on a send that succeeds
  Raises "ERR malformed …" when ARGV does not hold N well-formed messages, or when several messages
  exceed the bounds of one call (CALL_MAX_* in includes/message.lua: bounded work); nothing is written.
]]
--@include append
local meta = redis.call('HMGET', KEYS[1], 'w', 'seq')
local writable = meta[1]
if not writable then
  if redis.call('EXISTS', KEYS[2]) == 1 then return -3 end
  return -1
end
if writable ~= '1' then return -2 end

local n = tonumber(ARGV[1])
if n == nil or n < 1 then return redis.error_reply('ERR malformed put: message count ' .. tostring(ARGV[1])) end
local entries = {}
local p = 2
local total_bytes, total_keys = 0, 0
for m = 1, n do
  local count = tonumber(ARGV[p])
  if count == nil or p + count > #ARGV then
    return redis.error_reply('ERR malformed put: message ' .. m .. ' of ' .. n .. ' is truncated')
  end
  local problem = append_problem(ARGV, p + 1, p + count)
  if problem then return redis.error_reply('ERR malformed put: message ' .. m .. ': ' .. problem) end
  entries[m] = {ARGV, p + 1, p + count}
  local bytes, keys = message_cost(ARGV, p + 1, p + count)
  total_bytes, total_keys = total_bytes + bytes, total_keys + keys
  p = p + count + 1
end
if p ~= #ARGV + 1 then return redis.error_reply('ERR malformed put: items after message ' .. n) end
if n > 1 and (n > CALL_MAX_MESSAGES or total_bytes > CALL_MAX_BYTES or total_keys > CALL_MAX_KEYS) then
  return redis.error_reply('ERR malformed put: ' .. n .. ' messages, ' .. total_bytes .. ' bytes, ' .. total_keys ..
    ' keys in one call; the bounds are ' .. CALL_MAX_MESSAGES .. ', ' .. CALL_MAX_BYTES .. ' and ' .. CALL_MAX_KEYS ..
    ': split the batch (the producer does)')
end
local plan, problem = append_plan(entries, meta[2])
if not plan then return redis.error_reply('ERR corrupt queue: ' .. problem) end
local refused = append_write(plan)
if refused then return redis.error_reply(refused) end
return {plan.first, tonumber(plan.now)}
