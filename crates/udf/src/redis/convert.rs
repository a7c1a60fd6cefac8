//! Conversions between Lua values and replies, as Redis's `script_lua.c` does them.

use mlua::{Lua, MultiValue, Table, Value};

use super::{RedisValue, ScriptHost};

/// Deepest nesting converted either way (and encoded by cjson): deeper (or self-containing)
/// tables end in an error instead of overflowing a thread's stack, which conversion
/// recursion would do past a few thousand levels on a pool thread's 2 MiB in a debug build.
pub const NESTING_MAX: usize = 128;

/// `redis.call`/`redis.pcall`: converts the arguments, runs the command on the host, and
/// answers (whether it failed, the reply as a Lua value).
pub(super) fn host_call(
    lua: &Lua,
    host: &mut dyn ScriptHost,
    resp: u8,
    args: MultiValue,
) -> mlua::Result<(bool, Value)> {
    if args.is_empty() {
        let error = error_table(
            lua,
            "ERR Please specify at least one argument for this redis lib call",
        )?;
        return Ok((true, error));
    }
    let mut argv = Vec::with_capacity(args.len());
    for arg in &args {
        let bytes = match arg {
            Value::String(s) => s.as_bytes().to_vec(),
            Value::Integer(i) => i.to_string().into_bytes(),
            Value::Number(n) => format_number(*n).into_bytes(),
            _ => {
                let text = "ERR Lua redis lib command arguments must be strings or integers";
                return Ok((true, error_table(lua, text)?));
            }
        };
        argv.push(bytes);
    }
    let reply = host.call(argv, resp);
    let failed = matches!(reply, RedisValue::Error(_) | RedisValue::PassedError(_));
    Ok((failed, reply_to_lua(lua, reply, 0)?))
}

/// A number as Redis passes one to a command (`fpconv_dtoa`, the shortest text that reads
/// back the same): integral values without a fraction, large and tiny ones with an exponent.
pub fn format_number(value: f64) -> String {
    if value.is_nan() {
        return "nan".to_owned();
    }
    if value.is_infinite() {
        return if value > 0.0 { "inf" } else { "-inf" }.to_owned();
    }
    let magnitude = value.abs();
    if magnitude != 0.0 && !(1e-6..1e21).contains(&magnitude) {
        let text = format!("{value:e}");
        return match text.split_once('e') {
            Some((mantissa, exponent)) if !exponent.starts_with('-') => {
                format!("{mantissa}e+{exponent}")
            }
            _ => text,
        };
    }
    format!("{value}")
}

/// Redis's mark on the error table of a command's error (`redis.call`, `redis.pcall`): the
/// error was counted when the command answered it.
const PASSED_MARK: &str = "ignore_error_stats_update";

/// `{err = text}` with Redis's `ignore_error_stats_update` mark.
fn error_table(lua: &Lua, text: &str) -> mlua::Result<Value> {
    let table = lua.create_table()?;
    table.raw_set("err", text)?;
    table.raw_set(PASSED_MARK, true)?;
    Ok(Value::Table(table))
}

/// A command's reply as the script sees it (`redisProtocolToLuaType`).
fn reply_to_lua(lua: &Lua, reply: RedisValue, depth: usize) -> mlua::Result<Value> {
    if depth > NESTING_MAX {
        return Err(mlua::Error::runtime("reached lua stack limit"));
    }
    let single = |field: &str, value: Value| -> mlua::Result<Value> {
        let table = lua.create_table()?;
        table.raw_set(field, value)?;
        Ok(Value::Table(table))
    };
    Ok(match reply {
        RedisValue::Status(text) => single("ok", Value::String(lua.create_string(text)?))?,
        RedisValue::Error(text) | RedisValue::PassedError(text) => {
            let table = lua.create_table()?;
            table.raw_set("err", lua.create_string(text)?)?;
            table.raw_set(PASSED_MARK, true)?;
            Value::Table(table)
        }
        RedisValue::Integer(i) => Value::Integer(i),
        RedisValue::Bulk(bytes) => Value::String(lua.create_string(bytes)?),
        RedisValue::NullBulk => Value::Boolean(false),
        RedisValue::Null => Value::Nil,
        RedisValue::Boolean(b) => Value::Boolean(b),
        RedisValue::Double(d) => single("double", Value::Number(d))?,
        RedisValue::BigNumber(text) => {
            single("big_number", Value::String(lua.create_string(text)?))?
        }
        RedisValue::Verbatim { format, text } => {
            let inner = lua.create_table()?;
            inner.raw_set("format", lua.create_string(format)?)?;
            inner.raw_set("string", lua.create_string(text)?)?;
            single("verbatim_string", Value::Table(inner))?
        }
        RedisValue::Array(items) => {
            let table = lua.create_table_with_capacity(items.len(), 0)?;
            for (index, item) in items.into_iter().enumerate() {
                table.raw_set(index + 1, reply_to_lua(lua, item, depth + 1)?)?;
            }
            Value::Table(table)
        }
        RedisValue::Set(members) => {
            let inner = lua.create_table()?;
            for member in members {
                inner.raw_set(reply_to_lua(lua, member, depth + 1)?, true)?;
            }
            single("set", Value::Table(inner))?
        }
        RedisValue::Map(pairs) => {
            let inner = lua.create_table()?;
            for (field, value) in pairs {
                let field = reply_to_lua(lua, field, depth + 1)?;
                inner.raw_set(field, reply_to_lua(lua, value, depth + 1)?)?;
            }
            single("map", Value::Table(inner))?
        }
    })
}

/// A script's return value as a reply (`luaReplyToRedisReply`); `resp` is the script's
/// `redis.setresp` version, which decides how booleans answer.
pub(super) fn lua_to_reply(value: &Value, resp: u8, depth: usize) -> RedisValue {
    if depth > NESTING_MAX {
        return RedisValue::Error(b"ERR reached lua stack limit".to_vec());
    }
    match value {
        Value::String(s) => RedisValue::Bulk(s.as_bytes().to_vec()),
        Value::Boolean(b) if resp == 3 => RedisValue::Boolean(*b),
        Value::Boolean(true) => RedisValue::Integer(1),
        Value::Boolean(false) => RedisValue::Null,
        Value::Integer(i) => RedisValue::Integer(*i),
        // C's cast, saturating where C's is undefined.
        #[allow(clippy::cast_possible_truncation)]
        Value::Number(n) => RedisValue::Integer(*n as i64),
        Value::Table(table) => table_to_reply(table, resp, depth),
        _ => RedisValue::Null,
    }
}

fn table_to_reply(table: &Table, resp: u8, depth: usize) -> RedisValue {
    let field = |name: &str| table.raw_get::<Value>(name).unwrap_or(Value::Nil);
    if let Value::String(text) = field("err") {
        let text = one_line(&text.as_bytes());
        return match field(PASSED_MARK) {
            Value::Boolean(true) => RedisValue::PassedError(text),
            _ => RedisValue::Error(text),
        };
    }
    if let Value::String(text) = field("ok") {
        return RedisValue::Status(one_line(&text.as_bytes()));
    }
    if let Value::Integer(_) | Value::Number(_) = field("double") {
        let number = match field("double") {
            Value::Integer(i) => i as f64,
            Value::Number(n) => n,
            _ => 0.0,
        };
        return RedisValue::Double(number);
    }
    if let Value::String(text) = field("big_number") {
        return RedisValue::BigNumber(one_line(&text.as_bytes()));
    }
    if let Value::Table(verbatim) = field("verbatim_string") {
        let format = verbatim.raw_get::<Value>("format").unwrap_or(Value::Nil);
        let text = verbatim.raw_get::<Value>("string").unwrap_or(Value::Nil);
        if let (Value::String(format), Value::String(text)) = (format, text) {
            return RedisValue::Verbatim {
                format: format.as_bytes().to_vec(),
                text: text.as_bytes().to_vec(),
            };
        }
    }
    if let Value::Table(map) = field("map") {
        let pairs = map.pairs::<Value, Value>().filter_map(Result::ok);
        return RedisValue::Map(
            pairs
                .map(|(k, v)| {
                    (
                        lua_to_reply(&k, resp, depth + 1),
                        lua_to_reply(&v, resp, depth + 1),
                    )
                })
                .collect(),
        );
    }
    if let Value::Table(set) = field("set") {
        let members = set.pairs::<Value, Value>().filter_map(Result::ok);
        return RedisValue::Set(
            members
                .map(|(k, _)| lua_to_reply(&k, resp, depth + 1))
                .collect(),
        );
    }
    let mut items = Vec::new();
    for index in 1.. {
        let item = table.raw_get::<Value>(index).unwrap_or(Value::Nil);
        if item.is_nil() {
            break;
        }
        items.push(lua_to_reply(&item, resp, depth + 1));
    }
    RedisValue::Array(items)
}

/// Redis's replies never carry a line break inside a status or an error.
fn one_line(bytes: &[u8]) -> Vec<u8> {
    bytes
        .iter()
        .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b })
        .collect()
}

/// The reply of a script that raised `error` (the error handler's table, or a value the
/// handler could not build one for).
pub(super) fn script_error(error: &Value, sha: &str) -> RedisValue {
    let Value::Table(table) = error else {
        let message = match error {
            Value::String(s) => s.to_string_lossy(),
            _ => "execution failure".to_owned(),
        };
        return super::run_error(sha, &message);
    };
    let text = |name: &str| match table.raw_get::<Value>(name).unwrap_or(Value::Nil) {
        Value::String(s) => Some(s.to_string_lossy()),
        Value::Integer(i) => Some(i.to_string()),
        Value::Number(n) => Some(format_number(n)),
        _ => None,
    };
    let mut message = text("err").unwrap_or_default();
    if let (Some(source), Some(line)) = (text("source"), text("line")) {
        message = format!("{message} script: {sha}, on {source}:{line}.");
    }
    let message = one_line(message.as_bytes());
    match table.raw_get::<Value>(PASSED_MARK) {
        Ok(Value::Boolean(true)) => RedisValue::PassedError(message),
        _ => RedisValue::Error(message),
    }
}

/// Lua's message of an mlua error, without mlua's wrapping and traceback.
pub(super) fn error_text(error: &mlua::Error) -> String {
    let text = match error {
        mlua::Error::SyntaxError { message, .. } => message.clone(),
        mlua::Error::RuntimeError(m) | mlua::Error::MemoryError(m) => m.clone(),
        mlua::Error::CallbackError { cause, .. } => return error_text(cause),
        mlua::Error::WithContext { cause, .. } => return error_text(cause),
        other => other.to_string(),
    };
    match text.find("\nstack traceback:") {
        Some(end) => text[..end].to_owned(),
        None => text,
    }
}
