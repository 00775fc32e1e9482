--[[
  pull-messages: read the next messages of a queue for a consumer, filtered in the store so that
  messages the subscription does not match never cross the network, and commit the group's offset
  in the same call [RocketMQ PullMessage with FLAG_COMMIT_OFFSET]: the store's copy of a consumer's
  offset is at most one pull behind what it consumed, so a crashed consumer redelivers little.

  KEYS[1] queue meta hash (field seq = next offset to be written)
  KEYS[2] queue log stream (entry id 0-(offset+1))
  KEYS[3] queue offsets hash (group -> committed offset)
  KEYS[4] the guard: the queue's owners hash (guard "owner") or the group's lock of the queue
          (guard "lock"); any key of the queue when ARGV[9] is ""
  KEYS[5] queue msg id index hash (msg id -> offset): answers the position check (ARGV[11]) without
          reading the entry

  ARGV[1] offset to read from (trimmed offsets are skipped: reading resumes at the oldest entry)
  ARGV[2] most messages to return
  ARGV[3] most entries to scan in this call (bounds the work when few messages match)
  ARGV[4] filter type: "" (everything), "TAG" or "SQL92"
  ARGV[5] filter data: TAG: the tags joined by \x1f; SQL92: the expression's JSON tree
          (see mq/filter/sql92.py for its node format)
  ARGV[6] most bytes of entries to scan in this call (field values; at least one entry is read):
          bounds the call's memory and time when messages are large
  ARGV[7] consumer group
  ARGV[8] offset to commit for the group, or "" to commit nothing
  ARGV[9] guard: "" (no check), "owner" (KEYS[4] hash field ARGV[7] must be ARGV[10]) or "lock"
          (KEYS[4] must hold ARGV[10])
  ARGV[10] client id of the caller
  ARGV[11] the caller's position check: the fingerprint ("<st>:<msg id>") of the entry at offset
          ARGV[1] - 1 as the caller was handed it, or "" when it does not know it (D70)

  Returns {next_offset, max_offset, status, fingerprint, entry1, entry2, ...} where each entry is
  {id, {field, value, ...}} as XRANGE returns it, next_offset is where the next pull starts (one
  past the last entry scanned, matched or not; never beyond max_offset), and fingerprint is that of
  the entry at next_offset - 1 ("" when not known). status:
    1 read (and committed ARGV[8]);
    0 the guard does not hold (the queue was taken over): nothing committed or read;
    2 rewound: ARGV[1] is beyond the queue's end, or the entry at ARGV[1] - 1 is not the one the
      caller was handed (a failover discarded a tail the caller had read and new messages took its
      offsets). Nothing is read and ARGV[8] is not committed; next_offset is where the caller
      continues: the group's committed offset as this store holds it (the replication stream is
      ordered, so every entry below a replicated commit is in both histories), or the queue's end
      when the position only overflowed with nothing to check; a committed offset above the
      queue's end is brought down to it (D70).

  Flags: allow-oom (a consumer's bookkeeping goes on when the store is full: see scripts.py)
]]
--@include filter
--@include position
local guard, client = ARGV[9], ARGV[10]
local offset = tonumber(ARGV[1])
local max_offset = tonumber(redis.call('HGET', KEYS[1], 'seq') or '0')
if guard == 'owner' then
  if redis.call('HGET', KEYS[4], ARGV[7]) ~= client then return {offset, max_offset, 0, ''} end
elseif guard == 'lock' then
  if redis.call('GET', KEYS[4]) ~= client then return {offset, max_offset, 0, ''} end
end
local expected = ARGV[11] or ''
if offset > max_offset or (expected ~= '' and offset > 0) then
  local diverged = offset > max_offset
  if not diverged then diverged = not same_entry_before(KEYS[2], KEYS[5], offset, expected) end
  if diverged then
    local committed = tonumber(redis.call('HGET', KEYS[3], ARGV[7]) or '-1')
    local to = math.min(offset, max_offset)
    if expected ~= '' then to = math.min(to, math.max(committed, 0)) end
    if committed > to then redis.call('HSET', KEYS[3], ARGV[7], to) end
    local before = to > 0 and redis.call('XRANGE', KEYS[2], '0-' .. to, '0-' .. to)[1]
    return {to, max_offset, 2, before and fingerprint(before[2]) or ''}
  end
end
if ARGV[8] ~= '' then redis.call('HSET', KEYS[3], ARGV[7], ARGV[8]) end
if offset >= max_offset then return {max_offset, max_offset, 1, expected} end

local want = tonumber(ARGV[2])
local scan = tonumber(ARGV[3])
local budget = tonumber(ARGV[6])
local matches = make_matcher(ARGV[4], ARGV[5])

local out = {0, max_offset, 1, expected}
local next_offset = offset
local last_fields, last_offset = nil, -1
local found = 0
local batch = math.min(scan, want)  -- an unfiltered pull reads exactly what it returns
while found < want and scan > 0 and budget > 0 and next_offset < max_offset do
  local entries = redis.call('XRANGE', KEYS[2], '0-' .. (next_offset + 1), '+', 'COUNT', batch)
  if #entries == 0 then next_offset = max_offset break end
  local read = 0
  for _, entry in ipairs(entries) do
    local entry_offset = tonumber(string.match(entry[1], '-(%d+)$')) - 1
    next_offset = entry_offset + 1
    scan = scan - 1
    local fields = entry[2]
    last_fields, last_offset = fields, entry_offset
    local size = 0
    for i = 2, #fields, 2 do size = size + #fields[i] end
    budget = budget - size
    read = read + size
    if matches(fields) then
      out[#out + 1] = entry
      found = found + 1
    end
    if found >= want or budget <= 0 or scan <= 0 then break end
  end
  if #entries < batch then
    if found < want and budget > 0 and scan > 0 then next_offset = math.max(next_offset, max_offset) end
    break
  end
  -- the next batch holds about what the remaining byte budget allows, judged by this one's sizes
  local average = math.max(1, read / #entries)
  batch = math.max(1, math.min(scan, want * 4, 128, math.floor(budget / average) + 1))
end
out[1] = next_offset
-- the fingerprint of the entry before next_offset, when this call scanned it
if last_fields and next_offset == last_offset + 1 then out[4] = fingerprint(last_fields)
elseif next_offset ~= offset then out[4] = '' end
return out
