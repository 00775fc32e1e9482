--[[
  end-transaction: commit (make visible with a fresh offset) or roll back (discard) one half message,
  atomically and idempotently: whichever of the producer, a check-back answer or a second broker
  comes first decides; later calls find the half gone and change nothing. So a message is never
  both visible and rolled back, and never visible twice.

  KEYS[1] queue meta hash
  KEYS[2] queue log stream
  KEYS[3] queue msg id index hash
  KEYS[4] queue key index zset
  KEYS[5] queue half stream
  KEYS[6] queue half index zset
  KEYS[7] queue half check-count hash

  ARGV[1] "commit" or "rollback"
  ARGV[2] half id

  Returns {1, offset} when committed (offset -1 for a rollback), {0, -1} when already resolved.
]]
--@include append
if not redis.call('ZSCORE', KEYS[6], ARGV[2]) then return {0, -1} end
local offset = -1
if ARGV[1] == 'commit' then
  local e = redis.call('XRANGE', KEYS[5], ARGV[2], ARGV[2])
  if #e > 0 then
    local first, now = append_reserve(1)
    append_entry(first, now, e[1][2], 1, #e[1][2])
    append_flush(true)
    offset = first
  end
end
redis.call('ZREM', KEYS[6], ARGV[2])
redis.call('HDEL', KEYS[7], ARGV[2])
redis.call('XDEL', KEYS[5], ARGV[2])
return {1, offset}
