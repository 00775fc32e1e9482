--[[
  unlock-queue: an orderly consumer gives a queue up, committing its offset in the same step, but
  only if it still holds the lock (compare-and-delete: Redis 7.0 has no SET ... IFEQ / DELEX).

  KEYS[1] the queue's lock for the group
  KEYS[2] the queue's offsets hash (group -> committed offset)

  ARGV[1] client id of the caller
  ARGV[2] group
  ARGV[3] offset to commit, or "" to commit nothing

  Returns 1 when unlocked (and committed), 0 when the caller did not hold the lock.

  Flags: allow-oom (a consumer's bookkeeping goes on when the store is full: see scripts.py)
]]
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[3] ~= '' then redis.call('HSET', KEYS[2], ARGV[2], ARGV[3]) end
redis.call('DEL', KEYS[1])
return 1
