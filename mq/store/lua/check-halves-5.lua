--[[
  check-halves: the broker service takes the half messages of a queue that are due for a check-back,
  counts the check and schedules the next one an interval later, all in one step — so several
  broker services never check one half message twice in an interval. A half message checked
  `check_max` times without an answer, or older than the reserve time, is rolled back and kept in
  the queue's discarded-transactions stream for an admin, never silently dropped. Everything is
  read and computed before the first write, so an error leaves the queue as it was.

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
--@include message
if redis.call('EXISTS', KEYS[5]) == 0 then
  redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
  return {-1}
end
local now, interval = tonumber(ARGV[1]), tonumber(ARGV[2])
local check_max, reserve = tonumber(ARGV[3]), tonumber(ARGV[4])
if not (now and interval and check_max and reserve and tonumber(ARGV[5])) then
  return redis.error_reply('ERR check-halves: every argument must be a number')
end
local due = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, tonumber(ARGV[5]))
local plan, out = {}, {0}
for _, id in ipairs(due) do
  local born = tonumber(string.match(id, '^(%d+)-') or '0')
  local checks = tonumber(redis.call('HGET', KEYS[3], id) or '0') + 1
  local e = redis.call('XRANGE', KEYS[1], id, id)
  if #e == 0 or checks > check_max or now - born > reserve then
    local reason = (checks > check_max) and 'check_max' or 'reserve_time'
    plan[#plan + 1] = {id, checks, (#e > 0) and e[1][2] or nil, reason}
    out[#out + 1] = {'x', id, checks - 1}
  else
    plan[#plan + 1] = {id, checks}
    out[#out + 1] = {'c', id, checks}
  end
end
-- the earliest check-back once this call is done: the first not-due entry, or a rescheduled one
local rescheduled = false
for _, p in ipairs(plan) do if p[4] == nil then rescheduled = true end end
local rest = redis.call('ZRANGE', KEYS[2], #due, #due, 'WITHSCORES')
local next_ms = (#rest > 0) and tonumber(rest[2]) or -1
if rescheduled and (next_ms < 0 or now + interval < next_ms) then next_ms = now + interval end
out[1] = next_ms
-- writes only from here
for _, p in ipairs(plan) do
  local id = p[1]
  if p[4] == nil then
    redis.call('HSET', KEYS[3], id, p[2])
    redis.call('ZADD', KEYS[2], now + interval, id)
  else
    if p[3] then
      redis.call('XADD', KEYS[4], '*', 'half_id', id, 'checks', p[2] - 1, 'reason', p[4], append_kept_fields(p[3]))
    end
    redis.call('ZREM', KEYS[2], id)
    redis.call('HDEL', KEYS[3], id)
    redis.call('XDEL', KEYS[1], id)
  end
end
return out
