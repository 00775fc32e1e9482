-- message: the check every stored message passes (put-messages, put-pending, and again when
-- deliver-due or end-transaction move a message into the log), and the bounded copy of a message
-- kept in a dead-letter stream. Reads and writes no key.

-- most keys of one message (mq.validation.MAX_KEYS)
local APPEND_MAX_KEYS = 64
-- most field/value items of one entry (the codec writes at most 16; bounds unpack() in XADD)
local APPEND_MAX_ITEMS = 64

-- the bounds of one call that stores several messages (mq.producer.request.PUT_CALL_MAX_*): a put
-- over them is refused, a deliver-due stops taking messages at them (a single message always passes)
local CALL_MAX_MESSAGES = 512
local CALL_MAX_BYTES = 1048576
local CALL_MAX_KEYS = 2048

-- the bytes of the values and the keys of the message in items[from..to] (as the producer counts
-- them), and its deduplication id (field "d", D140) or nil
local function message_cost(items, from, to)
  local bytes, keys, dedup = 0, 0, nil
  for j = from + 1, to, 2 do
    local v = items[j]
    bytes = bytes + #tostring(v)
    local field = items[j - 1]
    if field == 'k' then
      for _ in string.gmatch(v, '[^\31]+') do keys = keys + 1 end
    elseif field == 'd' then
      dedup = v
    end
  end
  return bytes, keys, dedup
end

-- nil when items[from..to] are field/value pairs put-messages can store, else the reason
local function append_problem(items, from, to)
  local count = to - from + 1
  if count < 2 or count % 2 ~= 0 then return 'odd or empty field/value list' end
  if count > APPEND_MAX_ITEMS then return 'more than ' .. APPEND_MAX_ITEMS .. ' field/value items' end
  local has_id, has_body = false, false
  for j = from, to, 2 do
    local field = items[j]
    if field == 'i' then has_id = items[j + 1] ~= ''
    elseif field == 'b' then has_body = true
    elseif field == 'st' then return 'field st is the store time, set by the store'
    elseif field == 'k' then
      local n = 0
      for _ in string.gmatch(items[j + 1], '[^\31]+') do n = n + 1 end
      if n > APPEND_MAX_KEYS then return 'more than ' .. APPEND_MAX_KEYS .. ' keys' end
    end
  end
  if not has_id then return 'no msg id (field i)' end
  if not has_body then return 'no body (field b)' end
  return nil
end

-- the fields of an entry to keep in a dead-letter stream: the first APPEND_MAX_ITEMS items (pairs)
local function append_kept_fields(fields)
  local n = math.min(#fields - (#fields % 2), APPEND_MAX_ITEMS)
  return unpack(fields, 1, n)
end
