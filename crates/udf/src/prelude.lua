-- Osprey UDF prelude: the Lua side of Aerospike's runtime (record and
-- aerospike objects, logging globals, list/map helpers) plus the sandbox
-- wrappers. Runs once per Lua state, before any module.
local log_fn, aborted = ...
local raw_pcall, raw_xpcall, raw_error, raw_load = pcall, xpcall, error, load
local select, format = select, string.format
local OOM = "not enough memory"

-- An aborted call (time or memory) must not be swallowed by the script.
local function pass(ok, ...)
  if not ok and (aborted() or (...) == OOM) then
    raw_error((...), 0)
  end
  return ok, ...
end
function pcall(f, ...) return pass(raw_pcall(f, ...)) end
function xpcall(f, h, ...) return pass(raw_xpcall(f, h, ...)) end

-- Text chunks only: no bytecode.
function load(chunk, name, _, ...)
  if select('#', ...) > 0 then
    return raw_load(chunk, name, "t", ...)
  end
  return raw_load(chunk, name, "t")
end

-- Logging, as Aerospike's aerospike.lua (levels 1 warn .. 4 trace).
function warn(m, ...) return log_fn(1, format(m, ...)) end
function info(m, ...) return log_fn(2, format(m, ...)) end
function debug(m, ...) return log_fn(3, format(m, ...)) end
function trace(m, ...) return log_fn(4, format(m, ...)) end
function print(...)
  local parts = {}
  for i = 1, select('#', ...) do parts[i] = tostring((select(i, ...))) end
  return log_fn(2, table.concat(parts, "\t"))
end

-- record.<fn>(rec, ...) dispatches to the record's host object.
record = {}
for _, name in ipairs({ "ttl", "gen", "last_update_time", "setname", "set_name",
    "digest", "key", "bin_names", "numbins", "size", "memory_size",
    "device_size", "set_ttl", "drop_key" }) do
  record[name] = function(r, ...) return r(name, ...) end
end

aerospike = {}
function aerospike:create(r) return r("create") end
function aerospike:update(r) return r("update") end
function aerospike:remove(r) return r("remove") end
function aerospike:exists(r) return r("exists") end
function aerospike:log(level, m) return log_fn(level, m) end
function aerospike:get_current_time() return os.time() * 1000 end

-- Helpers of Aerospike's as.lua.
function list.clone(l)
  local out = list()
  for v in list.iterator(l) do list.append(out, v) end
  return out
end
function list.merge(a, b)
  local out = list.clone(a)
  list.concat(out, b)
  return out
end
function map.clone(m)
  local out = map()
  for k, v in map.pairs(m) do out[k] = v end
  return out
end
function map.merge(a, b, f)
  local out = map.clone(a)
  for k, v in map.pairs(b) do
    local old = out[k]
    if old ~= nil and type(f) == "function" then out[k] = f(old, v) else out[k] = v end
  end
  return out
end
function map.diff(a, b)
  local out = map()
  for k, v in map.pairs(a) do if b[k] == nil then out[k] = v end end
  for k, v in map.pairs(b) do if a[k] == nil then out[k] = v end end
  return out
end
function math.sum(a, b) return a + b end
function math.product(a, b) return a * b end
