--[[
  release-queue: commit a consumer's offset of a queue and give the queue up, atomically, if the
  caller still owns it (compare-and-delete: a queue taken over from a presumed-dead owner is not
  released, nor its offset overwritten, by that owner). The offset is not written when it is beyond
  the queue's end or the caller's position is on another history (a lossy failover, D70): the next
  owner starts from the offset the store holds.

  KEYS[1] queue owners hash  (group -> client id)
  KEYS[2] queue offsets hash (group -> committed offset)
  KEYS[3] queue meta hash (field seq = next offset to be written)
  KEYS[4] queue log stream

  ARGV[1] group
  ARGV[2] client id of the caller
  ARGV[3] offset to commit, or "" to commit nothing
  ARGV[4] the caller's position, ARGV[5] the fingerprint of the entry before it (see
          commit-offset-4.lua; "" for none)

  Returns 1 when released (and committed, unless refused as above), 0 when the caller did not own
  the queue.

  Flags: allow-oom (a consumer's bookkeeping goes on when the store is full: see scripts.py)
]]
--@include position
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
if ARGV[3] ~= '' and not commit_refused(KEYS[3], KEYS[4], ARGV[3], ARGV[4], ARGV[5]) then
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
end
redis.call('HDEL', KEYS[1], ARGV[1])
return 1
