--[[
  record-segment: add an uploaded tier segment to its queue's manifest, the commit point of an upload
  (the file is already in the tier under its final name; until this call it is an orphan nobody reads).

  Refuses, changing nothing, a segment that would break the manifest's invariants: the segments of a
  queue are contiguous (each starts where the last ended: no gap, no overlap), and the last one ends
  where Redis still holds the rest (no gap between the tier and the log). Only the holder of the
  queue's upload lease may record (a stale uploader whose lease expired is fenced out).

  KEYS[1] the queue's manifest zset (segment JSON -> start offset)
  KEYS[2] the queue's log stream (entry id 0-(offset+1))
  KEYS[3] the queue's meta hash (field seq = next offset to be written)
  KEYS[4] the queue's upload lease (string: owner token)

  ARGV[1] start offset of the segment
  ARGV[2] end offset (one past its last message)
  ARGV[3] the manifest member (segment JSON, see mq/tier/segment.py)
  ARGV[4] the caller's lease token

  Flags: allow-oom (recording is what lets the uploader trim a full store: refusing it at maxmemory
  would keep the store full for good)

  Returns the manifest's new end offset, or an error code:
    -1 the caller does not hold the lease
    -2 not contiguous: the start is not the manifest's end (or, for the first segment, the range
       does not reach the log's first offset)
    -3 the range is empty or reaches past the queue's next offset
]]
local start, finish = tonumber(ARGV[1]), tonumber(ARGV[2])
if redis.call('GET', KEYS[4]) ~= ARGV[4] then return -1 end
local seq = tonumber(redis.call('HGET', KEYS[3], 'seq') or '0')
if finish <= start or finish > seq then return -3 end
local last = redis.call('ZRANGE', KEYS[1], -1, -1)
if #last > 0 then
  if cjson.decode(last[1])['e'] ~= start then return -2 end
end
local first = redis.call('XRANGE', KEYS[2], '-', '+', 'COUNT', 1)
local log_first = seq
if #first > 0 then log_first = tonumber(string.match(first[1][1], '-(%d+)$')) - 1 end
if #last == 0 and start > log_first then return -2 end
if log_first > finish then return -2 end
redis.call('ZADD', KEYS[1], start, ARGV[3])
return finish
