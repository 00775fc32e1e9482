--[[
  remove-dead-clients: the broker service's clean-up of a group's registry. Clients whose last
  heartbeat is older than the timeout are removed, judged by this node's clock — the clock the
  heartbeat script wrote them with — so a broker host whose clock is ahead removes nobody alive.

  KEYS[1] group clients zset (client id -> last heartbeat, ms, this node's clock)
  KEYS[2] group info hash    (client id -> ClientInfo JSON)

  ARGV[1] heartbeat timeout, ms

  Returns the number of clients removed.
]]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local dead = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. (now - tonumber(ARGV[1])))
for _, id in ipairs(dead) do
  redis.call('ZREM', KEYS[1], id)
  redis.call('HDEL', KEYS[2], id)
end
return #dead
