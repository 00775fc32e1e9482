--[[
  commit-offset: commit a consumer group's offset of a queue, only while the caller still owns the
  queue (clustering: the owners hash; orderly: the group's lock), so a consumer that lost a queue
  (taken over after it was presumed dead) never moves the new owner's offset back.

  KEYS[1] queue offsets hash (group -> committed offset)
  KEYS[2] the guard: the queue's owners hash (guard "owner") or the group's lock of the queue
          (guard "lock"); any key of the queue when ARGV[3] is ""

  ARGV[1] group
  ARGV[2] offset to commit
  ARGV[3] guard: "" (no check), "owner" or "lock" (see pull-messages-4.lua)
  ARGV[4] client id of the caller

  Returns 1 when committed, 0 when the guard did not hold (nothing written).

  Flags: allow-oom (a consumer's bookkeeping goes on when the store is full: see scripts.py)
]]
local guard = ARGV[3]
if guard == 'owner' then
  if redis.call('HGET', KEYS[2], ARGV[1]) ~= ARGV[4] then return 0 end
elseif guard == 'lock' then
  if redis.call('GET', KEYS[2]) ~= ARGV[4] then return 0 end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1
