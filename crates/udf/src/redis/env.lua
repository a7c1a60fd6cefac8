-- Osprey's Redis scripting environment: the Lua side of Redis's EVAL API
-- (redis.*, the error handler, pcall, bit, struct, the Lua 5.1 names
-- Redis scripts use) and the read-only globals. Runs once per Lua state.
--
-- Scripts run with `env` as their environment: an empty proxy whose reads go
-- to the real globals (a missing name is Redis's "nonexistent global" error)
-- and whose writes are refused, as Redis's read-only globals table. Library
-- tables are read-only proxies too, so no script changes what another sees.
local host, cjson_impl, cmsgpack_impl = ...
local G = _G
local raw_pcall, raw_xpcall, raw_error, raw_load = pcall, xpcall, error, load
local raw_rawset, raw_setmetatable = rawset, setmetatable
local select, type, tostring, next = select, type, tostring, next
local pack, unpack = table.pack, table.unpack
local OOM = "not enough memory"
local READONLY = "Attempt to modify a readonly table"

-- Tables a script may not change (proxies and the environment).
local protected = raw_setmetatable({}, { __mode = "k" })

local function refuse() raw_error(READONLY, 2) end

local function readonly(t)
  local proxy = {}
  protected[proxy] = true
  return raw_setmetatable(proxy, {
    __index = t,
    __newindex = refuse,
    __metatable = false,
    __pairs = function() return next, t, nil end,
    __len = function() return #t end,
  })
end

-- redis.call and redis.pcall are set for each run by the host (C-like functions, so a
-- script's tail call keeps its own frame for the error position). A failing redis.call
-- leaves its error table in host.pending, taken by pcall or the error handler.
local function take_pending(e)
  local pending = host.take_pending()
  if pending ~= nil then return pending end
  return e
end

-- Lua 5.1's wording of an error about a named value, which Redis's scripts see: 5.4 writes
-- "attempt to call a nil value (field 'f')", 5.1 "attempt to call field 'f' (a nil value)".
local string_gsub = string.gsub
local function lua51_wording(e)
  if type(e) ~= "string" then return e end
  return (string_gsub(e, "attempt to (%a[%a ]-) a (%a+) value %((%a+) '([^']*)'%)",
    "attempt to %1 %3 '%4' (a %2 value)"))
end

-- An aborted run (SCRIPT KILL, memory cap) must not be swallowed by the script.
local function pass(ok, ...)
  if not ok and (host.aborted() or (...) == OOM) then
    raw_error((...), 0)
  end
  return ok, ...
end

-- Redis's pcall: an error table with an `err` field comes back as its text.
local function redis_pcall(f, ...)
  local results = pack(pass(raw_pcall(f, ...)))
  if not results[1] then
    local e = lua51_wording(take_pending(results[2]))
    results[2] = e
    if type(e) == "table" then
      local text = e.err
      if type(text) == "string" or type(text) == "number" then
        return false, text
      end
    end
  end
  return unpack(results, 1, results.n)
end

local function redis_xpcall(f, handler, ...)
  return pass(raw_xpcall(f, function(e) return handler(lua51_wording(take_pending(e))) end, ...))
end

-- luaPushErrorBuff: "-CODE msg" or "msg" (code ERR), trimmed of CR/LF.
local function error_table(text)
  local code, msg
  if text:sub(1, 1) == "-" then
    local space = text:find(" ", 1, true)
    if space then
      code, msg = text:sub(2, space - 1), text:sub(space + 1)
    else
      code, msg = "ERR", text:sub(2)
    end
  else
    code, msg = "ERR", text
  end
  msg = msg:gsub("^[\r\n]+", ""):gsub("[\r\n]+$", "")
  return { err = code .. " " .. msg }
end

local redis = {}

function redis.error_reply(...)
  local e = ...
  if select("#", ...) ~= 1 or type(e) ~= "string" then
    return error_table("wrong number or type of arguments")
  end
  if e:sub(1, 1) ~= "-" then e = "-" .. e end
  return error_table(e)
end

function redis.status_reply(...)
  local s = ...
  if select("#", ...) ~= 1 or type(s) ~= "string" then
    return error_table("wrong number or type of arguments")
  end
  return { ok = s }
end

redis.sha1hex, redis.log, redis.setresp, redis.set_repl = host.sha1hex, host.log, host.setresp, host.set_repl

function redis.replicate_commands() return true end
function redis.breakpoint() return false end
function redis.debug() end

redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING = 0, 1, 2, 3
redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL = 0, 1, 2, 2, 3
redis.REDIS_VERSION, redis.REDIS_VERSION_NUM = host.version, host.version_num

-- LuaBitOp's bit library on Lua 5.4's integer operators: 32-bit results.
local bit = {}
local function tobit(x)
  x = tonumber(x) or 0
  if math.type(x) == "float" then
    x = math.tointeger(math.floor(x) % 4294967296) or 0
  end
  x = x & 0xffffffff
  if x >= 0x80000000 then x = x - 0x100000000 end
  return x
end
local function fold(op)
  return function(x, ...)
    local r = tobit(x)
    for i = 1, select("#", ...) do r = op(r, tobit((select(i, ...)))) end
    return tobit(r)
  end
end
bit.tobit = tobit
bit.band = fold(function(a, b) return a & b end)
bit.bor = fold(function(a, b) return a | b end)
bit.bxor = fold(function(a, b) return a ~ b end)
function bit.bnot(x) return tobit(~tobit(x)) end
function bit.lshift(x, n) return tobit(tobit(x) << (tobit(n) & 31)) end
function bit.rshift(x, n) return tobit((tobit(x) & 0xffffffff) >> (tobit(n) & 31)) end
-- A logical shift of the sign-extended 64-bit value keeps the sign in the low 32 bits.
function bit.arshift(x, n) return tobit(tobit(x) >> (tobit(n) & 31)) end
function bit.rol(x, n)
  local v, s = tobit(x) & 0xffffffff, tobit(n) & 31
  return tobit((v << s) | (v >> (32 - s)))
end
function bit.ror(x, n)
  local v, s = tobit(x) & 0xffffffff, tobit(n) & 31
  return tobit((v >> s) | (v << (32 - s)))
end
function bit.bswap(x)
  local v = tobit(x) & 0xffffffff
  return tobit(((v & 0xff) << 24) | ((v & 0xff00) << 8) | ((v >> 8) & 0xff00) | (v >> 24))
end
function bit.tohex(x, n)
  n = n and tobit(n) or 8
  local upper = n < 0
  if upper then n = -n end
  if n > 8 then n = 8 end
  if n < 1 then n = 1 end
  local s = string.format(upper and "%08X" or "%08x", tobit(x) & 0xffffffff)
  return s:sub(9 - n)
end

-- Roberto Ierusalimschy's struct library, on string.pack: its `s` is a
-- zero-terminated string (`z`), a bare `c` one char, and `c0` in pack the
-- whole argument.
local struct = {}
local function translate(fmt, args)
  local out, arg = {}, 1
  local i = 1
  while i <= #fmt do
    local c = fmt:sub(i, i)
    local digits = fmt:match("^%d+", i + 1) or ""
    i = i + 1 + #digits
    if c == "s" then
      out[#out + 1] = "z"
      arg = arg + 1
    elseif c == "c" then
      if digits == "" then digits = "1" end
      if digits == "0" and args then digits = tostring(#tostring(args[arg] or "")) end
      out[#out + 1] = "c" .. digits
      arg = arg + 1
    elseif c:match("[bBhHlLTiIfdj]") then
      out[#out + 1] = c .. digits
      if args and math.type(args[arg]) == "float" then
        args[arg] = math.tointeger(args[arg]) or args[arg]
      end
      arg = arg + 1
    else
      out[#out + 1] = c .. digits
    end
  end
  return table.concat(out)
end
function struct.pack(fmt, ...)
  local args = pack(...)
  return string.pack(translate(fmt, args), unpack(args, 1, args.n))
end
function struct.unpack(fmt, s, pos) return string.unpack(translate(fmt), s, pos) end
function struct.size(fmt) return string.packsize(translate(fmt)) end

-- The Lua 5.1 names Redis scripts use.
G.unpack = unpack
table.getn = function(t) return #t end
math.pow = function(x, y) return x ^ y end
math.log10 = function(x) return math.log(x, 10) end

G.pcall = redis_pcall
G.xpcall = redis_xpcall
G.print, G.dofile, G.loadfile, G.require, G.os, G.io, G.package, G.debug, G.utf8 =
  nil, nil, nil, nil, nil, nil, nil, nil, nil

local env = {}
protected[env] = true

-- Text chunks only, in the scripts' environment.
function G.load(chunk, name, _, chunk_env)
  return raw_load(chunk, name, "t", chunk_env or env)
end
function G.loadstring(chunk, name)
  return raw_load(chunk, name, "t", env)
end
function G.rawset(t, k, v)
  if protected[t] then raw_error(READONLY, 2) end
  return raw_rawset(t, k, v)
end
function G.setmetatable(t, mt)
  if protected[t] then raw_error(READONLY, 2) end
  return raw_setmetatable(t, mt)
end

local cjson = {
  encode = cjson_impl.encode, decode = cjson_impl.decode, null = cjson_impl.null,
  encode_keep_buffer = cjson_impl.encode_keep_buffer,
  encode_max_depth = cjson_impl.encode_max_depth, decode_max_depth = cjson_impl.decode_max_depth,
  encode_invalid_numbers = cjson_impl.encode_invalid_numbers,
}
local cmsgpack = {
  pack = cmsgpack_impl.pack, unpack = cmsgpack_impl.unpack,
  unpack_one = cmsgpack_impl.unpack_one, unpack_limit = cmsgpack_impl.unpack_limit,
}

G.redis = readonly(redis)
G.bit = readonly(bit)
G.struct = readonly(struct)
G.cjson = readonly(cjson)
G.cmsgpack = readonly(cmsgpack)
local string_proxy = readonly(string)
G.string = string_proxy
G.math = readonly(math)
G.table = readonly(table)
-- A coroutine inherits the state's hook (installed once, for the state's life), so SCRIPT KILL
-- and the memory cap reach code running inside one; its resume may not swallow an aborted
-- run, as pcall may not.
local raw_resume = coroutine.resume
local coroutine_api = {}
for name, f in next, coroutine do coroutine_api[name] = f end
coroutine_api.resume = function(co, ...) return pass(raw_resume(co, ...)) end
G.coroutine = readonly(coroutine_api)
local string_mt = getmetatable("")
string_mt.__index = string_proxy
string_mt.__metatable = string_proxy
G._G = env

-- The __index of a strict view of what `source()` answers: a name it lacks is an error.
local function strict_index(source)
  return function(_, name)
    local value = source()[name]
    if value == nil then
      raw_error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 2)
    end
    return value
  end
end

local env_mt = {
  __index = strict_index(function() return G end),
  __newindex = refuse,
}
-- getmetatable(_G) shows it read-only, as Redis's does.
env_mt.__metatable = readonly(env_mt)
raw_setmetatable(env, env_mt)

-- Redis's __redis__err__handler: an error table with the script position.
local function handler(err)
  err = take_pending(err)
  if host.aborted() then err = { err = host.abort_text() } end
  if type(err) ~= "table" then err = { err = "ERR " .. tostring(lua51_wording(err)) } end
  local source, line = host.where()
  if source then
    raw_rawset(err, "source", source)
    raw_rawset(err, "line", line)
  end
  return err
end

-- Runs a compiled script: true and its value, or false and its error.
local function run(f)
  return raw_xpcall(f, handler)
end

-- Functions (FUNCTION LOAD, FCALL). A library's code runs once, at load, with `fenv` as its
-- environment; then only the load API is visible (redis.register_function, redis.log and the
-- versions), as in Redis. The callbacks it registers keep `fenv`, which afterwards reads the
-- ordinary globals: Redis swaps its globals' __index the same way.
local string_lower, string_find = string.lower, string.find
local registering = nil
local function raise(text) raw_error({ err = "ERR " .. text }, 0) end

-- Redis's order of the flags (FUNCTION LIST answers them so).
local FLAG_ORDER = { "no-writes", "allow-oom", "allow-stale", "no-cluster", "allow-cross-slot-keys" }

local function function_flags(t)
  local flags, j = {}, 1
  while true do
    local flag = t[j]
    if flag == nil then break end
    if type(flag) ~= "string" and type(flag) ~= "number" then raise("unknown flag given") end
    local found = false
    for _, name in G.ipairs(FLAG_ORDER) do
      if string_lower(tostring(flag)) == name then flags[name] = true; found = true end
    end
    if not found then raise("unknown flag given") end
    j = j + 1
  end
  return flags
end

local function is_string(v) return type(v) == "string" or type(v) == "number" end

local function named_arguments(args)
  if type(args) ~= "table" then
    raise("calling redis.register_function with a single argument is only applicable to Lua " ..
      "table (representing named arguments).")
  end
  local name, callback, description, flags = nil, nil, nil, {}
  for k, v in next, args do
    if not is_string(k) then raise("named argument key given to redis.register_function is not a string") end
    local key = string_lower(tostring(k))
    if key == "function_name" then
      if not is_string(v) then raise("function_name argument given to redis.register_function must be a string") end
      name = tostring(v)
    elseif key == "description" then
      if not is_string(v) then raise("description argument given to redis.register_function must be a string") end
      description = tostring(v)
    elseif key == "callback" then
      if type(v) ~= "function" then raise("callback argument given to redis.register_function must be a function") end
      callback = v
    elseif key == "flags" then
      if type(v) ~= "table" then
        raise("flags argument to redis.register_function must be a table representing function flags")
      end
      flags = function_flags(v)
    else
      raise("unknown argument given to redis.register_function")
    end
  end
  if name == nil then raise("redis.register_function must get a function name argument") end
  if callback == nil then raise("redis.register_function must get a callback argument") end
  return name, callback, description, flags
end

local function register_function(...)
  if registering == nil then raise("redis.register_function can only be called on FUNCTION LOAD command") end
  local count = select("#", ...)
  if count < 1 or count > 2 then raise("wrong number of arguments to redis.register_function") end
  local name, callback, description, flags
  if count == 1 then
    name, callback, description, flags = named_arguments((...))
  else
    local first, second = ...
    if not is_string(first) then raise("first argument to redis.register_function must be a string") end
    if type(second) ~= "function" then raise("second argument to redis.register_function must be a function") end
    name, callback, description, flags = tostring(first), second, nil, {}
  end
  if name == "" or string_find(name, "[^%w_]") then
    raise("Library names can only contain letters, numbers, or underscores(_) and must be at " ..
      "least one character long")
  end
  for _, registered in G.ipairs(registering) do
    if registered.name == name then raise("Function already exists in the library") end
  end
  local ordered = {}
  for _, flag in G.ipairs(FLAG_ORDER) do
    if flags[flag] then ordered[#ordered + 1] = flag end
  end
  registering[#registering + 1] = { name = name, callback = callback, description = description, flags = ordered }
end

local load_redis = {
  register_function = register_function,
  log = host.log,
  LOG_DEBUG = 0, LOG_VERBOSE = 1, LOG_NOTICE = 2, LOG_WARNING = 3,
  REDIS_VERSION = host.version, REDIS_VERSION_NUM = host.version_num,
}
-- A missing field of the load API reads as Redis words it (its tables share the globals'
-- error metatable).
-- A read-only view of what `source()` answers, whose missing fields raise Redis's error.
local function strict_proxy(source)
  local proxy = {}
  protected[proxy] = true
  raw_setmetatable(proxy, {
    __index = strict_index(source),
    __newindex = refuse,
    __metatable = false,
  })
  return proxy
end
local load_redis_proxy = strict_proxy(function() return load_redis end)
local load_api = { redis = load_redis_proxy }
local api = G

local fenv = strict_proxy(function() return api end)

-- Runs a library's code: true and the functions it registered, or false and Redis's text.
local function load_library(f)
  registering, api = {}, load_api
  local ok, err = raw_pcall(f)
  local registered = registering
  registering, api = nil, G
  if ok then return true, registered end
  err = take_pending(err)
  if host.aborted() then return false, "ERR FUNCTION LOAD timeout" end
  if type(err) == "table" and is_string(err.err) then return false, tostring(err.err) end
  return false, "ERR " .. tostring(lua51_wording(err))
end

-- Runs a function's callback with its keys and arguments: true and its value, or false and its
-- error.
local function call_function(f, keys, args)
  return raw_xpcall(f, handler, keys, args)
end

local library = { env = fenv, load = load_library, call = call_function }

return env, run, redis, library
