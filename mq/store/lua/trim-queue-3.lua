--[[
  trim-queue: remove a queue's messages stored before a time (retention), with their index entries.

  Store times never decrease along a queue, so the oldest entries go first. Works in chunks; the
  caller repeats while it returns "more".

  KEYS[1] queue log stream
  KEYS[2] queue msg id index hash
  KEYS[3] queue key index zset

  ARGV[1] cutoff, epoch ms: messages stored before it are removed
  ARGV[2] most entries to remove in this call
  ARGV[3] optional: never remove an offset at or past this one ("" or absent: no bound). With a tier
          on, the caller passes the manifest's end: a message leaves Redis only once it is tiered.

  Returns {removed, more}: more is 1 when the chunk was full and older entries may remain.
]]
local limit = tonumber(ARGV[2])
local cutoff = tonumber(ARGV[1])
local bound = tonumber(ARGV[3] or '')
local entries = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', limit)
local removed, last_id = 0, nil
local ids, members = {}, {}
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
  removed, last_id = removed + 1, e[1]
end
if removed == 0 then return {0, 0} end
for i = 1, #ids, 500 do redis.call('HDEL', KEYS[2], unpack(ids, i, math.min(i + 499, #ids))) end
for i = 1, #members, 500 do redis.call('ZREM', KEYS[3], unpack(members, i, math.min(i + 499, #members))) end
local last_offset = tonumber(string.match(last_id, '-(%d+)$')) - 1
redis.call('XTRIM', KEYS[1], 'MINID', '0-' .. (last_offset + 2))
return {removed, (removed == limit) and 1 or 0}
