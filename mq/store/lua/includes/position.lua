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
