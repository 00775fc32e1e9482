--[[
  queue-stats: the offsets and last store time of one queue.

  KEYS[1] queue meta hash
  KEYS[2] queue log stream

  Returns {min_offset, max_offset, last_store_timestamp_ms, writable, readable}:
    min_offset   offset of the oldest stored message (= max_offset when the queue is empty)
    max_offset   the next offset to be written
    last_store_timestamp_ms  store time of the newest message, 0 when empty (or the entry has none)
    writable/readable  1 or 0 from the meta flags; -1 for both when the queue does not exist
  Errors (nothing is written: the script only reads) when a value it reads is not a number — the
  queue's seq, or the newest entry's store time (an entry some other client wrote): a nil in the reply
  would cut it short.
]]
local meta = redis.call('HMGET', KEYS[1], 'seq', 'w', 'r')
if not meta[2] then return {0, 0, 0, -1, -1} end
local max_offset = tonumber(meta[1] or '0')
if not max_offset then
  return redis.error_reply('queue-stats: ' .. KEYS[1] .. ' seq ' .. string.format('%q', meta[1]) .. ' is not a number')
end
local first = redis.call('XRANGE', KEYS[2], '-', '+', 'COUNT', 1)
local min_offset = max_offset
if #first > 0 then
  min_offset = tonumber(string.match(first[1][1], '-(%d+)$')) - 1
end
local last_ts = 0
local last = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)
if #last > 0 then
  local fields = last[1][2]
  for j = 1, #fields, 2 do
    if fields[j] == 'st' then
      last_ts = tonumber(fields[j + 1])
      if not last_ts then
        return redis.error_reply('queue-stats: the newest entry of ' .. KEYS[2] .. ' (' .. last[1][1] ..
          ') has store time ' .. string.format("'%s'", string.sub(fields[j + 1], 1, 40)) .. ', not a number')
      end
    end
  end
end
return {min_offset, max_offset, last_ts, meta[2] == '1' and 1 or 0, meta[3] == '1' and 1 or 0}
