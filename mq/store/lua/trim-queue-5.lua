--[[
  trim-queue: remove a queue's messages stored before a time (retention), with their index entries,
  and count, per consumer group, the removed messages the group had not consumed yet.

  Store times never decrease along a queue, so the oldest entries go first. Works in chunks; the
  caller repeats while it returns "more".

  A group has not consumed a removed message when its committed offset (the next offset it will
  consume) is at or below the message's offset. Counting here, in the call that removes the
  messages, counts each removed message once for each group however many callers trim at once (two
  broker services, or one restarted mid-way), and the count lives beside the offsets it is about.

  KEYS[1] queue log stream
  KEYS[2] queue msg id index hash
  KEYS[3] queue key index zset
  KEYS[4] queue offsets hash (group -> committed offset)
  KEYS[5] queue expired hash (group -> messages removed before the group consumed them)

  ARGV[1] cutoff, epoch ms: messages stored before it are removed
  ARGV[2] most entries to remove in this call
  ARGV[3] "1": count the groups' unconsumed messages (retention); "": remove only (an admin's purge,
          the tier uploader)
  ARGV[4] optional: never remove an offset at or past this one ("" or absent: no bound). With a tier
          on, the uploader passes the manifest's end: a message leaves Redis only once it is tiered.

  Returns {removed, more, group1, expired1, group2, expired2, ...}: more is 1 when the chunk was full
  and older entries may remain; each group that lost messages in this call, with how many.
]]
--@include expired
local limit = tonumber(ARGV[2])
local cutoff = tonumber(ARGV[1])
local bound = tonumber(ARGV[4] or '')
local entries = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', limit)
local removed = 0
local ids, members, offsets = {}, {}, {}
for _, e in ipairs(entries) do
  local fields, st, msg_id, keys = e[2], nil, nil, nil
  for j = 1, #fields, 2 do
    local f = fields[j]
    if f == 'st' then st = tonumber(fields[j + 1]) elseif f == 'i' then msg_id = fields[j + 1]
    elseif f == 'k' then keys = fields[j + 1] end
  end
  if st == nil or st >= cutoff then break end
  local offset = tonumber(string.match(e[1], '-(%d+)$')) - 1
  if bound and offset >= bound then break end
  if msg_id then ids[#ids + 1] = msg_id end
  if keys then
    local padded = string.format('%020d', offset)
    for key in string.gmatch(keys, '[^\31]+') do members[#members + 1] = key .. '\31' .. padded end
  end
  removed = removed + 1
  offsets[removed] = offset
end
if removed == 0 then return {0, 0} end
local last_offset = offsets[removed]
-- what each group never consumed, worked out (and its counter read) before anything is written, so
-- that a malformed counter fails the call with the queue untouched
local lost_groups, lost_counts = {}, {}
local committed = (ARGV[3] == '1') and redis.call('HGETALL', KEYS[4]) or {}
for j = 1, #committed, 2 do
  local at = tonumber(committed[j + 1])
  if at ~= nil and at <= last_offset then
    -- offsets ascend: find the first removed offset >= at; it and those after it were never consumed
    local lo, hi = 1, removed
    while lo < hi do
      local mid = math.floor((lo + hi) / 2)
      if offsets[mid] >= at then hi = mid else lo = mid + 1 end
    end
    lost_groups[#lost_groups + 1] = committed[j]
    lost_counts[#lost_counts + 1] = removed - lo + 1
  end
end
local totals, bad = expired_totals(KEYS[5], lost_groups, lost_counts)
if totals == nil then return bad end
for i = 1, #ids, 500 do redis.call('HDEL', KEYS[2], unpack(ids, i, math.min(i + 499, #ids))) end
for i = 1, #members, 500 do redis.call('ZREM', KEYS[3], unpack(members, i, math.min(i + 499, #members))) end
redis.call('XTRIM', KEYS[1], 'MINID', '0-' .. (last_offset + 2))
if #totals > 0 then redis.call('HSET', KEYS[5], unpack(totals)) end
local result = {removed, (removed == limit) and 1 or 0}
for i, g in ipairs(lost_groups) do
  result[#result + 1] = g
  result[#result + 1] = lost_counts[i]
end
return result
