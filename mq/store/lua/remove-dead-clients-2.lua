--[[
  remove-dead-clients: the broker service's clean-up of a group's registry. Clients whose last
  heartbeat is older than the timeout are removed, judged by this node's clock — the clock the
  heartbeat script wrote them with — so a broker host whose clock is ahead removes nobody alive.
  At most 1000 clients per call (bounded work; the next sweep removes the rest); the list is read
  before the first write.

  KEYS[1] group clients zset (client id -> last heartbeat, ms, this node's clock)
  KEYS[2] group info hash    (client id -> ClientInfo JSON)

  ARGV[1] heartbeat timeout, ms

  Returns the number of clients removed.
]]
local timeout = tonumber(ARGV[1])
if timeout == nil then return redis.error_reply('ERR remove-dead-clients: timeout must be a number') end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local dead = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. (now - timeout), 'LIMIT', 0, 1000)
for i = 1, #dead, 500 do
  local last = math.min(i + 499, #dead)
  redis.call('ZREM', KEYS[1], unpack(dead, i, last))
  redis.call('HDEL', KEYS[2], unpack(dead, i, last))
end
return #dead
