//! Redis scripting (EVAL and friends) on the Lua runtime: Redis's Lua API (`redis.call`,
//! `redis.pcall`, `redis.error_reply`, ...), its libraries (`cjson`, `bit`, `struct`,
//! `cmsgpack`), its read-only globals, and its conversions between Lua values and replies.
//!
//! The crate knows nothing of commands: a script's `redis.call` goes to the host's
//! [`ScriptHost::call`], which runs the command and answers a [`RedisValue`].
//!
//! Redis embeds Lua 5.1; this runs Lua 5.4 (see `docs/internals/redis-mapping.md` for what
//! differs), with the 5.1 names Redis scripts use (`unpack`, `loadstring`, `table.getn`,
//! `math.pow`).
//!
//! Invariants:
//! - A script's environment is a read-only proxy of the globals, and every library table a
//!   read-only proxy: no script changes what another script sees.
//! - `redis.call` reaches a host only while [`RedisScripting::run`] (or `call_function`)
//!   runs: the run puts its host in the state's slot and takes it back as it ends; a call
//!   outside a run finds the slot empty and errors.
//! - An aborted run (killed, or past its memory cap) cannot be swallowed by `pcall`.
//! - Replies convert with a bounded depth ([`NESTING_MAX`]), so self-containing tables end in
//!   an error, not a stack overflow.

mod cjson;
mod cmsgpack;
mod convert;

use rustc_hash::FxHashMap;
use std::any::Any;
use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

use mlua::chunk::ChunkMode;
use mlua::{
    Function, HookTriggers, IntoLuaMulti, Lua, LuaOptions, MultiValue, StdLib, Table, VmState,
};

pub use convert::{NESTING_MAX, format_number};

/// A reply as a script sees it (from `redis.call`) and gives it (its return value).
#[derive(Clone, Debug, PartialEq)]
pub enum RedisValue {
    /// `+OK`: Lua `{ok = text}`.
    Status(Vec<u8>),
    /// An error, its text with the code and without the `-` (`ERR boom`): Lua `{err = text}`.
    Error(Vec<u8>),
    /// An error a command answered, which the script passes on: Lua `{err = text}` marked
    /// `ignore_error_stats_update`, as Redis marks the errors of `redis.call` and
    /// `redis.pcall`. Counted in INFO's `errorstats` where the command answered it, not again.
    PassedError(Vec<u8>),
    /// `:42`: a Lua number.
    Integer(i64),
    /// A bulk string: a Lua string.
    Bulk(Vec<u8>),
    /// RESP2's null bulk string or null array: Lua `false`.
    NullBulk,
    /// RESP3's null: Lua `nil`.
    Null,
    /// RESP3 `#t` / `#f`.
    Boolean(bool),
    /// RESP3 double: Lua `{double = n}`.
    Double(f64),
    /// RESP3 big number: Lua `{big_number = text}`.
    BigNumber(Vec<u8>),
    /// RESP3 verbatim string: Lua `{verbatim_string = {format = f, string = s}}`.
    Verbatim {
        /// The three-letter format (`txt`, `mkd`).
        format: Vec<u8>,
        /// The text.
        text: Vec<u8>,
    },
    /// An array: a Lua sequence.
    Array(Vec<RedisValue>),
    /// A RESP3 set: Lua `{set = {member = true}}`.
    Set(Vec<RedisValue>),
    /// A RESP3 map: Lua `{map = {field = value}}`.
    Map(Vec<(RedisValue, RedisValue)>),
}

/// What runs the commands a script calls.
pub trait ScriptHost {
    /// Runs `argv` (the command name first) for `redis.call`/`redis.pcall`, its reply in RESP
    /// `resp` (2, or 3 after `redis.setresp(3)`); a refusal (unknown command, not allowed from
    /// scripts, ...) is an [`RedisValue::Error`] with Redis's text.
    fn call(&mut self, argv: Vec<Vec<u8>>, resp: u8) -> RedisValue;
}

/// The flags a script declares on its `#!lua flags=...` line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScriptFlags {
    /// No shebang: Redis's compatibility mode (the script may write; `EVAL_RO` makes it
    /// read-only).
    pub compat: bool,
    /// `no-writes`: the script may not call write commands.
    pub no_writes: bool,
    /// `allow-oom`.
    pub allow_oom: bool,
    /// `allow-stale`.
    pub allow_stale: bool,
    /// `no-cluster`: refused on a cluster.
    pub no_cluster: bool,
    /// `allow-cross-slot-keys`.
    pub allow_cross_slot_keys: bool,
}

/// A script's body split from its shebang line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParsedScript {
    /// Its flags.
    pub flags: ScriptFlags,
    /// Where the Lua code starts (the shebang's line feed, to keep line numbers).
    pub code_offset: usize,
}

/// Parses the `#!lua flags=a,b` line Redis 7 scripts may start with.
///
/// # Errors
/// Redis's text (without `ERR `) for an unknown engine, option or flag.
pub fn parse_shebang(body: &[u8]) -> Result<ParsedScript, String> {
    let mut flags = ScriptFlags {
        compat: true,
        ..ScriptFlags::default()
    };
    if !body.starts_with(b"#!") {
        return Ok(ParsedScript {
            flags,
            code_offset: 0,
        });
    }
    let Some(end) = body.iter().position(|&b| b == b'\n') else {
        return Err("Invalid script shebang".to_owned());
    };
    let line = String::from_utf8_lossy(&body[..end]);
    let mut parts = line.split_ascii_whitespace();
    let Some(engine) = parts.next() else {
        return Err("Invalid engine in script shebang".to_owned());
    };
    if engine != "#!lua" {
        return Err(format!("Unexpected engine in script shebang: {engine}"));
    }
    flags.compat = false;
    for part in parts {
        let Some(list) = part.strip_prefix("flags=") else {
            return Err(format!("Unknown lua shebang option: {part}"));
        };
        // `flags=` alone is an empty list: no flag (the script may write, and is refused whole
        // past `maxmemory`), as Redis reads it.
        for flag in list.split(',').filter(|flag| !flag.is_empty()) {
            match flag {
                "no-writes" => flags.no_writes = true,
                "allow-oom" => flags.allow_oom = true,
                "allow-stale" => flags.allow_stale = true,
                "no-cluster" => flags.no_cluster = true,
                "allow-cross-slot-keys" => flags.allow_cross_slot_keys = true,
                other => return Err(format!("Unexpected flag in script shebang: {other}")),
            }
        }
    }
    Ok(ParsedScript {
        flags,
        code_offset: end,
    })
}

/// The lower-case hex SHA1 of `bytes`, as Redis names scripts.
pub fn sha1_hex(bytes: &[u8]) -> String {
    sha1_smol::Sha1::from(bytes).digest().to_string()
}

/// A function a library registered with `redis.register_function` (FUNCTION LOAD).
#[derive(Clone)]
pub struct RegisteredFunction {
    /// Its name (letters, digits and `_`).
    pub name: String,
    /// Its description, if it gave one.
    pub description: Option<Vec<u8>>,
    /// Its flags (`compat` is never set: a function has no compatibility mode).
    pub flags: ScriptFlags,
    /// The callback, in the engine's Lua state.
    callback: Function,
}

impl std::fmt::Debug for RegisteredFunction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegisteredFunction")
            .field("name", &self.name)
            .field("description", &self.description)
            .field("flags", &self.flags)
            .finish_non_exhaustive()
    }
}

/// One script run.
#[derive(Clone, Copy, Debug)]
pub struct ScriptRun<'a> {
    /// What names the run in errors: a script's SHA1 (`f_` and lower-case hex), a function's
    /// name.
    pub sha: &'a str,
    /// Its body, compiled on first use (empty for a function).
    pub body: &'a [u8],
    /// The keys (`KEYS`).
    pub keys: &'a [&'a [u8]],
    /// The other arguments (`ARGV`).
    pub args: &'a [&'a [u8]],
    /// Lua memory the run may allocate beyond what the state holds, in bytes.
    pub memory_bytes_max: usize,
}

/// Why a run was aborted.
const ABORT_NONE: u8 = 0;
const ABORT_KILLED: u8 = 1;

/// What a run calls: a script's chunk, or a function's callback (given `KEYS` and `ARGV` as
/// its two arguments, with no globals of those names).
#[derive(Clone, Copy)]
enum Callee<'f> {
    Script(&'f Function),
    Function(&'f Function),
}

/// Instructions between two checks of the kill switch.
const HOOK_INSTRUCTIONS: u32 = 10_000;

/// Called by a running script's hook every [`HOOK_INSTRUCTIONS`] instructions: the host's
/// chance to act on a run that goes on (hand its thread's other work elsewhere), and its kill
/// switch: once it answers `true`, the run ends at once with Redis's
/// `Script killed by user with SCRIPT KILL...` error.
pub type Checkpoint = Arc<dyn Fn() -> bool + Send + Sync>;

/// The Redis version scripts see (`redis.REDIS_VERSION`).
const REDIS_VERSION: &str = "7.2.0";
/// `redis.REDIS_VERSION_NUM`: 0x00MMmmpp.
const REDIS_VERSION_NUM: i64 = 0x0007_0200;

/// Growth of the Lua state since its last full collection that triggers another.
const GC_FULL_GROWTH_BYTES: usize = 16 * 1024 * 1024;

/// Lua's text for memory exhaustion.
const OOM_MESSAGE: &str = "not enough memory";

/// State the Lua side reads during a run.
#[derive(Debug, Default)]
struct RunState {
    /// The RESP version of `redis.call` replies (`redis.setresp`).
    resp: AtomicU8,
    /// Why the run was aborted ([`ABORT_KILLED`]), or [`ABORT_NONE`].
    abort: AtomicU8,
    /// What the hook asks whether to abort the run: set while a run or a library load is
    /// armed ([`RedisScripting::arm_limits`]).
    should_abort: AbortCheck,
    /// The host of the run in progress, which `redis.call` and `redis.pcall` call.
    host: HostSlot,
}

/// A run's host, kept where `redis.call` (made once for the state's life) finds it; `Any`
/// so that the run gives the caller back the host it was given.
trait AnyHost: ScriptHost + Any + Send {}

impl<H: ScriptHost + Any + Send> AnyHost for H {}

/// See [`RunState::host`].
#[derive(Default)]
struct HostSlot(parking_lot::Mutex<Option<Box<dyn AnyHost>>>);

impl std::fmt::Debug for HostSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("HostSlot")
            .field(&self.0.try_lock().map(|slot| slot.is_some()))
            .finish()
    }
}

impl HostSlot {
    /// Runs `call` with the run's host; an error outside a run (a reference to `redis.call`
    /// kept past its run) or from inside a call.
    fn with<T>(&self, call: impl FnOnce(&mut dyn ScriptHost) -> T) -> mlua::Result<T> {
        let mut slot = self
            .0
            .try_lock()
            .ok_or_else(|| mlua::Error::runtime("redis.call called from inside a call"))?;
        match slot.as_mut() {
            Some(host) => Ok(call(&mut **host)),
            None => Err(mlua::Error::runtime(
                "redis.call called outside a script run",
            )),
        }
    }
}

/// See [`RunState::should_abort`].
#[derive(Default)]
struct AbortCheck(parking_lot::Mutex<Option<Box<dyn Fn() -> bool + Send>>>);

impl std::fmt::Debug for AbortCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("AbortCheck")
            .field(&self.0.lock().is_some())
            .finish()
    }
}

/// Installs the hook that asks `state.should_abort` every [`HOOK_INSTRUCTIONS`]
/// instructions, once for the state's life: setting a hook per run cost more than a small
/// script. It is mlua's global hook, whose callback every thread shares: a coroutine inherits
/// it from the thread that creates it (a per-thread hook, looked up by thread, was dropped in
/// a coroutine, whose loop then ran out of SCRIPT KILL's reach).
fn install_hook(lua: &Lua, state: &Arc<RunState>) -> mlua::Result<()> {
    let state = Arc::clone(state);
    let triggers = HookTriggers::new().every_nth_instruction(HOOK_INSTRUCTIONS);
    lua.set_global_hook(triggers, move |_, _| {
        let abort = state
            .should_abort
            .0
            .lock()
            .as_ref()
            .is_some_and(|check| check());
        if abort {
            state.abort.store(ABORT_KILLED, Ordering::Relaxed);
            return Err(mlua::Error::runtime(KILLED_MESSAGE));
        }
        Ok(VmState::Continue)
    })
}

/// The scripting engine: one Lua state whose compiled scripts are cached by SHA1, run one at a
/// time (`Send`, not `Sync`).
pub struct RedisScripting {
    lua: Lua,
    env: Table,
    runner: Function,
    state: Arc<RunState>,
    /// Compiled scripts by SHA1 (hashed with Fx: a lookup per EVALSHA).
    functions: FxHashMap<String, Function>,
    /// The Lua side of functions: `env` (libraries' environment), `load`, `call`.
    library: Table,
    /// The library's `call` (FCALL's entry), taken once.
    library_call: Function,
    /// The state's globals (where a script's `KEYS` and `ARGV` are set), taken once.
    globals: Table,
    /// The state's size after its last full cycle of the collector.
    size_after_full_collection: Cell<usize>,
    /// The names a run sets, made once: a name pushed while a memory cap is armed costs a
    /// protected call.
    names: RunNames,
}

/// See [`RedisScripting::names`].
struct RunNames {
    keys: mlua::LuaString,
    argv: mlua::LuaString,
}

impl RunNames {
    fn new(lua: &Lua) -> mlua::Result<RunNames> {
        Ok(RunNames {
            keys: lua.create_string("KEYS")?,
            argv: lua.create_string("ARGV")?,
        })
    }
}

impl RedisScripting {
    /// A fresh engine.
    ///
    /// # Errors
    /// When the Lua state cannot be built (out of memory).
    pub fn new() -> mlua::Result<RedisScripting> {
        let libs = StdLib::STRING | StdLib::MATH | StdLib::TABLE | StdLib::COROUTINE;
        let lua = Lua::new_with(libs, LuaOptions::default())?;
        make_pending_slot(&lua)?;
        let state = Arc::new(RunState::default());
        let host = host_table(&lua, &state)?;
        let cjson = cjson::table(&lua)?;
        let cmsgpack = cmsgpack::table(&lua)?;
        let (env, runner, redis, library): (Table, Function, Table, Table) = lua
            .load(include_str!("redis/env.lua"))
            .set_name("=redis")
            .set_mode(ChunkMode::Text)
            .call((host, cjson, cmsgpack))?;
        let names = RunNames::new(&lua)?;
        install_calls(&lua, &redis, &state)?;
        install_hook(&lua, &state)?;
        // A run's garbage dies young: minor collections take it cheaply, and the state stays
        // near what it holds (under Redis's 100 KiB through 10,000 runs, which the
        // incremental collector passed without a step every few runs).
        lua.gc_set_mode(mlua::state::GcMode::Generational(
            mlua::state::GcGenParams::default()
                .minor_multiplier(10)
                .minor_to_major(50),
        ));
        let library_call: Function = library.raw_get("call")?;
        let globals = lua.globals();
        Ok(RedisScripting {
            lua,
            env,
            runner,
            state,
            functions: FxHashMap::default(),
            library_call,
            globals,
            library,
            size_after_full_collection: Cell::new(0),
            names,
        })
    }

    /// Compiles `body` (from `code_offset`), as SCRIPT LOAD and EVAL do, and caches it as
    /// `sha`.
    ///
    /// # Errors
    /// Redis's reply text: `ERR Error compiling script (new function): ...`.
    pub fn compile(&mut self, sha: &str, body: &[u8], code_offset: usize) -> Result<(), String> {
        if self.functions.contains_key(sha) {
            return Ok(());
        }
        let code = &body[code_offset.min(body.len())..];
        let function = self
            .lua
            .load(code)
            .set_name("@user_script")
            .set_mode(ChunkMode::Text)
            .set_environment(self.env.clone())
            .into_function()
            .map_err(|e| {
                format!(
                    "ERR Error compiling script (new function): {}",
                    convert::error_text(&e)
                )
            })?;
        self.functions.insert(sha.to_owned(), function);
        Ok(())
    }

    /// Runs a script: its reply, or its error as Redis words it.
    ///
    /// `checkpoint` is called as the run goes on (see [`Checkpoint`]).
    pub fn run<H: ScriptHost + Send + 'static>(
        &mut self,
        run: ScriptRun<'_>,
        code_offset: usize,
        host: H,
        checkpoint: &Checkpoint,
    ) -> (RedisValue, H) {
        if let Err(text) = self.compile(run.sha, run.body, code_offset) {
            return (RedisValue::Error(text.into_bytes()), host);
        }
        let function = &self.functions[run.sha];
        self.execute(Callee::Script(function), run, host, checkpoint)
    }

    /// Compiles and runs a library's code (FUNCTION LOAD), the code after its shebang line
    /// (from the line feed, to keep line numbers): the functions it registered. A library that
    /// runs past `timeout` is stopped.
    ///
    /// # Errors
    /// Redis's text without `ERR `: `Error compiling function: ...`, `Error registering
    /// functions: ...`.
    pub fn load_library(
        &mut self,
        code: &[u8],
        timeout: Duration,
        memory_bytes_max: usize,
    ) -> Result<Vec<RegisteredFunction>, String> {
        let env: Table = self.library.raw_get("env").map_err(|e| e.to_string())?;
        let chunk = self
            .lua
            .load(code)
            .set_name("@user_function")
            .set_mode(ChunkMode::Text)
            .set_environment(env)
            .into_function()
            .map_err(|e| format!("Error compiling function: {}", convert::error_text(&e)))?;
        self.state.abort.store(ABORT_NONE, Ordering::Relaxed);
        let deadline = Instant::now().checked_add(timeout);
        let past_deadline = move || deadline.is_some_and(|deadline| Instant::now() >= deadline);
        let load = self
            .library
            .raw_get::<Function>("load")
            .map_err(|e| e.to_string())?;
        self.arm_limits(memory_bytes_max, past_deadline)
            .map_err(|e| e.to_string())?;
        let loaded = load.call::<(bool, mlua::Value)>(chunk);
        self.lift_limits();
        self.collect_garbage();
        let registering_error = |text: String| format!("Error registering functions: {text}");
        match loaded {
            Ok((true, mlua::Value::Table(registered))) => registered_functions(&registered)
                .map_err(|e| registering_error(convert::error_text(&e))),
            Ok((_, mlua::Value::String(text))) => Err(registering_error(text.to_string_lossy())),
            Ok(_) => Err(registering_error("ERR execution failure".to_owned())),
            Err(error) => Err(registering_error(format!(
                "ERR {}",
                convert::error_text(&error)
            ))),
        }
    }

    /// Runs a registered function (FCALL), its callback given the keys and arguments: its
    /// reply, or its error as Redis words it. `run.sha` is the function's name.
    pub fn call_function<H: ScriptHost + Send + 'static>(
        &mut self,
        function: &RegisteredFunction,
        run: ScriptRun<'_>,
        host: H,
        checkpoint: &Checkpoint,
    ) -> (RedisValue, H) {
        self.execute(Callee::Function(&function.callback), run, host, checkpoint)
    }

    /// Runs `callee` with `host` in the state's slot, and gives the host back.
    fn execute<H: ScriptHost + Send + 'static>(
        &self,
        callee: Callee<'_>,
        run: ScriptRun<'_>,
        host: H,
        checkpoint: &Checkpoint,
    ) -> (RedisValue, H) {
        *self.state.host.0.lock() = Some(Box::new(host));
        let reply = self.execute_hosted(callee, run, checkpoint);
        let host: Box<dyn Any> = self
            .state
            .host
            .0
            .lock()
            .take()
            .expect("a run leaves its host in the slot");
        let host = host
            .downcast::<H>()
            .expect("the host taken out is the one put in");
        (reply, *host)
    }

    /// Runs `callee`, its host in the slot. What the run needs is set up before its memory
    /// cap is armed and taken down after: with no cap, mlua pushes values without a protected
    /// call.
    fn execute_hosted(
        &self,
        callee: Callee<'_>,
        run: ScriptRun<'_>,
        checkpoint: &Checkpoint,
    ) -> RedisValue {
        self.state.resp.store(2, Ordering::Relaxed);
        self.state.abort.store(ABORT_NONE, Ordering::Relaxed);
        let result = (|| {
            let (entry, arguments) = self.entry_of(callee, &run)?;
            let checkpoint = Arc::clone(checkpoint);
            self.arm_limits(run.memory_bytes_max, move || checkpoint())?;
            let outcome = entry.call::<(bool, mlua::Value)>(arguments);
            self.lift_limits();
            let (ok, value) = outcome?;
            let killed = self.state.abort.load(Ordering::Relaxed) != ABORT_NONE;
            let reply = if ok && killed {
                // The script swallowed the kill somewhere (the error handler words it when
                // it did not).
                RedisValue::Error(KILLED_MESSAGE.as_bytes().to_vec())
            } else if ok {
                convert::lua_to_reply(&value, self.state.resp.load(Ordering::Relaxed), 0)
            } else {
                convert::script_error(&value, run.sha)
            };
            set_pending(&self.lua, mlua::Value::Nil)?;
            Ok::<_, mlua::Error>(reply)
        })();
        if result.is_err() {
            self.lift_limits();
        }
        let _ = self.globals.raw_set(&self.names.keys, mlua::Value::Nil);
        let _ = self.globals.raw_set(&self.names.argv, mlua::Value::Nil);
        self.collect_garbage();
        result.unwrap_or_else(|error| run_error(run.sha, &convert::error_text(&error)))
    }

    /// What a run calls, with what: a script's chunk through the runner (with `KEYS` and
    /// `ARGV` set as globals), a function through the library's `call` (given them).
    fn entry_of(
        &self,
        callee: Callee<'_>,
        run: &ScriptRun<'_>,
    ) -> mlua::Result<(&Function, MultiValue)> {
        let keys = sequence(&self.lua, run.keys)?;
        let args = sequence(&self.lua, run.args)?;
        match callee {
            Callee::Script(function) => {
                self.globals.raw_set(&self.names.keys, keys)?;
                self.globals.raw_set(&self.names.argv, args)?;
                let arguments = (function,).into_lua_multi(&self.lua)?;
                Ok((&self.runner, arguments))
            }
            Callee::Function(function) => Ok((
                &self.library_call,
                (function, keys, args).into_lua_multi(&self.lua)?,
            )),
        }
    }

    /// Lua memory the state holds, in bytes.
    pub fn used_memory_bytes(&self) -> usize {
        self.lua.used_memory()
    }

    /// Sets a memory cap of `memory_bytes_max` beyond what the state holds (none when 0), and
    /// has the hook abort the run once `should_abort` answers true.
    fn arm_limits(
        &self,
        memory_bytes_max: usize,
        should_abort: impl Fn() -> bool + Send + 'static,
    ) -> mlua::Result<()> {
        if memory_bytes_max > 0 {
            let limit = self.lua.used_memory().saturating_add(memory_bytes_max);
            self.lua.set_memory_limit(limit)?;
        }
        *self.state.should_abort.0.lock() = Some(Box::new(should_abort));
        Ok(())
    }

    /// Removes what [`Self::arm_limits`] set.
    fn lift_limits(&self) {
        *self.state.should_abort.0.lock() = None;
        let _ = self.lua.set_memory_limit(0);
    }

    /// A full cycle of the collector after an aborted run, or once the state has grown
    /// [`GC_FULL_GROWTH_BYTES`] since the last one; otherwise Lua's generational collector
    /// keeps up with a run's garbage (set in [`RedisScripting::new`]). Neither a full cycle
    /// after each run (it marks every library and cached script) nor Redis's basic step every
    /// 50 runs is made: each cost more than a small script.
    fn collect_garbage(&self) {
        let used = self.lua.used_memory();
        let aborted = self.state.abort.load(Ordering::Relaxed) != ABORT_NONE;
        let size_after_full = self.size_after_full_collection.get();
        if aborted || used > size_after_full.saturating_add(GC_FULL_GROWTH_BYTES) {
            let _ = self.lua.gc_collect();
            self.size_after_full_collection.set(self.lua.used_memory());
        }
    }
}

/// The functions a library's load registered (the Lua `{name, callback, description, flags}`
/// records `redis.register_function` keeps).
fn registered_functions(registered: &Table) -> mlua::Result<Vec<RegisteredFunction>> {
    let mut functions = Vec::new();
    for record in registered.sequence_values::<Table>() {
        let record = record?;
        let mut flags = ScriptFlags::default();
        for flag in record.get::<Table>("flags")?.sequence_values::<String>() {
            match flag?.as_str() {
                "no-writes" => flags.no_writes = true,
                "allow-oom" => flags.allow_oom = true,
                "allow-stale" => flags.allow_stale = true,
                "no-cluster" => flags.no_cluster = true,
                _ => flags.allow_cross_slot_keys = true,
            }
        }
        let description: Option<mlua::LuaString> = record.get("description")?;
        functions.push(RegisteredFunction {
            name: record.get("name")?,
            description: description.map(|text| text.as_bytes().to_vec()),
            flags,
            callback: record.get("callback")?,
        });
    }
    Ok(functions)
}

/// The error of a killed script.
const KILLED_MESSAGE: &str = "ERR Script killed by user with SCRIPT KILL...";

/// Redis's reply for a script failure that is not an error table.
fn run_error(sha: &str, message: &str) -> RedisValue {
    let message = if message.contains(OOM_MESSAGE) {
        OOM_MESSAGE
    } else {
        message
    };
    let shown: String = message.chars().take(100).collect();
    RedisValue::Error(format!("ERR Error running script {sha}, {shown}").into_bytes())
}

/// `items` as a Lua sequence of strings (`KEYS`, `ARGV`).
fn sequence(lua: &Lua, items: &[&[u8]]) -> mlua::Result<Table> {
    let table = lua.create_table_with_capacity(items.len(), 0)?;
    for (index, item) in items.iter().enumerate() {
        table.raw_set(index + 1, lua.create_string(item)?)?;
    }
    Ok(table)
}

/// The functions the Lua side calls: `aborted`, `abort_text`, `where`, `take_pending`, and
/// Redis's `sha1hex`, `log`, `setresp`, `set_repl`; and the version.
fn host_table(lua: &Lua, state: &Arc<RunState>) -> mlua::Result<Table> {
    let host = lua.create_table()?;
    let aborted_state = Arc::clone(state);
    host.raw_set(
        "aborted",
        lua.create_function(move |_, ()| {
            Ok(aborted_state.abort.load(Ordering::Relaxed) != ABORT_NONE)
        })?,
    )?;
    host.raw_set(
        "abort_text",
        lua.create_function(|_, ()| Ok(KILLED_MESSAGE))?,
    )?;
    host.raw_set(
        "where",
        lua.create_function(|lua, ()| Ok(where_failed(lua)))?,
    )?;
    host.raw_set(
        "take_pending",
        lua.create_function(|lua, ()| take_pending(lua))?,
    )?;
    host.raw_set(
        "sha1hex",
        lua.create_function(|lua, args: MultiValue| {
            if args.len() != 1 {
                return Err(raise(lua, "wrong number of arguments"));
            }
            let bytes = match &args[0] {
                mlua::Value::String(s) => s.as_bytes().to_vec(),
                mlua::Value::Integer(i) => i.to_string().into_bytes(),
                mlua::Value::Number(n) => format_number(*n).into_bytes(),
                _ => Vec::new(),
            };
            Ok(sha1_hex(&bytes))
        })?,
    )?;
    host.raw_set("log", lua.create_function(redis_log)?)?;
    let resp_state = Arc::clone(state);
    host.raw_set(
        "setresp",
        lua.create_function(move |lua, args: MultiValue| {
            if args.len() != 1 {
                return Err(raise(lua, "redis.setresp() requires one argument."));
            }
            match lua_number(&args[0]) {
                Some(resp) if resp == 2.0 || resp == 3.0 => {
                    resp_state
                        .resp
                        .store(if resp == 2.0 { 2 } else { 3 }, Ordering::Relaxed);
                    Ok(())
                }
                _ => Err(raise(lua, "RESP version must be 2 or 3.")),
            }
        })?,
    )?;
    host.raw_set(
        "set_repl",
        lua.create_function(|lua, args: MultiValue| {
            if args.len() != 1 {
                return Err(raise(lua, "redis.set_repl() requires one argument."));
            }
            #[allow(clippy::cast_possible_truncation)]
            let flags = lua_number(&args[0]).unwrap_or(0.0) as i64;
            if flags & !3 != 0 {
                let text = "Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or \
                            REPL_NONE.";
                return Err(raise(lua, text));
            }
            Ok(())
        })?,
    )?;
    host.raw_set("version", REDIS_VERSION)?;
    host.raw_set("version_num", REDIS_VERSION_NUM)?;
    Ok(host)
}

/// Sets `redis.call` and `redis.pcall` on `redis`, once for the state's life: each calls the
/// host of the run in progress (`state.host`). Made per run as scoped functions, they cost a
/// seventh of a small script's EVALSHA.
fn install_calls(lua: &Lua, redis: &Table, state: &Arc<RunState>) -> mlua::Result<()> {
    let call_state = Arc::clone(state);
    let call = lua.create_function(move |lua, args: MultiValue| {
        let resp = call_state.resp.load(Ordering::Relaxed);
        let (failed, value) = call_state
            .host
            .with(|host| convert::host_call(lua, host, resp, args))??;
        if failed {
            // The error handler (or pcall) takes the error table from here: an error raised
            // from Rust reaches Lua as a userdata, not as Redis's table.
            set_pending(lua, value)?;
            return Err(mlua::Error::runtime("redis.call failed"));
        }
        Ok(value)
    })?;
    let pcall_state = Arc::clone(state);
    let pcall = lua.create_function(move |lua, args: MultiValue| {
        let resp = pcall_state.resp.load(Ordering::Relaxed);
        pcall_state
            .host
            .with(|host| convert::host_call(lua, host, resp, args).map(|(_, value)| value))?
    })?;
    redis.raw_set("call", call)?;
    redis.raw_set("pcall", pcall)
}

/// Where a failing API function leaves its error table for the error handler or `pcall` (an
/// error raised from Rust reaches Lua as a userdata, not as Redis's table): a registry slot
/// kept as the state's app data. A slot by number, not by name: setting a named one costs a
/// protected call, which clearing it after each run paid.
struct PendingError(mlua::RegistryKey);

/// Makes the state's [`PendingError`] slot.
fn make_pending_slot(lua: &Lua) -> mlua::Result<()> {
    let key = lua.create_registry_value(mlua::Value::Nil)?;
    lua.set_app_data(PendingError(key));
    Ok(())
}

/// Leaves `value` in the state's pending-error slot. A state with none (a library's own unit
/// tests) gets the error raised all the same.
fn set_pending(lua: &Lua, value: impl mlua::IntoLua) -> mlua::Result<()> {
    match lua.app_data_mut::<PendingError>() {
        Some(mut slot) => lua.replace_registry_value(&mut slot.0, value),
        None => Ok(()),
    }
}

fn take_pending(lua: &Lua) -> mlua::Result<mlua::Value> {
    let mut slot = lua
        .app_data_mut::<PendingError>()
        .expect("the engine made its pending-error slot");
    let pending = lua.registry_value(&slot.0)?;
    lua.replace_registry_value(&mut slot.0, mlua::Value::Nil)?;
    Ok(pending)
}

/// Raises Redis's error table `{err = "ERR <text>"}` from a Rust function.
fn raise(lua: &Lua, text: &str) -> mlua::Error {
    let stored = lua.create_table().and_then(|table| {
        table.raw_set("err", format!("ERR {text}"))?;
        set_pending(lua, table)
    });
    match stored {
        Ok(()) => mlua::Error::runtime(text),
        Err(error) => error,
    }
}

/// A function of a library written in Rust (`cjson`, `cmsgpack`) whose errors reach the script
/// as a C library's `luaL_error` raises them: a string, `user_script:1: text`, which `pcall`
/// returns and which the script's error reply quotes (an error raised from Rust would reach
/// Lua as a userdata).
pub(super) fn library_function<A, R, F>(lua: &Lua, function: F) -> mlua::Result<Function>
where
    A: mlua::FromLuaMulti,
    R: mlua::IntoLuaMulti,
    F: Fn(&Lua, A) -> mlua::Result<R> + mlua::MaybeSend + 'static,
{
    lua.create_function(move |lua, args: MultiValue| {
        let outcome = A::from_lua_multi(args, lua).and_then(|args| function(lua, args));
        outcome.map_err(|error| raise_from_library(lua, &convert::error_text(&error)))
    })
}

/// `luaL_error(text)` from a library function: the text after the calling line's position,
/// left for the error handler or `pcall`.
fn raise_from_library(lua: &Lua, text: &str) -> mlua::Error {
    // Level 0 is the library function, 1 the Lua code that called it.
    let position = lua
        .inspect_stack(1, |debug| {
            let line = debug.current_line()?;
            Some(format!("{}:{line}: ", debug.source().short_src?))
        })
        .flatten()
        .unwrap_or_default();
    let message = format!("{position}{text}");
    match set_pending(lua, message.as_str()) {
        Ok(()) => mlua::Error::runtime(message),
        Err(error) => error,
    }
}

/// `lua_tonumber`: a number, or a string that reads as one.
fn lua_number(value: &mlua::Value) -> Option<f64> {
    match value {
        mlua::Value::Integer(i) => Some(*i as f64),
        mlua::Value::Number(n) => Some(*n),
        mlua::Value::String(s) => s.to_str().ok()?.trim().parse().ok(),
        _ => None,
    }
}

/// `redis.log(level, message, ...)`: to `tracing`, at the level Redis's maps to.
fn redis_log(lua: &Lua, args: MultiValue) -> mlua::Result<()> {
    if args.len() < 2 {
        return Err(raise(lua, "redis.log() requires two arguments or more."));
    }
    let Some(level) = lua_number(&args[0]) else {
        return Err(raise(lua, "First argument must be a number (log level)."));
    };
    if !(0.0..=3.0).contains(&level) {
        return Err(raise(lua, "Invalid debug level."));
    }
    let parts: Vec<String> = args
        .iter()
        .skip(1)
        .filter_map(|value| match value {
            mlua::Value::String(s) => Some(s.to_string_lossy()),
            mlua::Value::Integer(i) => Some(i.to_string()),
            mlua::Value::Number(n) => Some(n.to_string()),
            _ => None,
        })
        .collect();
    let message = parts.join(" ");
    match level {
        3.0 => tracing::warn!(target: "redis_script", "{message}"),
        2.0 => tracing::info!(target: "redis_script", "{message}"),
        _ => tracing::debug!(target: "redis_script", "{message}"),
    }
    Ok(())
}

/// The script position an error is reported at (called from the error handler): the innermost
/// frame of the script's own code, else Redis's choice (the raising function, or its caller
/// when that is a C function).
fn where_failed(lua: &Lua) -> (Option<String>, Option<i64>) {
    // Level 0 is this function, 1 the handler, 2 where the error was raised.
    let frame = |level: usize| {
        lua.inspect_stack(level, |debug| {
            let source = debug.source();
            let line = debug.current_line().and_then(|l| i64::try_from(l).ok());
            (source.source.map(|s| s.into_owned()), source.what, line)
        })
    };
    for level in 2..=NESTING_MAX {
        match frame(level) {
            None => break,
            Some((Some(source), _, line))
                if source == "@user_script" || source == "@user_function" =>
            {
                return (Some(source), line.or(Some(-1)));
            }
            Some(_) => {}
        }
    }
    match frame(2) {
        Some((_, "C", _)) => frame(3).map_or((None, None), |(s, _, l)| (s, l.or(Some(-1)))),
        Some((source, _, line)) => (source, line.or(Some(-1))),
        None => (None, None),
    }
}

#[cfg(test)]
mod tests;
