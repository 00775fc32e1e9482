--[[
  claim-tiered: hand out messages a simple-consumer group read from the tier (receive-simple told the
  caller its cursor is below what Redis holds): each becomes invisible like a message handed out by
  receive-simple, and the cursor moves past what the caller read, only if the cursor is still where
  the caller read from (another receiver of the group may have handed them out meanwhile: then
  nothing changes and the caller hands out nothing this round).

  KEYS[1] queue offsets hash (group -> cursor: the next offset never handed out)
  KEYS[2] group's invisible zset for this queue (offset -> visible again at, ms)
  KEYS[3] group's attempts hash for this queue (offset -> deliveries so far)

  ARGV[1] group
  ARGV[2] the cursor the caller read the tier from
  ARGV[3] the new cursor (one past the last offset the caller read, matching or not)
  ARGV[4] visible again at, epoch ms
  ARGV[5..] the offsets handed out

  Returns 1 when handed out, 0 when the cursor had moved (nothing changed).

  Flags: allow-oom (a consumer's bookkeeping goes on when the store is full: see scripts.py)
]]
if tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '-1') ~= tonumber(ARGV[2]) then return 0 end
for i = 5, #ARGV do
  redis.call('ZADD', KEYS[2], ARGV[4], ARGV[i])
  redis.call('HSET', KEYS[3], ARGV[i], 1)
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
return 1
