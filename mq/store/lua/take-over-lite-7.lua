--[[
  take-over-lite: a live member of a group takes the lite topics of a member that stopped (no lite
  receive, ack or heartbeat since ARGV[3]), up to ARGV[4] of them per call (bounded work: the caller
  calls again while some are left). Members racing for the same dead member split its lite topics;
  a member that is alive after all keeps its own (nothing is moved).

  KEYS[1] the group's alive zset ({ns:P:lite}:alive:G; member -> last seen, ms)
  KEYS[2] the group's owner hash ({ns:P:lite}:owner:G)
  KEYS[3] the dead member's subscription set
  KEYS[4] the taker's subscription set
  KEYS[5] the dead member's ready zset
  KEYS[6] the taker's ready zset
  KEYS[7] the taker's wake stream

  ARGV[1] the dead member, ARGV[2] the taker, ARGV[3] last seen before this (ms) means stopped,
  ARGV[4] most lite topics to move, ARGV[5] now, ms

  Returns {moved, left}; moved is -1 when the member is alive.

  Flags: allow-oom (a consumer's bookkeeping goes on when the store is full: see scripts.py)
]]
local dead, me = ARGV[1], ARGV[2]
local seen = redis.call('ZSCORE', KEYS[1], dead)
if seen and tonumber(seen) >= tonumber(ARGV[3]) then return {-1, 0} end
local moved = 0
local lites = redis.call('SPOP', KEYS[3], tonumber(ARGV[4]))
for _, lite in ipairs(lites) do
  if redis.call('HGET', KEYS[2], lite) == dead then
    redis.call('HSET', KEYS[2], lite, me)
    redis.call('SADD', KEYS[4], lite)
    local at = redis.call('ZSCORE', KEYS[5], lite)
    if at then
      redis.call('ZADD', KEYS[6], at, lite)
      redis.call('ZREM', KEYS[5], lite)
    end
    moved = moved + 1
  end
end
local left = redis.call('SCARD', KEYS[3])
if left == 0 then
  redis.call('ZREM', KEYS[1], dead)
  redis.call('DEL', KEYS[5])
end
if moved > 0 then redis.call('XADD', KEYS[7], 'MAXLEN', '1', '*', 'l', '') end
return {moved, left}
