--[[
  lock-queue: take or renew the orderly-consumption lock of one queue for a consumer group.

  A free or expired lock is taken, the caller's own is renewed, another live holder's is left
  alone. The lock is a key with a TTL, so a crashed holder's lock disappears by itself. Clients
  renew all their locks in one pipeline of these calls (try-lock-batch), and treat their own lock
  as lost well before the TTL runs out (see mq/consumer/locks.py), so two clients never consume
  one queue at once.

  KEYS[1] the queue's lock for the group (string: holder client id, PX TTL)

  ARGV[1] client id of the caller
  ARGV[2] lock TTL, ms

  Returns 1 when the caller holds the lock now, else 0.

  Flags: allow-oom (a consumer's bookkeeping goes on when the store is full: see scripts.py)
]]
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
