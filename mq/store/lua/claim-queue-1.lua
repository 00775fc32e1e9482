--[[
  claim-queue: take a queue for a clustering consumer of a group, unless a live member still holds it.

  Rebalance hands a queue over cleanly: the old owner stops pulling, lets its cached messages be
  consumed, commits and releases (release-queue); only then may the new owner start, so a queue is
  never consumed by two members at once and nothing is consumed twice without a failure. An owner
  that is no longer a live member (it crashed) is taken over at once.

  KEYS[1] queue owners hash (group -> client id)

  ARGV[1] group
  ARGV[2] client id of the caller
  ARGV[3] live client ids of the group, joined by \x1f

  Returns 1 when the caller owns the queue now (taken, or already its own), else 0.

  Flags: allow-oom (a consumer's bookkeeping goes on when the store is full: see scripts.py)
]]
local owner = redis.call('HGET', KEYS[1], ARGV[1])
if owner == ARGV[2] then return 1 end
if owner then
  for cid in string.gmatch(ARGV[3], '[^\31]+') do
    if cid == owner then return 0 end
  end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1
