-- Osprey stream UDFs: the stream object a stream function composes its
-- operations on, and the server's half of running them, with the semantics
-- of Aerospike's stream_ops.lua. The server runs every operation up to and
-- including the first reduce; the client runs that reduce again over what
-- every node sent, then the operations after it.
-- Loaded once per Lua state, after the prelude; returns the run function.
local kind_of = ...
local type, pairs, ipairs, error = type, pairs, ipairs, error
local setmetatable, getmetatable = setmetatable, getmetatable
local pack, unpack = table.pack, table.unpack
local list_new, list_append, list_clone, list_merge = list, list.append, list.clone, list.merge
local map_new, map_clone, map_merge = map, map.clone, map.merge

-- Where an operation runs, as Aerospike names it.
local SCOPE_SERVER, SCOPE_EITHER, SCOPE_BOTH = 1, 3, 4

-- Aerospike hands an aggregate's number on early once it reaches this, and
-- starts the fold again from its initial value (the reduce adds them up).
local AGGREGATE_FLUSH_AT = 1000

-- A shallow copy of an aggregate's initial value: lists and maps are
-- copied, other userdata become nil, scalars are themselves.
local function copy(v)
  local t = type(v)
  if t == "table" then
    local out = {}
    for k, x in pairs(v) do out[k] = x end
    return out
  elseif t == "userdata" then
    local kind = kind_of(v)
    if kind == "list" then return list_clone(v) end
    if kind == "map" then return map_clone(v) end
    return nil
  end
  return v
end

-- The values `p` accepts.
local function filter(next_value, p)
  local done = false
  return function()
    if done then return nil end
    for v in next_value do
      if p(v) then return v end
    end
    done = true
    return nil
  end
end

-- `f` of each value; as in Aerospike, a nil result ends the stream.
local function transform(next_value, f)
  local done = false
  return function()
    if done then return nil end
    local v = next_value()
    if v ~= nil then return f(v) end
    done = true
    return nil
  end
end

-- One value: the values folded pairwise with `f` (none from no values).
local function reduce(next_value, f)
  local done = false
  return function()
    if done then return nil end
    local acc = next_value()
    if acc ~= nil then
      for v in next_value do acc = f(acc, v) end
    end
    done = true
    return acc
  end
end

-- The values folded with `f` into a copy of `init`.
local function aggregate(next_value, init, f)
  local done = false
  return function()
    if done then return nil end
    local acc = copy(init)
    for v in next_value do
      acc = f(acc, v)
      if type(acc) == "number" and acc >= AGGREGATE_FLUSH_AT then return acc end
    end
    done = true
    return acc
  end
end

-- The stream a stream function receives: each method records an operation
-- and returns the stream, so calls chain (`stream : map(f) : reduce(g)`).
local Stream = {}
Stream.__index = Stream

local function add(self, scope, fn, ...)
  local ops = self.ops
  ops[#ops + 1] = { scope = scope, fn = fn, args = pack(...) }
  return self
end

function Stream:filter(...) return add(self, SCOPE_EITHER, filter, ...) end
function Stream:map(...) return add(self, SCOPE_EITHER, transform, ...) end
function Stream:aggregate(...) return add(self, SCOPE_SERVER, aggregate, ...) end
function Stream:reduce(...) return add(self, SCOPE_BOTH, reduce, ...) end

-- A map from `f(v)` to the list of values with that key.
function Stream:groupby(f)
  local function add_member(groups, v)
    local k = f and f(v) or nil
    local members = groups[k] or list_new()
    list_append(members, v)
    groups[k] = members
    return groups
  end
  local function merge(a, b) return map_merge(a, b, list_merge) end
  return self : aggregate(map_new(), add_member) : reduce(merge)
end

-- Runs the stream function `f` over the records `read` returns (nil at the
-- end), handing each value of the server's operations to `emit`.
return function(f, read, emit, ...)
  local stream = setmetatable({ ops = {} }, Stream)
  local built = f(stream, ...)
  if getmetatable(built) ~= Stream then
    error("the stream function did not return its stream", 0)
  end
  local values = function() return read() end
  for _, op in ipairs(built.ops) do
    values = op.fn(values, unpack(op.args, 1, op.args.n)) or values
    if op.scope == SCOPE_BOTH then break end
  end
  for v in values do emit(v) end
end
