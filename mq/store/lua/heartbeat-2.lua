--[[
  heartbeat: a client of a group says it is alive; clients silent for too long are removed.

  KEYS[1] group clients zset (client id -> last heartbeat, ms)
  KEYS[2] group info hash    (client id -> ClientInfo JSON)

  ARGV[1] client id
  ARGV[2] ClientInfo JSON, with "last_heartbeat_ms" filled in here (server clock)
  ARGV[3] heartbeat timeout, ms: a client whose last heartbeat is older is dead

  Returns {now_ms, client_id, client_id, ...}: the server time and every live client id.
]]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local dead = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. (now - tonumber(ARGV[3])))
for _, cid in ipairs(dead) do
  redis.call('ZREM', KEYS[1], cid)
  redis.call('HDEL', KEYS[2], cid)
end
redis.call('ZADD', KEYS[1], now, ARGV[1])
local info = cjson.decode(ARGV[2])
info['last_heartbeat_ms'] = now
redis.call('HSET', KEYS[2], ARGV[1], cjson.encode(info))
local out = {now}
for _, cid in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do out[#out + 1] = cid end
return out
