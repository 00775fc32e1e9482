--[[
  restore-queue: set a queue's permission flags and make sure its seq (the next offset) is at least
  what its log and its groups' offsets say, in one atomic step. Run by save_topic (create_topic,
  update_topic) on every queue and by Admin.recover_topics: a queue whose meta Redis evicted
  (maxmemory-policy other than noeviction) comes back with the offset it had, so no new send reuses an
  offset a stored message or a group's committed position already has.

  KEYS[1] queue meta hash   (fields: seq, w, r)
  KEYS[2] queue log stream  (entry id 0-(offset+1); its last generated id outlives trims)
  KEYS[3] queue offsets hash (group -> committed offset: the next offset it will consume)

  ARGV[1] w flag to set ("1" / "0")
  ARGV[2] r flag to set ("1" / "0")
  ARGV[3] the topic's dedup window, ms (meta field "dw", read by put-messages; D140), optional

  Returns {seq_before, seq_after}: seq_before is -1 when the meta had no seq. seq is only ever raised:
  seq_after = max(seq_before, the log's next offset, the largest committed offset); it is written only
  when the queue has a log or offsets (a new queue keeps no seq: its first send starts at 0).
]]
--@include lognext
local before = redis.call('HGET', KEYS[1], 'seq')
local seq = tonumber(before or '-1')
local after = math.max(seq, log_next_offset(KEYS[2]))
local committed = redis.call('HVALS', KEYS[3])
for _, v in ipairs(committed) do
  local n = tonumber(v)
  if n and n > after then after = n end
end
redis.call('HSET', KEYS[1], 'w', ARGV[1], 'r', ARGV[2])
if ARGV[3] then redis.call('HSET', KEYS[1], 'dw', ARGV[3]) end
if after > seq and (after > 0 or before) then
  redis.call('HSET', KEYS[1], 'seq', after)
end
return {seq, math.max(after, seq)}
