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
  KEYS[5] dedup hash        (dedup id -> "offset\x1fmsg id\x1fstore ms" of its first send; "\x1f" .. msg id
                             -> "1": a producer retry fenced that id here, see fence-message-3.lua)
  KEYS[6] dedup expiry zset (member of KEYS[5] -> when it expires, ms)

  Never stores a message twice (D140): when the call's first msg id is already in the id index (a
  re-send of the same call: redis-py's own reconnect, an endpoint client's retry) it stores nothing and
  returns where that call stored it; a fenced first id is refused (-4). A single message with a
  dedup id (field "d") seen within the queue's window (meta field "dw", ms; 120 000 when absent)
  stores nothing and returns the first send's {offset, store ms, "duplicate", msg id}; else it is
  stored and its id remembered for the window. Only a call of one message may carry a dedup id.

  ARGV[1] number of messages N; -N for copies of stored messages under their own msg ids (a retry,
          dead letter or resend: their id may be in this queue's index already), which skip the
          msg-id lookup and the fence
  then, per message: ARGV[p] = 2F (number of field/value items), followed by F field/value pairs.
  Field "i" is the msg id, field "k" the message keys joined by \x1f; "st" is added here.

  Returns {first_offset, store_timestamp_ms} on success (also for a re-send of a stored call), the
  first send's {offset, store ms, "duplicate", msg id} for a duplicate, or a negative code:
    -1 the queue does not exist (unknown topic or queue id)
    -2 the queue exists but is not writable (write_queues shrank, or perm lacks "w")
    -3 the queue's meta is gone but its log is there: Redis evicted it (maxmemory-policy is not
       noeviction); looked at only on this refusal path (one EXISTS), never on a send that succeeds
    -4 the call's first msg id is fenced here: a producer retry gave this attempt up (D140)
  Raises "ERR malformed …" when ARGV does not hold N well-formed messages, or when several messages
  exceed the bounds of one call (CALL_MAX_* in includes/message.lua: bounded work); nothing is written.
]]
--@include append
--@include dedup
local meta = redis.call('HMGET', KEYS[1], 'w', 'seq', 'dw')
local writable = meta[1]
if not writable then
  if redis.call('EXISTS', KEYS[2]) == 1 then return -3 end
  return -1
end
if writable ~= '1' then return -2 end

local n = tonumber(ARGV[1])
local copies = n ~= nil and n < 0
if copies then n = -n end
if n == nil or n < 1 then return redis.error_reply('ERR malformed put: message count ' .. tostring(ARGV[1])) end
local entries = {}
local p = 2
local total_bytes, total_keys, dedup = 0, 0, nil
for m = 1, n do
  local count = tonumber(ARGV[p])
  if count == nil or p + count > #ARGV then
    return redis.error_reply('ERR malformed put: message ' .. m .. ' of ' .. n .. ' is truncated')
  end
  local problem = append_problem(ARGV, p + 1, p + count)
  if problem then return redis.error_reply('ERR malformed put: message ' .. m .. ': ' .. problem) end
  entries[m] = {ARGV, p + 1, p + count}
  local bytes, keys, dd = message_cost(ARGV, p + 1, p + count)
  total_bytes, total_keys = total_bytes + bytes, total_keys + keys
  if dd then
    if n > 1 then return redis.error_reply('ERR malformed put: a dedup id (field d) in a call of ' .. n .. ' messages') end
    if dd == '' then return redis.error_reply('ERR malformed put: an empty dedup id (field d)') end
    dedup = dd
  end
  p = p + count + 1
end
if p ~= #ARGV + 1 then return redis.error_reply('ERR malformed put: items after message ' .. n) end
if n > 1 and (n > CALL_MAX_MESSAGES or total_bytes > CALL_MAX_BYTES or total_keys > CALL_MAX_KEYS) then
  return redis.error_reply('ERR malformed put: ' .. n .. ' messages, ' .. total_bytes .. ' bytes, ' .. total_keys ..
    ' keys in one call; the bounds are ' .. CALL_MAX_MESSAGES .. ', ' .. CALL_MAX_BYTES .. ' and ' .. CALL_MAX_KEYS ..
    ': split the batch (the producer does)')
end
-- the call's first msg id: stored already (a re-send), or fenced by a producer retry? (D140)
local first_id
for j = 3, 2 + tonumber(ARGV[2]), 2 do
  if ARGV[j] == 'i' then first_id = ARGV[j + 1] break end
end
if not copies then
  local known = redis.call('HGET', KEYS[3], first_id)
  if known then return {tonumber(known), dedup_store_ms(KEYS[2], tonumber(known))} end
  if redis.call('HEXISTS', KEYS[5], '\31' .. first_id) == 1 then return -4 end
end
local window, now_ms = {KEYS[5], KEYS[6]}, 0
if dedup then
  local wrong = dedup_problem(window)
  if wrong then return redis.error_reply('ERR corrupt queue: ' .. wrong) end
  local t = redis.call('TIME')
  now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local seen = dedup_get(window, dedup, now_ms)
  if seen then
    local offset, msg_id, st = string.match(seen, '^(%d+)\31([^\31]*)\31(%d+)$')
    if offset then return {tonumber(offset), tonumber(st), 'duplicate', msg_id} end
  end
end
local plan, problem = append_plan(entries, meta[2])
if not plan then return redis.error_reply('ERR corrupt queue: ' .. problem) end
local refused = append_write(plan)
if refused then return redis.error_reply(refused) end
if dedup then
  dedup_prune(window, now_ms)
  local ttl = tonumber(meta[3]) or DEDUP_DEFAULT_WINDOW_MS
  dedup_set(window, dedup, plan.first .. '\31' .. first_id .. '\31' .. plan.now, now_ms, ttl)
end
return {plan.first, tonumber(plan.now)}
