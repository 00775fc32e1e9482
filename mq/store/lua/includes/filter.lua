-- filter: build the store-side subscription filter of a pull or receive.
-- make_matcher(type, data) returns a function(fields) -> boolean over a stream entry's fields:
-- type "" matches everything; "TAG": data is the accepted tags joined by \x1f (an untagged
-- message never matches); "SQL92": data is the expression's JSON tree (mq/filter/sql92_nodes.py).
--@include sql92

-- A filter's data is bounded (mq/filter/limits.py checks expressions when a selector is built; this
-- check stops a client that calls the script directly with an unbounded one).
local MAX_FILTER_BYTES = 131072

local function make_matcher(ftype, fdata)
  if #fdata > MAX_FILTER_BYTES then
    error('filter data of ' .. #fdata .. ' bytes is over the limit of ' .. MAX_FILTER_BYTES .. ' (see mq/filter/limits.py)')
  end
  if ftype == 'TAG' then
    local wanted = {}
    for tag in string.gmatch(fdata, '[^\31]+') do wanted[tag] = true end
    return function(fields)
      for j = 1, #fields, 2 do
        if fields[j] == 't' then return wanted[fields[j + 1]] == true end
      end
      return false
    end
  elseif ftype == 'SQL92' then
    local tree = cjson.decode(fdata)
    return function(fields) return sql92_matches(tree, fields) end
  end
  return function(fields) return true end
end
