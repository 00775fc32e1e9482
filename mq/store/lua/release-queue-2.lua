--[[
  release-queue: commit a consumer's offset of a queue and give the queue up, atomically, if the
  caller still owns it (compare-and-delete: a queue taken over from a presumed-dead owner is not
  released, nor its offset overwritten, by that owner).

  KEYS[1] queue owners hash  (group -> client id)
  KEYS[2] queue offsets hash (group -> committed offset)

  ARGV[1] group
  ARGV[2] client id of the caller
  ARGV[3] offset to commit, or "" to commit nothing

  Returns 1 when committed and released, 0 when the caller did not own the queue.

  Flags: allow-oom (a consumer's bookkeeping goes on when the store is full: see scripts.py)
]]
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
if ARGV[3] ~= '' then redis.call('HSET', KEYS[2], ARGV[1], ARGV[3]) end
redis.call('HDEL', KEYS[1], ARGV[1])
return 1
