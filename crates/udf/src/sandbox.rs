//! Building a sandboxed Lua state with Aerospike's UDF environment.
//!
//! Opened libraries: base (less `dofile`, `loadfile`; `load` text-only),
//! `string`, `math`, `table`, `utf8`, and `os` reduced to `os.time`. Not
//! opened: `io`, `package` (so no `loadlib`, no C modules), `coroutine`
//! (hooks do not follow coroutines), `debug` (whose global name is the
//! logging function, as in Aerospike). `require` only finds registered
//! modules, by name.

use std::sync::Arc;

use mlua::chunk::ChunkMode;
use mlua::{Function, Lua, LuaOptions, StdLib, Table};
use parking_lot::Mutex;

use crate::Modules;
use crate::guard::{Guard, is_aborted};
use crate::lualib;

/// The modules (file name, generation) a state has loaded.
pub(crate) type Deps = Arc<Mutex<Vec<(String, u64)>>>;

const PRELUDE: &str = include_str!("prelude.lua");

/// A fresh sandboxed state; `require` resolves through `modules`, naming
/// chunks `@<user_path>/<file>` so errors read as Aerospike's.
pub(crate) fn new_state(modules: &Arc<Modules>, user_path: &str, deps: &Deps) -> mlua::Result<Lua> {
    let libs = StdLib::STRING | StdLib::MATH | StdLib::TABLE | StdLib::OS | StdLib::UTF8;
    let lua = Lua::new_with(libs, LuaOptions::default())?;
    lua.set_app_data(Guard::default());
    restrict_globals(&lua)?;
    lualib::register(&lua)?;
    let require = make_require(&lua, modules.clone(), user_path.to_owned(), deps.clone())?;
    lua.globals().set("require", require)?;
    let log = lua.create_function(log)?;
    let aborted = lua.create_function(|lua, ()| Ok(is_aborted(lua)))?;
    lua.load(PRELUDE)
        .set_name("=prelude")
        .set_mode(ChunkMode::Text)
        .call::<()>((log, aborted))?;
    crate::stream::install(&lua)?;
    Ok(lua)
}

fn restrict_globals(lua: &Lua) -> mlua::Result<()> {
    let globals = lua.globals();
    for name in ["dofile", "loadfile", "require"] {
        globals.raw_set(name, mlua::Value::Nil)?;
    }
    let os: Table = globals.get("os")?;
    let time: Function = os.get("time")?;
    let safe_os = lua.create_table()?;
    safe_os.set("time", time)?;
    globals.set("os", safe_os)?;
    Ok(())
}

/// The module file for a `require`/apply name: `mymod` -> `mymod.lua`.
pub(crate) fn module_file(name: &str) -> String {
    if name.ends_with(".lua") {
        name.to_owned()
    } else {
        format!("{name}.lua")
    }
}

fn make_require(
    lua: &Lua,
    modules: Arc<Modules>,
    user_path: String,
    deps: Deps,
) -> mlua::Result<Function> {
    let loaded = lua.create_table()?;
    lua.create_function(move |lua, name: String| {
        let cached: mlua::Value = loaded.raw_get(name.as_str())?;
        if !cached.is_nil() {
            return Ok(cached);
        }
        let file = module_file(&name);
        let Some(module) = modules.entry(&file) else {
            return Err(mlua::Error::runtime(format!("module '{name}' not found")));
        };
        deps.lock().push((file.clone(), module.generation));
        let chunk = lua
            .load(module.source.as_str())
            .set_name(format!("@{user_path}/{file}"))
            .set_mode(ChunkMode::Text)
            .into_function()?;
        loaded.raw_set(name.as_str(), true)?;
        let value: mlua::Value = chunk.call(name.as_str())?;
        let value = if value.is_nil() {
            mlua::Value::Boolean(true)
        } else {
            value
        };
        loaded.raw_set(name.as_str(), value.clone())?;
        Ok(value)
    })
}

/// `aerospike:log(level, message)` and the logging globals, to `tracing`,
/// with the Lua caller's position.
fn log(lua: &Lua, (level, message): (i64, Option<String>)) -> mlua::Result<()> {
    let at = lua
        .inspect_stack(2, |d| {
            let src = d
                .source()
                .short_src
                .map(|s| s.into_owned())
                .unwrap_or_default();
            format!("{src}:{}", d.current_line().unwrap_or(0))
        })
        .unwrap_or_default();
    let message = message.unwrap_or_default();
    match level {
        1 => tracing::warn!(target: "udf", at = %at, "{message}"),
        2 => tracing::info!(target: "udf", at = %at, "{message}"),
        3 => tracing::debug!(target: "udf", at = %at, "{message}"),
        _ => tracing::trace!(target: "udf", at = %at, "{message}"),
    }
    Ok(())
}
