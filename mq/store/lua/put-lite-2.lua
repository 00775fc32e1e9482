--[[
  put-lite: append one message to a lite topic of a lite parent, creating the lite topic when it does
  not exist, refreshing its expiry, and waking the member of each group that owns it [RIP-83].

  A lite topic is one hash (D144): "seq" its next offset, "m:OFFSET" each message (its fields packed
  by the client, mq.store.lite.pack_fields, with "st" appended here), and the groups' cursors and
  delivery attempts; it (and each group's in-flight zset of it) expires ARGV[3] ms after the last
  write, so Redis removes an idle lite topic's messages and offsets by itself: nothing sweeps. A lite
  topic that expired is created afresh (offsets from 0) by the next send. It keeps its last ARGV[4]
  messages: the one that falls out is removed by the send that passes it (one HDEL), and "lo" says
  the first offset still kept.

  KEYS[1] the lite topic's hash                   ({ns:P:lite}:s:L)
  KEYS[2] the parent's set of subscribing groups  ({ns:P:lite}:groups)

  ARGV[1] the parent's key prefix ({ns:P:lite}:); the keys of each group's owner hash, owning member's
          ready zset and wake stream, and the group's in-flight zset of this lite topic are built
          from it in the shapes mq/keys.py documents (LiteKeys), all in the same slot
  ARGV[2] the lite topic's name
  ARGV[3] expiration, ms (> 0)
  ARGV[4] most messages kept (> 0)
  ARGV[5] the message: its fields packed as netstrings ("LEN:BYTES" each, name then value), at
          least "i" (msg id) and "b" (body); "st" is the store's and is appended here

  Returns {offset, store_timestamp_ms, created (1 when this send created the lite topic)}.
  Raises "ERR malformed put-lite …" for bad arguments; nothing is written then.
]]
local prefix, lite, ttl, keep, packed = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5]
if ttl == nil or ttl < 1 then return redis.error_reply('ERR malformed put-lite: expiration ' .. tostring(ARGV[3])) end
if keep == nil or keep < 1 then return redis.error_reply('ERR malformed put-lite: messages kept ' .. tostring(ARGV[4])) end
if #ARGV ~= 5 or string.sub(packed or '', 1, 3) ~= '1:i' then
  return redis.error_reply('ERR malformed put-lite: one packed message starting with its id expected')
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local seq = redis.call('HGET', KEYS[1], 'seq')
local created = 0
if not seq then seq, created = 0, 1 else seq = tonumber(seq) end
local st = tostring(now)
redis.call('HSET', KEYS[1], 'seq', seq + 1, 'm:' .. seq, packed .. '2:st' .. #st .. ':' .. st)
if seq >= keep then redis.call('HDEL', KEYS[1], 'm:' .. (seq - keep)) redis.call('HSET', KEYS[1], 'lo', seq - keep + 1) end
redis.call('PEXPIRE', KEYS[1], ttl)

for _, group in ipairs(redis.call('SMEMBERS', KEYS[2])) do
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
