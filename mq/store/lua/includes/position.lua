-- The fingerprint of a stored entry, as a consumer's position check compares it (D70): its store
-- time and msg id, "<st>:<i>". An offset names a different message after a failover that discarded
-- a tail (the promoted replica hands the lost offsets to new messages); the message at an offset
-- is the same in two histories only when both its msg id and the millisecond it was stored agree.
-- Both are the first fields every append writes, so the loop stops after two pairs.
local function fingerprint(fields)
  local st, id
  for i = 1, #fields, 2 do
    local name = fields[i]
    if name == 'st' then st = fields[i + 1] elseif name == 'i' then id = fields[i + 1] end
    if st and id then break end
  end
  return (st or '') .. ':' .. (id or '')
end

-- Whether the entry before `offset` in stream `log` is the one whose fingerprint is `expected` (or is
-- gone: trimmed, nothing to compare). The queue's msg-id index `ids` answers first: when it maps the
-- fingerprint's msg id to `offset` - 1, that offset holds that message and no entry is read (reading
-- one into Lua costs about what the pull's whole script does: D70).
local function same_entry_before(log, ids, offset, expected)
  local id = string.match(expected, '^%d*:(.*)$')
  if id and tonumber(redis.call('HGET', ids, id)) == offset - 1 then return true end
  local last = redis.call('XRANGE', log, '0-' .. offset, '0-' .. offset)[1]
  return last == nil or fingerprint(last[2]) == expected
end

-- Whether a commit of `offset` by a caller at `position` (its next pull's offset, "" for none),
-- after the entry whose fingerprint is `expected` ("" when not known), must not be written (D70): the
-- offset or the position is beyond the queue's end (meta hash `meta`, field seq), the offset is
-- beyond the position, or the entry before the position (in stream `log`) is another message.
local function commit_refused(meta, log, offset, position, expected)
  local max_offset = tonumber(redis.call('HGET', meta, 'seq') or '0')
  offset = tonumber(offset)
  position = tonumber(position ~= '' and position or offset)
  if offset > max_offset or position > max_offset or offset > position then return true end
  if expected ~= '' and position > 0 then
    local last = redis.call('XRANGE', log, '0-' .. position, '0-' .. position)[1]
    if last ~= nil and fingerprint(last[2]) ~= expected then return true end
  end
  return false  -- (commits are not the hot path: the entry is read, no msg-id index key is needed)
end
