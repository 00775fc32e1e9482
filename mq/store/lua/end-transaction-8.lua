--[[
  end-transaction: commit (make visible with a fresh offset) or roll back (discard) one half message,
  atomically and idempotently: whichever of the producer, a check-back answer or a second broker
  comes first decides; later calls find the half gone and change nothing. So a message is never
  both visible and rolled back, and never visible twice. Everything is checked and computed before
  the first write; a half message the log cannot take (malformed, e.g. written around the library)
  is not committed but moved to the discarded-transactions stream with the reason, once.

  KEYS[1] queue meta hash
  KEYS[2] queue log stream
  KEYS[3] queue msg id index hash
  KEYS[4] queue key index zset
  KEYS[5] queue half stream
  KEYS[6] queue half index zset
  KEYS[7] queue half check-count hash
  KEYS[8] queue discarded-transactions stream

  ARGV[1] "commit" or "rollback"
  ARGV[2] half id

  Returns {1, offset} when committed (offset -1 for a rollback), {0, -1} when already resolved,
  {-3, -1} when the half message could not be committed and was discarded instead.
]]
--@include append
if not redis.call('ZSCORE', KEYS[6], ARGV[2]) then return {0, -1} end
local plan, problem, fields = nil, nil, nil
if ARGV[1] == 'commit' then
  local e = redis.call('XRANGE', KEYS[5], ARGV[2], ARGV[2])
  if #e > 0 then
    fields = e[1][2]
    problem = append_problem(fields, 1, #fields)
    if not problem then
      plan, problem = append_plan({{fields, 1, #fields}})
      if not plan then return redis.error_reply('ERR corrupt queue: ' .. problem) end
    end
  end
end
local checks = redis.call('HGET', KEYS[7], ARGV[2]) or '0'
-- writes only from here
local result = {1, -1}
if plan then
  local refused = append_write(plan)
  if refused then return redis.error_reply(refused) end
  result = {1, plan.first}
elseif problem then
  redis.call('XADD', KEYS[8], '*', 'half_id', ARGV[2], 'checks', checks, 'reason', 'malformed: ' .. problem,
    append_kept_fields(fields))
  result = {-3, -1}
end
redis.call('ZREM', KEYS[6], ARGV[2])
redis.call('HDEL', KEYS[7], ARGV[2])
redis.call('XDEL', KEYS[5], ARGV[2])
return result
