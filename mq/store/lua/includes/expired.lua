-- expired_totals(key, groups, counts): the new values of the groups' counters in the expired hash
-- `key` (each group's stored count plus its count here), as HSET arguments {group1, total1, ...};
-- nil and an error reply when a stored count is not a number (the caller returns the error before
-- writing anything, so the queue stays untouched). Shared by trim-queue and forget-segments (D83, D95).
local function expired_totals(key, groups, counts)
  local totals = {}
  if #groups == 0 then return totals end
  local before = redis.call('HMGET', key, unpack(groups))
  for i, n in ipairs(counts) do
    local so_far = tonumber(before[i] or '0')
    if so_far == nil then return nil, redis.error_reply('expired count of group ' .. groups[i] .. ' is not a number') end
    totals[#totals + 1] = groups[i]
    totals[#totals + 1] = so_far + n
  end
  return totals
end
