--[[
  recall: remove one delayed (timer) message from its queue's timer before it is due, atomically.

  deliver-due takes a due entry from the same two keys in one script (ZREM and XADD together), and
  both scripts run on the queue's slot one at a time: an entry is either removed here (never
  delivered) or moved by deliver-due (then it is no longer in the timer and this returns 0). No
  interleaving lets both happen, and none lets neither happen.

  The entry must carry the message id the recall handle names: a handle naming an existing entry of
  another message (forged, or made up) removes nothing.

  KEYS[1] queue timer zset (delayed entry id -> due ms)
  KEYS[2] queue delayed stream

  ARGV[1] the delayed entry id (checked by the caller: digits-digits)
  ARGV[2] the message id the entry must carry (its `i` field)

  Returns 1 when the entry was scheduled and is now removed; 0 when it is not scheduled (delivered
  already, recalled already, never stored) or carries another message id.
]]
if redis.call('ZSCORE', KEYS[1], ARGV[1]) == false then return 0 end
local e = redis.call('XRANGE', KEYS[2], ARGV[1], ARGV[1])
if #e == 0 then return 0 end
local fields = e[1][2]
local id = nil
for i = 1, #fields - 1, 2 do
  if fields[i] == 'i' then id = fields[i + 1]; break end
end
if id ~= ARGV[2] then return 0 end
-- writes only from here
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('XDEL', KEYS[2], ARGV[1])
return 1
