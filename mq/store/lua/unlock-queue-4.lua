--[[
  unlock-queue: an orderly consumer gives a queue up, committing its offset in the same step, but
  only if it still holds the lock (compare-and-delete: Redis 7.0 has no SET ... IFEQ / DELEX). The
  offset is not written when it is beyond the queue's end or the caller's position is on another
  history (a lossy failover, D70).

  KEYS[1] the queue's lock for the group
  KEYS[2] the queue's offsets hash (group -> committed offset)
  KEYS[3] queue meta hash (field seq = next offset to be written)
  KEYS[4] queue log stream

  ARGV[1] client id of the caller
  ARGV[2] group
  ARGV[3] offset to commit, or "" to commit nothing
  ARGV[4] the caller's position, ARGV[5] the fingerprint of the entry before it (see
          commit-offset-4.lua; "" for none)

  Returns 1 when unlocked (and committed, unless refused as above), 0 when the caller did not hold
  the lock.

  Flags: allow-oom (a consumer's bookkeeping goes on when the store is full: see scripts.py)
]]
--@include position
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[3] ~= '' and not commit_refused(KEYS[3], KEYS[4], ARGV[3], ARGV[4], ARGV[5]) then
  redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
end
redis.call('DEL', KEYS[1])
return 1
