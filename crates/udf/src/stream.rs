//! Stream UDFs (aggregations): the `stream` object, the read-only records
//! a stream reads, and one run of a stream function over its input.
//!
//! A run calls the module's function with a stream (and the client's
//! arguments); the function composes operations on it (`filter`, `map`,
//! `aggregate`, `reduce`, `groupby`) and returns it. The server then runs
//! the operations up to and including the first `reduce` over the input
//! records, pulled one at a time, and hands every value they produce to the
//! host. The client reduces again what all runs produced (Aerospike's
//! `stream_ops.lua` scopes).
//!
//! Invariants:
//! - A run reads its input lazily: no record is asked for before the
//!   operations want one, and none after the input ended once.
//! - A record handed to Lua is a snapshot the host gave away: reading it
//!   never reaches the host again, and every attempt to change it raises
//!   a Lua error.
//! - Values Aerospike does not convert (Lua tables, functions, records)
//!   and nil are not emitted.

use mlua::{Function, Lua, MetaMethod, MultiValue, UserData, UserDataMethods};

use crate::item::{Item, LuaList, LuaMap};
use crate::runtime::{Access, Limits, arm, classify, disarm, read_only, record_op};
use crate::{UdfError, UdfRecord, Value};

/// The Lua side of stream runs.
const STREAM_LUA: &str = include_str!("stream.lua");

/// Registry name of the run function `stream.lua` returns.
const RUN_KEY: &str = "osprey.stream.run";

/// A stream's input: the next record, or `None` once there is no more.
pub type StreamInput<'i> = dyn FnMut() -> Option<Box<dyn UdfRecord + Send + Sync>> + 'i;

/// Loads `stream.lua` into a state whose prelude already ran.
pub(crate) fn install(lua: &Lua) -> mlua::Result<()> {
    let kind_of = lua.create_function(|_, value: mlua::Value| Ok(container_kind(&value)))?;
    let run: Function = lua
        .load(STREAM_LUA)
        .set_name("=stream")
        .set_mode(mlua::chunk::ChunkMode::Text)
        .call(kind_of)?;
    lua.set_named_registry_value(RUN_KEY, run)
}

/// `"list"` or `"map"` for Aerospike's containers, `None` for anything else.
fn container_kind(value: &mlua::Value) -> Option<&'static str> {
    let mlua::Value::UserData(data) = value else {
        return None;
    };
    if data.is::<LuaList>() {
        Some("list")
    } else if data.is::<LuaMap>() {
        Some("map")
    } else {
        None
    }
}

/// Runs the stream function `function` of the module loaded in `lua` over
/// `input`, handing each value it produces to `emit`, within `limits`.
pub(crate) fn call_stream(
    lua: &Lua,
    function: &str,
    args: Vec<Value>,
    input: &mut StreamInput<'_>,
    emit: &mut dyn FnMut(Value),
    limits: Limits,
) -> Result<(), UdfError> {
    let Ok(mlua::Value::Function(stream_function)) = lua.globals().get::<mlua::Value>(function)
    else {
        return Err(UdfError::Lua {
            message: "function not found".to_owned(),
        });
    };
    let run: Function = lua
        .named_registry_value(RUN_KEY)
        .map_err(|e| UdfError::Runtime {
            message: e.to_string(),
        })?;
    arm(lua, limits).map_err(|e| classify(lua, &e))?;
    let result = lua.scope(|scope| {
        let mut exhausted = false;
        let read = scope.create_function_mut(move |lua, ()| {
            if exhausted {
                return Ok(mlua::Value::Nil);
            }
            match input() {
                Some(record) => Ok(mlua::Value::UserData(
                    lua.create_userdata(StreamRecord(record))?,
                )),
                None => {
                    exhausted = true;
                    Ok(mlua::Value::Nil)
                }
            }
        })?;
        let emit = scope.create_function_mut(|_, value: mlua::Value| {
            if let Some(item) = Item::from_lua(&value) {
                let value = item.to_value()?;
                if value != Value::Nil {
                    emit(value);
                }
            }
            Ok(())
        })?;
        let mut values = Vec::with_capacity(args.len() + 3);
        values.push(mlua::Value::Function(stream_function));
        values.push(mlua::Value::Function(read));
        values.push(mlua::Value::Function(emit));
        for arg in args {
            values.push(Item::from_value(arg).into_lua(lua)?);
        }
        run.call::<()>(MultiValue::from_vec(values))
    });
    let result = result.map_err(|e| classify(lua, &e));
    disarm(lua);
    result
}

/// A record of a stream's input, as Lua holds it: read-only.
struct StreamRecord(Box<dyn UdfRecord + Send + Sync>);

impl UserData for StreamRecord {
    fn add_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        methods.add_meta_method(MetaMethod::Index, |lua, this, name: mlua::Value| {
            let mlua::Value::String(name) = name else {
                return Ok(mlua::Value::Nil);
            };
            let value = this.0.bin(&name.to_str()?);
            value.map_or(Ok(mlua::Value::Nil), |v| Item::from_value(v).into_lua(lua))
        });
        methods.add_meta_method(MetaMethod::NewIndex, |lua, _, _: MultiValue| {
            Err::<(), _>(read_only(lua))
        });
        methods.add_meta_method_mut(
            MetaMethod::Call,
            |lua, this, (op, rest): (String, MultiValue)| {
                record_op(lua, &mut *this.0, &op, rest, Access::ReadOnly)
            },
        );
        methods.add_meta_method(MetaMethod::ToString, |_, _, ()| Ok("Record()"));
    }
}
