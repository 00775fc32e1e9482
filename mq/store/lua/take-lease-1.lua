--[[
  take-lease: take a lease for a time when nobody holds it (SET NX PX), also when the store is full.

  KEYS[1] the lease (string: owner token, with a TTL)

  ARGV[1] the caller's token
  ARGV[2] how long the lease lasts, ms

  Returns 1 when taken, 0 when another holds it.

  Flags: allow-oom (the tier uploader takes it to move messages out of a full store)
]]
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
return 0
