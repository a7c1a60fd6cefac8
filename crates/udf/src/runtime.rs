//! Running record and stream UDFs: per-module cached states, limits, the
//! `record` object and error mapping.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mlua::{HookTriggers, Lua, MetaMethod, MultiValue, UserDataMethods, UserDataRegistry, VmState};

use crate::guard::{Guard, MEMORY, OOM_MESSAGE, TIMEOUT};
use crate::item::{Item, LuaBytes};
use crate::modules::DEFAULT_USER_PATH;
use crate::sandbox::{Deps, module_file, new_state};
use crate::stream::{self, StreamInput};
use crate::{Modules, UdfError, UdfRecord, Value};

/// Instructions between two deadline checks.
const HOOK_EVERY: u32 = 1000;

/// Per-call limits; 0 means unlimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Limits {
    /// Wall-clock budget of the call in milliseconds.
    pub time_ms: u64,
    /// Memory the call may allocate beyond what the state already holds
    /// (Lua heap plus list/map/bytes growth), in bytes.
    pub memory_bytes: usize,
}

/// Runtime settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeConfig {
    /// The directory shown in chunk names, hence in error messages
    /// (`<user_path>/mymod.lua:12: boom`); Aerospike's default
    /// `/opt/aerospike/usr/udf/lua` unless changed.
    pub user_path: String,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            user_path: DEFAULT_USER_PATH.to_owned(),
        }
    }
}

/// One module's Lua state and what it loaded.
struct ModuleState {
    lua: Lua,
    deps: Deps,
}

impl ModuleState {
    /// Whether every module the state loaded is still at the same version.
    fn is_current(&self, modules: &Modules) -> bool {
        self.deps.lock().iter().all(|(file, generation)| {
            modules
                .entry(file)
                .is_some_and(|m| m.generation == *generation)
        })
    }
}

/// A UDF runtime for one worker thread: `Send`, not `Sync`.
///
/// It keeps one Lua state per module (as Aerospike's per-file state cache),
/// built on first use by `require`-ing the module, and rebuilt when the
/// module, or one it required, changed or was removed.
pub struct UdfRuntime {
    modules: Arc<Modules>,
    config: RuntimeConfig,
    states: HashMap<String, ModuleState>,
    seen_generation: u64,
}

impl UdfRuntime {
    /// A runtime over `modules` with the default configuration.
    pub fn new(modules: Arc<Modules>) -> Self {
        Self::with_config(modules, RuntimeConfig::default())
    }

    /// A runtime over `modules` with `config`.
    pub fn with_config(modules: Arc<Modules>, config: RuntimeConfig) -> Self {
        UdfRuntime {
            modules,
            config,
            states: HashMap::new(),
            seen_generation: 0,
        }
    }

    /// Runs the record UDF `module.function(rec, args...)` against `record`.
    ///
    /// `module` may be given with or without its `.lua` extension. The
    /// result converts as Aerospike's: Lua tables, functions and records
    /// come back as [`Value::Nil`].
    pub fn apply(
        &mut self,
        module: &str,
        function: &str,
        args: Vec<Value>,
        record: &mut dyn UdfRecord,
        limits: Limits,
    ) -> Result<Value, UdfError> {
        let state = self.state_for(module)?;
        call_record(&state.lua, function, args, record, limits)
    }

    /// Runs the stream UDF `module.function(stream, args...)` over `input`:
    /// the operations the function composes on its stream, up to and
    /// including the first `reduce`, as an Aerospike server runs them on
    /// one partition. Each value they produce goes to `emit`; the client
    /// reduces them again with the rest of the stream.
    ///
    /// `limits` bound the whole run, reading the input included.
    ///
    /// # Errors
    /// [`UdfError::ModuleNotFound`] and the module's load errors,
    /// [`UdfError::Lua`] for a missing function or a failing one,
    /// [`UdfError::Timeout`] and [`UdfError::Memory`] past the limits.
    pub fn aggregate(
        &mut self,
        module: &str,
        function: &str,
        args: Vec<Value>,
        input: &mut StreamInput<'_>,
        emit: &mut dyn FnMut(Value),
        limits: Limits,
    ) -> Result<(), UdfError> {
        let state = self.state_for(module)?;
        stream::call_stream(&state.lua, function, args, input, emit, limits)
    }

    /// The cached state of a module, (re)built when missing or stale.
    fn state_for(&mut self, module: &str) -> Result<&ModuleState, UdfError> {
        let generation = self.modules.generation();
        if generation != self.seen_generation {
            let modules = &self.modules;
            self.states.retain(|_, s| s.is_current(modules));
            self.seen_generation = generation;
        }
        let file = module_file(module);
        if !self.states.contains_key(&file) {
            let state = self.build(&file)?;
            self.states.insert(file.clone(), state);
        }
        self.states.get(&file).ok_or(UdfError::ModuleNotFound {
            module: module.to_owned(),
        })
    }

    fn build(&self, file: &str) -> Result<ModuleState, UdfError> {
        if self.modules.entry(file).is_none() {
            return Err(UdfError::ModuleNotFound {
                module: file.to_owned(),
            });
        }
        let deps = Deps::default();
        let lua = new_state(&self.modules, &self.config.user_path, &deps).map_err(|e| {
            UdfError::Runtime {
                message: e.to_string(),
            }
        })?;
        let name = file.strip_suffix(".lua").unwrap_or(file);
        let require: mlua::Function =
            lua.globals()
                .get("require")
                .map_err(|e| UdfError::Runtime {
                    message: e.to_string(),
                })?;
        arm(
            &lua,
            Limits {
                time_ms: 1000,
                memory_bytes: 0,
            },
        )
        .map_err(|e| classify(&lua, &e))?;
        let loaded = require.call::<mlua::Value>(name);
        disarm(&lua);
        loaded.map_err(|e| classify(&lua, &e))?;
        Ok(ModuleState { lua, deps })
    }
}

fn call_record(
    lua: &Lua,
    function: &str,
    args: Vec<Value>,
    record: &mut dyn UdfRecord,
    limits: Limits,
) -> Result<Value, UdfError> {
    let Ok(mlua::Value::Function(f)) = lua.globals().get::<mlua::Value>(function) else {
        return Err(UdfError::Lua {
            message: "function not found".to_owned(),
        });
    };
    arm(lua, limits).map_err(|e| classify(lua, &e))?;
    let cell = RefCell::new(record);
    let result = lua.scope(|scope| {
        let rec = scope.create_any_userdata(RecordCell(&cell), register_record)?;
        let mut values = Vec::with_capacity(args.len() + 1);
        values.push(mlua::Value::UserData(rec));
        for arg in args {
            values.push(Item::from_value(arg).into_lua(lua)?);
        }
        let rv: mlua::Value = f.call(MultiValue::from_vec(values))?;
        match Item::from_lua(&rv) {
            Some(item) => item.to_value(),
            None => Ok(Value::Nil),
        }
    });
    let result = result.map_err(|e| classify(lua, &e));
    disarm(lua);
    result
}

/// Sets the call's limits: memory cap above current usage, deadline hook.
pub(crate) fn arm(lua: &Lua, limits: Limits) -> mlua::Result<()> {
    if let Some(guard) = lua.app_data_ref::<Guard>() {
        guard.reset(limits.memory_bytes);
    }
    if limits.memory_bytes > 0 {
        lua.set_memory_limit(lua.used_memory().saturating_add(limits.memory_bytes))?;
    }
    if limits.time_ms > 0 {
        let deadline = Instant::now() + Duration::from_millis(limits.time_ms);
        let triggers = HookTriggers::new().every_nth_instruction(HOOK_EVERY);
        lua.set_hook(triggers, move |lua, debug| {
            if Instant::now() < deadline {
                return Ok(VmState::Continue);
            }
            if let Some(guard) = lua.app_data_ref::<Guard>() {
                guard.abort(TIMEOUT);
            }
            let src = debug
                .source()
                .short_src
                .map(|s| s.into_owned())
                .unwrap_or_default();
            let line = debug.current_line().unwrap_or(0);
            Err(mlua::Error::runtime(format!(
                "{src}:{line}: UDF Execution Timeout"
            )))
        })?;
    }
    Ok(())
}

/// Lifts the call's limits; collects garbage after an aborted call.
pub(crate) fn disarm(lua: &Lua) {
    lua.remove_hook();
    let _ = lua.set_memory_limit(0);
    let aborted = lua
        .app_data_ref::<Guard>()
        .map(|g| g.aborted())
        .unwrap_or(0);
    if aborted != 0 {
        let _ = lua.gc_collect();
    }
    if let Some(guard) = lua.app_data_ref::<Guard>() {
        guard.reset(0);
    }
}

/// Maps a Lua failure to a [`UdfError`], by the abort reason first.
pub(crate) fn classify(lua: &Lua, err: &mlua::Error) -> UdfError {
    let message = error_message(err);
    let aborted = lua
        .app_data_ref::<Guard>()
        .map(|g| g.aborted())
        .unwrap_or(0);
    if aborted == TIMEOUT {
        UdfError::Timeout { message }
    } else if aborted == MEMORY || is_memory(err) || message == OOM_MESSAGE {
        UdfError::Memory { message }
    } else {
        UdfError::Lua { message }
    }
}

fn is_memory(err: &mlua::Error) -> bool {
    match err {
        mlua::Error::MemoryError(_) => true,
        mlua::Error::CallbackError { cause, .. } => is_memory(cause),
        mlua::Error::WithContext { cause, .. } => is_memory(cause),
        _ => false,
    }
}

/// The Lua error text, without mlua's wrapping and tracebacks.
pub(crate) fn error_message(err: &mlua::Error) -> String {
    match err {
        mlua::Error::RuntimeError(m) | mlua::Error::MemoryError(m) => strip_traceback(m),
        mlua::Error::SyntaxError { message, .. } => message.clone(),
        mlua::Error::CallbackError { cause, .. } => error_message(cause),
        mlua::Error::WithContext { cause, .. } => error_message(cause),
        other => other.to_string(),
    }
}

/// Lua's message without the traceback mlua appends.
fn strip_traceback(message: &str) -> String {
    match message.find("\nstack traceback:") {
        Some(end) => message[..end].to_owned(),
        None => message.to_owned(),
    }
}

/// The record handle Lua sees, valid for one call.
struct RecordCell<'r, 'a>(&'r RefCell<&'a mut dyn UdfRecord>);

fn register_record(reg: &mut UserDataRegistry<RecordCell<'_, '_>>) {
    reg.add_meta_method(MetaMethod::Index, |lua, this, name: mlua::Value| {
        let mlua::Value::String(name) = name else {
            return Ok(mlua::Value::Nil);
        };
        let value = this.0.borrow().bin(&name.to_str()?);
        value.map_or(Ok(mlua::Value::Nil), |v| Item::from_value(v).into_lua(lua))
    });
    reg.add_meta_method(
        MetaMethod::NewIndex,
        |lua, this, (name, value): (String, mlua::Value)| {
            let Some(item) = Item::from_lua(&value) else {
                return Err(located(
                    lua,
                    &format!("can't set bin {name} to unsupported type"),
                ));
            };
            let value = item.to_value()?;
            this.0.borrow_mut().set_bin(&name, value);
            Ok(())
        },
    );
    reg.add_meta_method(
        MetaMethod::Call,
        |lua, this, (op, rest): (String, MultiValue)| {
            record_op(
                lua,
                &mut **this.0.borrow_mut(),
                &op,
                rest,
                Access::ReadWrite,
            )
        },
    );
    reg.add_meta_method(MetaMethod::ToString, |_, _, ()| Ok("Record()"));
}

/// Whether a record handle may change its record.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// A record UDF's record.
    ReadWrite,
    /// A record in a stream UDF's input.
    ReadOnly,
}

/// The operations that change a record.
const WRITE_OPS: [&str; 5] = ["set_ttl", "drop_key", "create", "update", "remove"];

/// The error a stream UDF gets for changing one of its records.
pub(crate) fn read_only(lua: &Lua) -> mlua::Error {
    located(lua, "records are read-only in a stream UDF")
}

/// `record.<op>(rec, ...)` and `aerospike:<op>(rec)`.
pub(crate) fn record_op(
    lua: &Lua,
    rec: &mut dyn UdfRecord,
    op: &str,
    rest: MultiValue,
    access: Access,
) -> mlua::Result<mlua::Value> {
    use mlua::IntoLua;
    let int = |v: i64| Ok(mlua::Value::Integer(v));
    if access == Access::ReadOnly && WRITE_OPS.contains(&op) {
        return Err(read_only(lua));
    }
    match op {
        "ttl" => int(i64::from(rec.ttl())),
        "gen" => int(i64::from(rec.generation())),
        "last_update_time" => int(i64::try_from(rec.last_update_ms()).unwrap_or(i64::MAX)),
        "setname" | "set_name" => rec.set_name().into_lua(lua),
        "digest" => {
            let bytes = rec.digest().to_vec();
            let shared = Arc::new(parking_lot::Mutex::new(bytes));
            Ok(mlua::Value::UserData(
                lua.create_userdata(LuaBytes(shared))?,
            ))
        }
        "key" => rec
            .key()
            .map_or(Ok(mlua::Value::Nil), |v| Item::from_value(v).into_lua(lua)),
        "bin_names" => Ok(mlua::Value::Table(
            lua.create_sequence_from(rec.bin_names())?,
        )),
        "numbins" => int(i64::try_from(rec.bin_names().len()).unwrap_or(i64::MAX)),
        "size" | "device_size" => int(i64::try_from(rec.device_size()).unwrap_or(i64::MAX)),
        "memory_size" => int(0),
        "set_ttl" => {
            let ttl = match rest.into_iter().next() {
                Some(mlua::Value::Integer(t)) => t,
                Some(mlua::Value::Number(t)) => t as i64,
                _ => 0,
            };
            // Aerospike casts to uint32: -1 is "never expire" (0xFFFFFFFF).
            rec.set_ttl(ttl as u32);
            Ok(mlua::Value::Nil)
        }
        "drop_key" => {
            rec.drop_key();
            Ok(mlua::Value::Nil)
        }
        "create" => int(i64::from(rec.create())),
        "update" => int(i64::from(rec.update())),
        "remove" => int(i64::from(rec.remove())),
        "exists" => Ok(mlua::Value::Boolean(rec.exists())),
        other => Err(located(lua, &format!("unknown record operation '{other}'"))),
    }
}

/// A runtime error prefixed with the calling Lua position, as `luaL_error`.
pub(crate) fn located(lua: &Lua, message: &str) -> mlua::Error {
    let at = lua.inspect_stack(1, |d| {
        let src = d
            .source()
            .short_src
            .map(|s| s.into_owned())
            .unwrap_or_default();
        d.current_line().map(|line| format!("{src}:{line}: "))
    });
    let prefix = at.flatten().unwrap_or_default();
    mlua::Error::runtime(format!("{prefix}{message}"))
}
