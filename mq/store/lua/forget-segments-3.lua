--[[
  forget-segments: remove the oldest segments from a queue's tier manifest (the tier's retention,
  past file_reserved_time_h) and count, per consumer group, the removed messages the group had not
  consumed yet — the tier's half of trim-queue's count (D83), in the same call as the removal, so each
  lost message is counted once per group however many sweeps run.

  KEYS[1] the queue's manifest zset (segment JSON -> start offset)
  KEYS[2] queue offsets hash (group -> committed offset)
  KEYS[3] queue expired hash (group -> messages removed before the group consumed them)

  ARGV[1..] the members to remove: the manifest's first ones, in order

  A group has not consumed a removed message when its committed offset is at or below the message's
  offset; the removed segments are contiguous [start of the first, end of the last).

  Returns {removed segments, group1, lost1, group2, lost2, ...}, or {-1} when the members are not the
  manifest's first ones (another sweep removed them, or the manifest changed: nothing changed).

  Flags: allow-oom (it removes; its counter write is a few bytes, and refusing it at maxmemory would
  stop the tier's retention)
]]
--@include expired
local first = redis.call('ZRANGE', KEYS[1], 0, #ARGV - 1)
if #first ~= #ARGV or #ARGV == 0 then return {-1} end
for i, m in ipairs(first) do
  if m ~= ARGV[i] then return {-1} end
end
local start, finish = cjson.decode(ARGV[1])['s'], cjson.decode(ARGV[#ARGV])['e']
-- what each group never consumed, worked out (and its counter read) before anything is written
local lost_groups, lost_counts = {}, {}
local committed = redis.call('HGETALL', KEYS[2])
for j = 1, #committed, 2 do
  local at = tonumber(committed[j + 1])
  if at ~= nil and at < finish then
    lost_groups[#lost_groups + 1] = committed[j]
    lost_counts[#lost_counts + 1] = finish - math.max(at, start)
  end
end
local totals, bad = expired_totals(KEYS[3], lost_groups, lost_counts)
if totals == nil then return bad end
redis.call('ZREM', KEYS[1], unpack(ARGV))
if #totals > 0 then redis.call('HSET', KEYS[3], unpack(totals)) end
local result = {#ARGV}
for i, g in ipairs(lost_groups) do
  result[#result + 1] = g
  result[#result + 1] = lost_counts[i]
end
return result
