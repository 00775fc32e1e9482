-- lognext: the next offset a queue's log implies, from the stream's last generated id (entry id
-- 0-(offset+1), kept by the stream after trims): 0 when there is no log. Read only where a queue's
-- seq is missing (a new queue, or a meta Redis evicted), never on a send's usual path.
local function log_next_offset(log)
  if redis.call('EXISTS', log) == 0 then return 0 end
  local info = redis.call('XINFO', 'STREAM', log)
  for i = 1, #info, 2 do
    if info[i] == 'last-generated-id' then return tonumber(string.match(info[i + 1], '-(%d+)$')) end
  end
  return 0
end
