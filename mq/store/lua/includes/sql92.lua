-- SQL92 filter evaluation over a message's stream fields, rule for rule the same as
-- mq/filter/sql92_eval.py (three-valued logic: nil is NULL; only true matches).
-- Node format: see mq/filter/sql92_nodes.py. Integers arrive as decimal strings and are compared
-- exactly; anything involving a decimal is compared as doubles.

local function sql92_sign_digits(s)
  local sign = 1
  local c = string.sub(s, 1, 1)
  if c == '-' then sign = -1 s = string.sub(s, 2) elseif c == '+' then s = string.sub(s, 2) end
  s = string.gsub(s, '^0+', '')
  if s == '' then sign = 1 s = '0' end
  return sign, s
end

local function sql92_cmp_ints(a, b)
  local sa, da = sql92_sign_digits(a)
  local sb, db = sql92_sign_digits(b)
  if sa ~= sb then return sa < sb and -1 or 1 end
  local c = 0
  if #da ~= #db then c = #da < #db and -1 or 1 elseif da ~= db then c = da < db and -1 or 1 end
  return c * sa
end

local function sql92_is_float_text(s)
  local body = string.gsub(s, '^[+-]', '')
  local mantissa, exponent = string.match(body, '^([^eE]*)[eE]([+-]?%d+)$')
  if mantissa == nil then mantissa = body end
  return string.match(mantissa, '^%d+%.?%d*$') ~= nil or string.match(mantissa, '^%.%d+$') ~= nil
end

-- a value as a number: kind 'int' (decimal string) or 'float' (Lua number), or nil
local function sql92_number(kind, v)
  if kind == 'int' then return 'int', v end
  if kind == 'float' then return 'float', v end
  if kind ~= 'str' then return nil end
  if string.match(v, '^[+-]?%d+$') then return 'int', v end
  if sql92_is_float_text(v) then return 'float', tonumber((string.gsub(v, '^%+', ''))) end
  return nil
end

local function sql92_cmp_numbers(ka, a, kb, b)
  if ka == 'int' and kb == 'int' then return sql92_cmp_ints(a, b) end
  local x, y = tonumber(a), tonumber(b)
  if x < y then return -1 elseif x > y then return 1 end
  return 0
end

local function sql92_equal(ka, a, kb, b)
  if ka == 'bool' or kb == 'bool' then
    local flag, ko, other = a, kb, b
    if ka ~= 'bool' then flag, ko, other = b, ka, a end
    if ko == 'bool' then return flag == other end
    if ko ~= 'str' then return nil end
    local lower = string.lower(other)
    if lower == 'true' or lower == 'false' then return (lower == 'true') == flag end
    return nil
  end
  if ka == 'str' and kb == 'str' then return a == b end
  local na, x = sql92_number(ka, a)
  local nb, y = sql92_number(kb, b)
  if na == nil or nb == nil then return nil end
  return sql92_cmp_numbers(na, x, nb, y) == 0
end

local sql92_condition

local function sql92_value(node, msg)
  local t = node[1]
  if t == 'prop' then
    local v = msg.props()[node[2]]
    if v == nil then return nil end
    return 'str', v
  elseif t == 'tags' then
    if msg.tags == nil or msg.tags == '' then return nil end
    return 'str', msg.tags
  elseif t == 'str' or t == 'int' or t == 'float' or t == 'bool' then
    return t, node[2]
  end
  return nil
end

local function sql92_kleene(node, msg, decisive)
  local unknown = false
  for i = 2, #node do
    local r = sql92_condition(node[i], msg)
    if r == decisive then return decisive end
    if r == nil then unknown = true end
  end
  if unknown then return nil end
  return not decisive
end

-- pattern is not empty (an empty one never matches, in either form: the caller checks)
local function sql92_text_test(op, text, pattern)
  if op == 'contains' then return string.find(text, pattern, 1, true) ~= nil end
  if op == 'starts_with' then return string.sub(text, 1, #pattern) == pattern end
  return string.sub(text, -#pattern) == pattern
end

sql92_condition = function(node, msg)
  local t = node[1]
  if t == 'bool' then return node[2] end
  if t == 'and' then return sql92_kleene(node, msg, false) end
  if t == 'or' then return sql92_kleene(node, msg, true) end
  if t == 'not' then
    local r = sql92_condition(node[2], msg)
    if r == nil then return nil end
    return not r
  end
  if t == 'cmp' then
    local op = node[2]
    local ka, a = sql92_value(node[3], msg)
    local kb, b = sql92_value(node[4], msg)
    if ka == nil or kb == nil then return nil end
    if op == '=' or op == '<>' then
      local same = sql92_equal(ka, a, kb, b)
      if same == nil then return false end
      return same == (op == '=')
    end
    local na, x = sql92_number(ka, a)
    local nb, y = sql92_number(kb, b)
    if na == nil or nb == nil then return false end
    local c = sql92_cmp_numbers(na, x, nb, y)
    if op == '>' then return c > 0 elseif op == '>=' then return c >= 0 elseif op == '<' then return c < 0 end
    return c <= 0
  end
  if t == 'between' or t == 'not_between' then
    local kv, v = sql92_value(node[2], msg)
    local kl, lo = sql92_value(node[3], msg)
    local kh, hi = sql92_value(node[4], msg)
    if kv == nil or kl == nil or kh == nil then return nil end
    local nv, x = sql92_number(kv, v)
    local nl, l = sql92_number(kl, lo)
    local nh, h = sql92_number(kh, hi)
    if nv == nil or nl == nil or nh == nil then return false end
    local inside = sql92_cmp_numbers(nl, l, nv, x) <= 0 and sql92_cmp_numbers(nh, h, nv, x) >= 0
    return inside ~= (t == 'not_between')
  end
  if t == 'in' or t == 'not_in' then
    local kv, v = sql92_value(node[2], msg)
    if kv == nil then return nil end
    local found = false
    for _, option in ipairs(node[3]) do
      if kv == 'str' and option == v then found = true break end
    end
    return found ~= (t == 'not_in')
  end
  if t == 'is_null' or t == 'is_not_null' then
    local kv = sql92_value(node[2], msg)
    return (kv == nil) ~= (t == 'is_not_null')
  end
  local negated = string.sub(t, 1, 4) == 'not_'
  local op = negated and string.sub(t, 5) or t
  local kv, v = sql92_value(node[2], msg)
  if kv ~= 'str' or node[3] == '' then return false end
  return sql92_text_test(op, v, node[3]) ~= negated
end

-- whether the message stored with these stream fields matches the expression tree
local function sql92_matches(tree, fields)
  local msg = {}
  local raw_props
  for j = 1, #fields, 2 do
    local f = fields[j]
    if f == 't' then msg.tags = fields[j + 1] elseif f == 'p' then raw_props = fields[j + 1] end
  end
  local decoded
  msg.props = function()
    if decoded == nil then decoded = raw_props and cjson.decode(raw_props) or {} end
    return decoded
  end
  return sql92_condition(tree, msg) == true
end
