--[[
  commit-offset: commit a consumer group's offset of a queue, only while the caller still owns the
  queue (clustering: the owners hash; orderly: the group's lock), so a consumer that lost a queue
  (taken over after it was presumed dead) never moves the new owner's offset back; and only when the
  offset is within the queue and the caller's position is in this store's history (D70), so a
  consumer that read a tail a failover discarded never commits a position the new master's
  messages would be skipped by.

  KEYS[1] queue offsets hash (group -> committed offset)
  KEYS[2] the guard: the queue's owners hash (guard "owner") or the group's lock of the queue
          (guard "lock"); any key of the queue when ARGV[3] is ""
  KEYS[3] queue meta hash (field seq = next offset to be written)
  KEYS[4] queue log stream

  ARGV[1] group
  ARGV[2] offset to commit
  ARGV[3] guard: "" (no check), "owner" or "lock" (see pull-messages-5.lua)
  ARGV[4] client id of the caller
  ARGV[5] the caller's position (where its next pull starts; at least ARGV[2]), or "" for none
  ARGV[6] the fingerprint of the entry at ARGV[5] - 1 as the caller was handed it, or "" when not
          known (see includes/position.lua)

  Returns 1 when committed, 0 when the guard did not hold, -1 when the offset or the position is
  beyond the queue's end, the offset is beyond the position, or the entry before the position is
  another message than the caller was handed (its next pull rewinds: pull-messages-5.lua); nothing
  is written unless 1.

  Flags: allow-oom (a consumer's bookkeeping goes on when the store is full: see scripts.py)
]]
--@include position
local guard = ARGV[3]
if guard == 'owner' then
  if redis.call('HGET', KEYS[2], ARGV[1]) ~= ARGV[4] then return 0 end
elseif guard == 'lock' then
  if redis.call('GET', KEYS[2]) ~= ARGV[4] then return 0 end
end
if commit_refused(KEYS[3], KEYS[4], ARGV[2], ARGV[5], ARGV[6]) then return -1 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1
