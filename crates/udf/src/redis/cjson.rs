//! Redis's `cjson` library: `cjson.encode` writes JSON as lua-cjson 2.1 does (numbers with
//! `%.14g`, `/` escaped, an empty table as `{}`, sparse arrays refused), `cjson.decode` reads
//! JSON with serde_json (`null` is `cjson.null`). `cjson.encode_keep_buffer` takes and answers
//! its setting as lua-cjson's does; encoding writes into a fresh buffer either way.
//! `cjson.encode_invalid_numbers` decides what NaN and the infinities become: an error (off,
//! the default), `nan`, `inf` and `-inf` (on), or `null`.
//! `cjson.encode_max_depth` and `cjson.decode_max_depth` set how deep tables and JSON may nest
//! (lua-cjson's default, 1000), within [`NESTING_MAX`] levels whatever they say: the encoder
//! and the decoder recurse, and serde_json stops at 128 levels too.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU8, Ordering};

use mlua::{LightUserData, Lua, Table, Value, Variadic};

use super::{NESTING_MAX, library_function};

/// Largest key of an array that may be sparse without limit (lua-cjson's `encode_sparse_safe`).
const SPARSE_SAFE: i64 = 10;
/// A table whose largest key passes this many times its entries is "excessively sparse".
const SPARSE_RATIO: i64 = 2;

/// lua-cjson's default for both depth limits.
const DEPTH_MAX_DEFAULT: i64 = 1000;

/// `encode_invalid_numbers`' choices, by setting (lua-cjson's order).
const INVALID_NUMBERS: &[&str] = &["off", "on", "null"];

/// `encode_keep_buffer`'s choices.
const KEEP_BUFFER: &[&str] = &["off", "on"];

/// How `encode` writes, from the settings.
struct Encoding {
    max_depth: usize,
    /// An index in [`INVALID_NUMBERS`].
    invalid_numbers: u8,
}

/// The `cjson` functions: `encode`, `decode`, `encode_keep_buffer`,
/// `encode_invalid_numbers`, `encode_max_depth`, `decode_max_depth`, and `null`.
pub(super) fn table(lua: &Lua) -> mlua::Result<Table> {
    let cjson = lua.create_table()?;
    let keep_buffer = Arc::new(AtomicU8::new(1));
    let invalid_numbers = Arc::new(AtomicU8::new(0));
    for (name, setting, choices) in [
        ("encode_keep_buffer", &keep_buffer, KEEP_BUFFER),
        ("encode_invalid_numbers", &invalid_numbers, INVALID_NUMBERS),
    ] {
        let setting = Arc::clone(setting);
        cjson.raw_set(
            name,
            library_function(lua, move |lua, options: Variadic<Value>| {
                enum_option(lua, (name, choices), &setting, &options)
            })?,
        )?;
    }
    let encode_max_depth = Arc::new(AtomicI64::new(DEPTH_MAX_DEFAULT));
    let decode_max_depth = Arc::new(AtomicI64::new(DEPTH_MAX_DEFAULT));
    for (name, setting) in [
        ("encode_max_depth", &encode_max_depth),
        ("decode_max_depth", &decode_max_depth),
    ] {
        let setting = Arc::clone(setting);
        cjson.raw_set(
            name,
            library_function(lua, move |_, options: Variadic<Value>| {
                depth_option(name, &setting, &options)
            })?,
        )?;
    }
    cjson.raw_set(
        "encode",
        library_function(lua, move |lua, value: Value| {
            let mut out = Vec::new();
            let encoding = Encoding {
                max_depth: effective_depth(&encode_max_depth),
                invalid_numbers: invalid_numbers.load(Ordering::Relaxed),
            };
            encode(&mut out, &value, 0, &encoding).map_err(mlua::Error::runtime)?;
            lua.create_string(out)
        })?,
    )?;
    cjson.raw_set(
        "decode",
        library_function(lua, move |lua, text: mlua::LuaString| {
            let text = text.as_bytes();
            if let Some((depth, character)) = too_deep(&text, effective_depth(&decode_max_depth)) {
                return Err(mlua::Error::runtime(format!(
                    "Found too many nested data structures ({depth}) at character {character}"
                )));
            }
            let json: serde_json::Value = serde_json::from_slice(&text).map_err(|e| {
                mlua::Error::runtime(format!("Expected value but found invalid token: {e}"))
            })?;
            decode(lua, json)
        })?,
    )?;
    cjson.raw_set("null", null())?;
    Ok(cjson)
}

/// A depth setting as the coders apply it: at most [`NESTING_MAX`].
fn effective_depth(setting: &AtomicI64) -> usize {
    usize::try_from(setting.load(Ordering::Relaxed))
        .unwrap_or(1)
        .min(NESTING_MAX)
}

/// `cjson.encode_max_depth([depth])` and `cjson.decode_max_depth([depth])`: set the setting
/// when given (an integer from 1 to 2^31 - 1), and answer it (lua-cjson's
/// `json_integer_option`).
fn depth_option(name: &str, setting: &AtomicI64, options: &[Value]) -> mlua::Result<i64> {
    if options.len() > 1 {
        return Err(mlua::Error::runtime(format!(
            "bad argument #2 to '{name}' (found too many arguments)"
        )));
    }
    let depth = match options.first() {
        None | Some(Value::Nil) => return Ok(setting.load(Ordering::Relaxed)),
        Some(Value::Integer(depth)) => Some(*depth),
        #[allow(clippy::cast_possible_truncation)]
        Some(Value::Number(depth)) => Some(*depth as i64),
        Some(Value::String(text)) => text.to_str().ok().and_then(|t| t.trim().parse().ok()),
        Some(_) => None,
    };
    let Some(depth) = depth else {
        let got = options.first().map_or("no value", Value::type_name);
        return Err(mlua::Error::runtime(format!(
            "bad argument #1 to '{name}' (number expected, got {got})"
        )));
    };
    if !(1..=i64::from(i32::MAX)).contains(&depth) {
        return Err(mlua::Error::runtime(format!(
            "bad argument #1 to '{name}' (expected integer between 1 and {})",
            i32::MAX
        )));
    }
    setting.store(depth, Ordering::Relaxed);
    Ok(depth)
}

/// Where JSON `text` first opens more than `max_depth` objects and arrays inside each other:
/// the depth it reaches and lua-cjson's character number (just past the bracket), looking
/// past brackets in strings. `None` when it stays within.
fn too_deep(text: &[u8], max_depth: usize) -> Option<(usize, usize)> {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for (position, &byte) in text.iter().enumerate() {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                if depth > max_depth {
                    return Some((depth, position + 1));
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}

/// `cjson.encode_keep_buffer([setting])` and `cjson.encode_invalid_numbers([setting])`: set
/// the setting when given (a boolean, or one of its `choices` by name), and answer it, as a
/// boolean when it is off or on, else by name (lua-cjson's `json_enum_option`).
fn enum_option(
    lua: &Lua,
    (name, choices): (&str, &[&str]),
    setting: &AtomicU8,
    options: &[Value],
) -> mlua::Result<Value> {
    if options.len() > 1 {
        return Err(mlua::Error::runtime(format!(
            "bad argument #2 to '{name}' (found too many arguments)"
        )));
    }
    match options.first() {
        None | Some(Value::Nil) => {}
        Some(Value::Boolean(on)) => setting.store(u8::from(*on), Ordering::Relaxed),
        Some(other) => {
            let text = match other {
                Value::String(text) => text.to_string_lossy(),
                Value::Integer(i) => i.to_string(),
                Value::Number(n) => n.to_string(),
                other => other.type_name().to_owned(),
            };
            let Some(index) = choices.iter().position(|choice| *choice == text) else {
                return Err(mlua::Error::runtime(format!(
                    "bad argument #1 to '{name}' (invalid option '{text}')"
                )));
            };
            setting.store(u8::try_from(index).unwrap_or(0), Ordering::Relaxed);
        }
    }
    Ok(match setting.load(Ordering::Relaxed) {
        index @ (0 | 1) => Value::Boolean(index == 1),
        index => Value::String(lua.create_string(choices[usize::from(index)])?),
    })
}

/// `cjson.null`: a light userdata holding NULL, as lua-cjson's.
fn null() -> Value {
    Value::LightUserData(LightUserData(std::ptr::null_mut()))
}

/// Appends `value` as JSON; `depth` tables enclose it, and at most `encoding.max_depth` may.
fn encode(
    out: &mut Vec<u8>,
    value: &Value,
    depth: usize,
    encoding: &Encoding,
) -> Result<(), String> {
    match value {
        Value::Nil => out.extend_from_slice(b"null"),
        Value::LightUserData(data) if data.0.is_null() => out.extend_from_slice(b"null"),
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        #[allow(clippy::cast_precision_loss)]
        Value::Integer(i) => number(out, *i as f64, encoding)?,
        Value::Number(n) => number(out, *n, encoding)?,
        Value::String(s) => string(out, &s.as_bytes()),
        Value::Table(table) => {
            if depth >= encoding.max_depth {
                return Err(format!(
                    "Cannot serialise, excessive nesting ({})",
                    depth + 1
                ));
            }
            match array_length(table)? {
                Some(length) => array(out, table, length, (depth, encoding))?,
                None => object(out, table, (depth, encoding))?,
            }
        }
        other => {
            return Err(format!(
                "Cannot serialise {}: type not supported",
                other.type_name()
            ));
        }
    }
    Ok(())
}

/// The array length when every key is a positive integer (and the array not too sparse);
/// `None` for an object (an empty table is one).
fn array_length(table: &Table) -> Result<Option<i64>, String> {
    let (mut max, mut items) = (0i64, 0i64);
    for pair in table.pairs::<Value, Value>() {
        let (key, _) = pair.map_err(|e| e.to_string())?;
        let index = match key {
            Value::Integer(i) => i,
            #[allow(clippy::cast_possible_truncation)]
            Value::Number(n) if n.fract() == 0.0 => n as i64,
            _ => return Ok(None),
        };
        if index < 1 {
            return Ok(None);
        }
        max = max.max(index);
        items += 1;
    }
    if max > items.saturating_mul(SPARSE_RATIO) && max > SPARSE_SAFE {
        return Err("Cannot serialise table: excessively sparse array".to_owned());
    }
    Ok((max > 0).then_some(max))
}

fn array(
    out: &mut Vec<u8>,
    table: &Table,
    length: i64,
    (depth, encoding): (usize, &Encoding),
) -> Result<(), String> {
    out.push(b'[');
    for index in 1..=length {
        if index > 1 {
            out.push(b',');
        }
        let item: Value = table.raw_get(index).map_err(|e| e.to_string())?;
        encode(out, &item, depth + 1, encoding)?;
    }
    out.push(b']');
    Ok(())
}

fn object(
    out: &mut Vec<u8>,
    table: &Table,
    (depth, encoding): (usize, &Encoding),
) -> Result<(), String> {
    out.push(b'{');
    let mut first = true;
    for pair in table.pairs::<Value, Value>() {
        let (key, value) = pair.map_err(|e| e.to_string())?;
        if !first {
            out.push(b',');
        }
        first = false;
        match &key {
            Value::String(s) => string(out, &s.as_bytes()),
            Value::Integer(_) | Value::Number(_) => {
                out.push(b'"');
                encode(out, &key, depth + 1, encoding)?;
                out.push(b'"');
            }
            _ => return Err("Cannot serialise table: table key must be a number or string".into()),
        }
        out.push(b':');
        encode(out, &value, depth + 1, encoding)?;
    }
    out.push(b'}');
    Ok(())
}

fn number(out: &mut Vec<u8>, value: f64, encoding: &Encoding) -> Result<(), String> {
    if !value.is_finite() {
        let text: &[u8] = match encoding.invalid_numbers {
            0 => return Err("Cannot serialise number: must not be NaN or Inf".to_owned()),
            // `%.14g`'s words, as the lua-cjson Redis bundles writes them.
            1 if value.is_nan() => b"nan",
            1 if value < 0.0 => b"-inf",
            1 => b"inf",
            _ => b"null",
        };
        out.extend_from_slice(text);
        return Ok(());
    }
    out.extend_from_slice(format_g14(value).as_bytes());
    Ok(())
}

/// C's `%.14g`.
fn format_g14(value: f64) -> String {
    const PRECISION: i32 = 14;
    if value == 0.0 {
        return if value.is_sign_negative() { "-0" } else { "0" }.to_owned();
    }
    let scientific = format!("{:.*e}", (PRECISION - 1) as usize, value);
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    if !(-4..PRECISION).contains(&exponent) {
        let mantissa = trim_fraction(mantissa);
        let sign = if exponent < 0 { '-' } else { '+' };
        return format!("{mantissa}e{sign}{:02}", exponent.abs());
    }
    let decimals = usize::try_from(PRECISION - 1 - exponent).unwrap_or(0);
    trim_fraction(&format!("{value:.decimals$}")).to_owned()
}

fn trim_fraction(text: &str) -> &str {
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.')
    } else {
        text
    }
}

fn string(out: &mut Vec<u8>, bytes: &[u8]) {
    out.push(b'"');
    for &b in bytes {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            b'\x08' => out.extend_from_slice(b"\\b"),
            b'\x0c' => out.extend_from_slice(b"\\f"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0..=0x1f => out.extend_from_slice(format!("\\u{b:04x}").as_bytes()),
            _ => out.push(b),
        }
    }
    out.push(b'"');
}

/// JSON as Lua: objects and arrays as tables, `null` as `cjson.null`; numbers are Lua numbers
/// (integral ones within 2^53 as integers, which print as Lua 5.1's do).
fn decode(lua: &Lua, json: serde_json::Value) -> mlua::Result<Value> {
    Ok(match json {
        serde_json::Value::Null => null(),
        serde_json::Value::Bool(b) => Value::Boolean(b),
        serde_json::Value::Number(n) => {
            let float = n.as_f64().unwrap_or(0.0);
            #[allow(clippy::cast_possible_truncation)]
            let integral = float as i64;
            if float.fract() == 0.0 && float.abs() < 9_007_199_254_740_992.0 {
                Value::Integer(integral)
            } else {
                Value::Number(float)
            }
        }
        serde_json::Value::String(s) => Value::String(lua.create_string(s)?),
        serde_json::Value::Array(items) => {
            let table = lua.create_table_with_capacity(items.len(), 0)?;
            for (index, item) in items.into_iter().enumerate() {
                table.raw_set(index + 1, decode(lua, item)?)?;
            }
            Value::Table(table)
        }
        serde_json::Value::Object(fields) => {
            let table = lua.create_table_with_capacity(0, fields.len())?;
            for (name, item) in fields {
                table.raw_set(name, decode(lua, item)?)?;
            }
            Value::Table(table)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::{format_g14, too_deep};

    #[test]
    fn nesting_is_measured_past_brackets_in_strings() {
        assert_eq!(
            too_deep(br#"{"obj": {"array": [1,2,3,4]}}"#, 1),
            Some((2, 9))
        );
        assert_eq!(too_deep(br#"{"obj": {"array": [1,2,3,4]}}"#, 3), None);
        assert_eq!(too_deep(br#"["[[\"[", {}]"#, 1), Some((2, 11)));
    }

    #[test]
    fn numbers_print_as_c_percent_fourteen_g() {
        assert_eq!(format_g14(1.0), "1");
        assert_eq!(format_g14(0.1), "0.1");
        assert_eq!(format_g14(1.5e20), "1.5e+20");
        assert_eq!(format_g14(123_456_789_012_345.0), "1.2345678901234e+14");
        assert_eq!(format_g14(0.000_01), "1e-05");
        assert_eq!(format_g14(-2.5), "-2.5");
        assert_eq!(format_g14(100.0), "100");
    }
}
