--[[
  check-halves: the broker service takes the half messages of a queue that are due for a check-back,
  counts the check and schedules the next one an interval later, all in one step — so several
  broker services never check one half message twice in an interval. A half message checked
  `check_max` times without an answer, or older than the reserve time, is rolled back and kept in
  the queue's discarded-transactions stream for an admin, never silently dropped.

  KEYS[1] queue half stream
  KEYS[2] queue half index zset (half id -> next check-back, ms)
  KEYS[3] queue half check-count hash
  KEYS[4] queue discarded-transactions stream
  KEYS[5] queue meta hash (only checked: a deleted topic's halves are dropped)

  ARGV[1] now, epoch ms
  ARGV[2] check interval, ms
  ARGV[3] most checks per half message (transaction_check_max)
  ARGV[4] reserve, ms: older half messages are rolled back
  ARGV[5] most half messages to take

  Returns {next_due_ms or -1, {kind, half id, checks}...}: kind "c" (ask a producer, this is check
  number `checks`) or "x" (rolled back and recorded after `checks` checks).
]]
if redis.call('EXISTS', KEYS[5]) == 0 then
  redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
  return {-1}
end
local now = tonumber(ARGV[1])
local out = {0}
local due = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, tonumber(ARGV[5]))
for _, id in ipairs(due) do
  local born = tonumber(string.match(id, '^(%d+)-'))
  local checks = redis.call('HINCRBY', KEYS[3], id, 1)
  local e = redis.call('XRANGE', KEYS[1], id, id)
  if #e == 0 or checks > tonumber(ARGV[3]) or now - born > tonumber(ARGV[4]) then
    if #e > 0 then
      local reason = (checks > tonumber(ARGV[3])) and 'check_max' or 'reserve_time'
      redis.call('XADD', KEYS[4], '*', 'half_id', id, 'checks', checks - 1, 'reason', reason, unpack(e[1][2]))
    end
    redis.call('ZREM', KEYS[2], id)
    redis.call('HDEL', KEYS[3], id)
    redis.call('XDEL', KEYS[1], id)
    out[#out + 1] = {'x', id, checks - 1}
  else
    redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), id)
    out[#out + 1] = {'c', id, checks}
  end
end
local rest = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
out[1] = (#rest == 0) and -1 or tonumber(rest[2])
return out
