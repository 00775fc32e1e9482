--[[
  heartbeat: a client of a group says it is alive; clients silent for too long are removed.
  Kept to four commands when nothing changes (TIME, ZADD, HMGET, ZRANGE): it runs every second.

  KEYS[1] group clients zset (client id -> last heartbeat, ms)
  KEYS[2] group info hash    (client id -> ClientInfo JSON)
  KEYS[3] group config hash: json -> GroupConfig JSON (Admin.create_group; may be absent),
          reset_seq -> offset-reset counter (incremented by announce-reset)

  ARGV[1] client id
  ARGV[2] ClientInfo JSON, or "" when it has not changed since the last heartbeat
  ARGV[3] heartbeat timeout, ms: a client whose last heartbeat is older is dead

  Returns {now_ms, config, reset_seq, client_id, client_id, ...}: the server time, the group's config
  JSON ("" when the group has none), the group's offset-reset counter (0 when never reset) and every
  live client id. Members learn a pause or resume of the group (consume_enable) and an offset reset
  from it within one heartbeat.

  Flags: allow-oom (a consumer's bookkeeping goes on when the store is full: see scripts.py)
]]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], now, ARGV[1])
if ARGV[2] ~= '' then redis.call('HSET', KEYS[2], ARGV[1], ARGV[2]) end
local oldest = now - tonumber(ARGV[3])
local meta = redis.call('HMGET', KEYS[3], 'json', 'reset_seq')
local out = {now, meta[1] or '', tonumber(meta[2] or '0')}
local members = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
for i = 1, #members, 2 do
  if tonumber(members[i + 1]) < oldest then
    redis.call('ZREM', KEYS[1], members[i])
    redis.call('HDEL', KEYS[2], members[i])
  else
    out[#out + 1] = members[i]
  end
end
return out
