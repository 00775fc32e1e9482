-- evicted: a queue's meta without seq while its log exists is one Redis evicted (maxmemory-policy other
-- than noeviction; see mq/recovery.py): the log exists only once seq was set. Reading such a queue as
-- empty would move a consumer back to offset 0, so the read scripts refuse it before their first write.
-- Expects KEYS[1] meta and KEYS[2] log; costs one EXISTS, only where seq is missing.
local EVICTED = 'EVICTED the queue meta is gone while its log is stored'
local function meta_evicted(seq)
  return not seq and redis.call('EXISTS', KEYS[2]) == 1
end
