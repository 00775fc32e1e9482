--[[
  release-lease: delete a lease only when the caller still holds it (compare and delete), so a holder
  whose lease expired never removes the next holder's.

  KEYS[1] the lease (string: owner token, with a TTL)

  ARGV[1] the caller's token

  Returns 1 when released, 0 when the caller did not hold it.
]]
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
