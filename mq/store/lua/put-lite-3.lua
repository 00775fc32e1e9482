--[[
  put-lite: append one message to a lite topic of a lite parent, creating the lite topic when it does
  not exist, refreshing its expiry, and waking the member of each group that owns it [RIP-83].

  A lite topic is one stream (entry id 0-(offset+1), one queue, ordered) and one state hash; both
  (and each group's in-flight zset of it) expire ARGV[3] ms after the last write, so Redis removes an
  idle lite topic's messages and offsets by itself: nothing sweeps. A lite topic that expired is
  created afresh (offsets from 0) by the next send.

  KEYS[1] the lite topic's stream                 ({ns:P:lite}:m:L)
  KEYS[2] the lite topic's state hash             ({ns:P:lite}:s:L; seq = next offset)
  KEYS[3] the parent's set of subscribing groups  ({ns:P:lite}:groups)

  ARGV[1] the parent's key prefix ({ns:P:lite}:); the keys of each group's owner hash, owning member's
          ready zset and wake stream, and the group's in-flight zset of this lite topic are built
          from it in the shapes mq/keys.py documents (LiteKeys), all in the same slot
  ARGV[2] the lite topic's name
  ARGV[3] expiration, ms (> 0)
  ARGV[4..] the message's field/value pairs (mq.store.codec.encode: "i" msg id and "b" body needed;
          "st" is added here)

  Returns {offset, store_timestamp_ms, created (1 when this send created the lite topic)}.
  Raises "ERR malformed put-lite …" for bad arguments; nothing is written then.
]]
local prefix, lite, ttl = ARGV[1], ARGV[2], tonumber(ARGV[3])
if ttl == nil or ttl < 1 then return redis.error_reply('ERR malformed put-lite: expiration ' .. tostring(ARGV[3])) end
if (#ARGV - 3) % 2 ~= 0 or #ARGV < 7 then return redis.error_reply('ERR malformed put-lite: field/value pairs expected') end
local has_id, has_body = false, false
for p = 4, #ARGV, 2 do
  local name = ARGV[p]
  if name == 'i' then has_id = true elseif name == 'b' then has_body = true
  elseif name == 'st' then return redis.error_reply('ERR malformed put-lite: field st is the store\'s') end
end
if not (has_id and has_body) then return redis.error_reply('ERR malformed put-lite: a message needs fields i and b') end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local seq = redis.call('HGET', KEYS[2], 'seq')
local created = 0
if not seq then
  -- new (or expired) lite topic: a stream left without its state cannot be, but would refuse 0-1
  redis.call('DEL', KEYS[1])
  seq, created = 0, 1
else
  seq = tonumber(seq)
end
local fields = {}
for p = 4, #ARGV do fields[#fields + 1] = ARGV[p] end
fields[#fields + 1] = 'st'
fields[#fields + 1] = tostring(now)
redis.call('XADD', KEYS[1], '0-' .. (seq + 1), unpack(fields))
redis.call('HSET', KEYS[2], 'seq', seq + 1)
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('PEXPIRE', KEYS[2], ttl)

for _, group in ipairs(redis.call('SMEMBERS', KEYS[3])) do
  redis.call('PEXPIRE', prefix .. 'i:' .. group .. ':' .. lite, ttl)
  local owner = redis.call('HGET', prefix .. 'owner:' .. group, lite)
  if owner then
    local ready = prefix .. 'ready:' .. group .. ':' .. owner
    local at = redis.call('ZSCORE', ready, lite)
    if not at or tonumber(at) > now then
      redis.call('ZADD', ready, now, lite)
      redis.call('XADD', prefix .. 'wake:' .. group .. ':' .. owner, 'MAXLEN', '1', '*', 'l', lite)
    end
  end
end
return {seq, now, created}
