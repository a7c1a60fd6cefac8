//! Redis's `cmsgpack` library (lua-cmsgpack 0.4, as Redis bundles it): `pack`, `unpack`,
//! `unpack_one` and `unpack_limit`, with its choices of encoding:
//! - integers, and floats with an integral value, in the smallest integer format; other
//!   floats as a 32-bit float when that is exact, else a 64-bit one;
//! - a table whose keys are exactly 1..n is an array (an empty table too), any other a map (in
//!   the order `next` gives); tables nested [`PACK_NESTING_MAX`] deep are packed as nil, so
//!   self-containing tables end;
//! - strings as msgpack strings; nil, and anything else (functions, userdata), as nil.
//!
//! Unpacking reads msgpack's every format but the extension types, which are "bad data
//! format", as lua-cmsgpack's. Unlike lua-cmsgpack, it refuses input nested deeper than
//! [`UNPACK_NESTING_MAX`] (the decoder recurses) and an array or map header that declares more
//! elements than bytes remain (each takes at least one), so that no allocation or recursion
//! follows from what the input merely declares.

use mlua::{Lua, MultiValue, Table, Value};
use rmp::Marker;

use super::library_function;

/// lua-cmsgpack's `LUACMSGPACK_MAX_NESTING`.
const PACK_NESTING_MAX: usize = 16;

/// How deep unpacked arrays and maps may nest (Osprey's bound; see the module docs).
const UNPACK_NESTING_MAX: usize = 128;

/// The `cmsgpack` functions.
pub(super) fn table(lua: &Lua) -> mlua::Result<Table> {
    let cmsgpack = lua.create_table()?;
    cmsgpack.raw_set("pack", library_function(lua, pack)?)?;
    cmsgpack.raw_set(
        "unpack",
        library_function(lua, |lua, text: mlua::LuaString| {
            unpack_full(lua, &text, 0, 0, false)
        })?,
    )?;
    cmsgpack.raw_set(
        "unpack_one",
        library_function(
            lua,
            |lua, (text, offset): (mlua::LuaString, Option<i64>)| {
                unpack_full(lua, &text, 1, offset.unwrap_or(0), true)
            },
        )?,
    )?;
    cmsgpack.raw_set(
        "unpack_limit",
        library_function(
            lua,
            |lua, (text, limit, offset): (mlua::LuaString, i64, Option<i64>)| {
                unpack_full(lua, &text, limit, offset.unwrap_or(0), true)
            },
        )?,
    )?;
    Ok(cmsgpack)
}

/// `cmsgpack.pack(value, ...)`: the values packed one after the other.
fn pack(lua: &Lua, values: MultiValue) -> mlua::Result<mlua::LuaString> {
    if values.is_empty() {
        return Err(mlua::Error::runtime(
            "bad argument #0 to 'pack' (MessagePack pack needs input.)",
        ));
    }
    let mut out = Vec::new();
    for value in &values {
        encode(&mut out, value, 0)?;
    }
    lua.create_string(out)
}

fn encode(out: &mut Vec<u8>, value: &Value, level: usize) -> mlua::Result<()> {
    match value {
        Value::String(text) => {
            let text = text.as_bytes();
            let length = u32::try_from(text.len())
                .map_err(|_| mlua::Error::runtime("string too long to pack"))?;
            write(rmp::encode::write_str_len(out, length))?;
            out.extend_from_slice(&text);
        }
        Value::Boolean(b) => write(rmp::encode::write_bool(out, *b))?,
        Value::Integer(i) => write(rmp::encode::write_sint(out, *i))?,
        Value::Number(n) => encode_number(out, *n)?,
        Value::Table(table) if level < PACK_NESTING_MAX => encode_table(out, table, level)?,
        _ => write(rmp::encode::write_nil(out))?,
    }
    Ok(())
}

/// lua-cmsgpack's `mp_encode_lua_number`: an integral value as an integer, else a float.
fn encode_number(out: &mut Vec<u8>, n: f64) -> mlua::Result<()> {
    // The range where a cast to i64 is exact (C's cast is undefined past it).
    #[allow(clippy::cast_precision_loss)]
    let in_range = (i64::MIN as f64..i64::MAX as f64).contains(&n);
    #[allow(clippy::cast_possible_truncation)]
    if in_range && n.fract() == 0.0 {
        return write(rmp::encode::write_sint(out, n as i64));
    }
    #[allow(clippy::cast_possible_truncation)]
    let single = n as f32;
    if f64::from(single) == n {
        write(rmp::encode::write_f32(out, single))
    } else {
        write(rmp::encode::write_f64(out, n))
    }
}

fn encode_table(out: &mut Vec<u8>, table: &Table, level: usize) -> mlua::Result<()> {
    match array_length(table)? {
        Some(length) => {
            write(rmp::encode::write_array_len(out, length))?;
            for index in 1..=length {
                let item: Value = table.raw_get(index)?;
                encode(out, &item, level + 1)?;
            }
        }
        None => {
            let pairs: Vec<(Value, Value)> = table.pairs().collect::<mlua::Result<_>>()?;
            let count = u32::try_from(pairs.len())
                .map_err(|_| mlua::Error::runtime("table too large to pack"))?;
            write(rmp::encode::write_map_len(out, count))?;
            for (key, value) in &pairs {
                encode(out, key, level + 1)?;
                encode(out, value, level + 1)?;
            }
        }
    }
    Ok(())
}

/// lua-cmsgpack's `table_is_an_array`: the length when the keys are exactly 1..n (0 for an
/// empty table), else `None`.
fn array_length(table: &Table) -> mlua::Result<Option<u32>> {
    let (mut count, mut max) = (0u64, 0u64);
    for pair in table.pairs::<Value, Value>() {
        let (key, _) = pair?;
        let index = match key {
            Value::Integer(i) if i > 0 => i.unsigned_abs(),
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            Value::Number(n) if n > 0.0 && n.fract() == 0.0 && n < u32::MAX.into() => n as u64,
            _ => return Ok(None),
        };
        max = max.max(index);
        count += 1;
    }
    Ok((max == count).then(|| u32::try_from(count).ok()).flatten())
}

fn write<T, E: std::fmt::Display>(result: Result<T, E>) -> mlua::Result<()> {
    result
        .map(|_| ())
        .map_err(|e| mlua::Error::runtime(e.to_string()))
}

/// Why unpacking stopped.
enum UnpackError {
    /// lua-cmsgpack's `MP_CUR_ERROR_EOF`.
    Eof,
    /// lua-cmsgpack's `MP_CUR_ERROR_BADFMT`.
    BadFormat,
}

impl From<UnpackError> for mlua::Error {
    fn from(error: UnpackError) -> mlua::Error {
        mlua::Error::runtime(match error {
            UnpackError::Eof => "Missing bytes in input.",
            UnpackError::BadFormat => "Bad data format in input.",
        })
    }
}

/// lua-cmsgpack's `mp_unpack_full`: up to `limit` values from `offset` (every value for 0 and
/// 0, returned alone); with `with_offset`, the offset of what follows (-1 at the end) first.
fn unpack_full(
    lua: &Lua,
    text: &mlua::LuaString,
    limit: i64,
    offset: i64,
    with_offset: bool,
) -> mlua::Result<MultiValue> {
    let bytes = text.as_bytes();
    if offset < 0 || limit < 0 {
        return Err(mlua::Error::runtime(format!(
            "Invalid request to unpack with offset of {offset} and limit of {}.",
            bytes.len()
        )));
    }
    let start = usize::try_from(offset).unwrap_or(usize::MAX);
    if start > bytes.len() {
        return Err(mlua::Error::runtime(format!(
            "Start offset {offset} greater than input length {}.",
            bytes.len()
        )));
    }
    let decode_all = limit == 0 && offset == 0;
    let limit = if decode_all { i64::MAX } else { limit };
    let mut cursor = &bytes[start..];
    let mut values = Vec::new();
    while !cursor.is_empty() && (values.len() as i64) < limit {
        values.push(decode(lua, &mut cursor, 0)?);
    }
    if !decode_all && with_offset {
        let next = match cursor.len() {
            0 => -1,
            left => i64::try_from(bytes.len() - left).unwrap_or(i64::MAX),
        };
        values.insert(0, Value::Integer(next));
    }
    Ok(MultiValue::from_iter(values))
}

fn take<'a>(cursor: &mut &'a [u8], count: usize) -> Result<&'a [u8], UnpackError> {
    if cursor.len() < count {
        return Err(UnpackError::Eof);
    }
    let (taken, rest) = cursor.split_at(count);
    *cursor = rest;
    Ok(taken)
}

fn be_uint(cursor: &mut &[u8], width: usize) -> Result<u64, UnpackError> {
    Ok(take(cursor, width)?
        .iter()
        .fold(0u64, |value, &byte| (value << 8) | u64::from(byte)))
}

/// One value from the head of `cursor` (lua-cmsgpack's `mp_decode_to_lua_type`).
fn decode(lua: &Lua, cursor: &mut &[u8], depth: usize) -> mlua::Result<Value> {
    let marker = Marker::from_u8(take(cursor, 1)?[0]);
    #[allow(clippy::cast_possible_wrap, clippy::cast_possible_truncation)]
    let value = match marker {
        Marker::Null => Value::Nil,
        Marker::True => Value::Boolean(true),
        Marker::False => Value::Boolean(false),
        Marker::FixPos(n) => Value::Integer(n.into()),
        Marker::FixNeg(n) => Value::Integer(n.into()),
        Marker::U8 => Value::Integer(be_uint(cursor, 1)? as i64),
        Marker::U16 => Value::Integer(be_uint(cursor, 2)? as i64),
        Marker::U32 => Value::Integer(be_uint(cursor, 4)? as i64),
        Marker::U64 => {
            let n = be_uint(cursor, 8)?;
            #[allow(clippy::cast_precision_loss)]
            i64::try_from(n).map_or(Value::Number(n as f64), Value::Integer)
        }
        Marker::I8 => Value::Integer((be_uint(cursor, 1)? as u8 as i8).into()),
        Marker::I16 => Value::Integer((be_uint(cursor, 2)? as u16 as i16).into()),
        Marker::I32 => Value::Integer((be_uint(cursor, 4)? as u32 as i32).into()),
        Marker::I64 => Value::Integer(be_uint(cursor, 8)? as i64),
        Marker::F32 => Value::Number(f32::from_bits(be_uint(cursor, 4)? as u32).into()),
        Marker::F64 => Value::Number(f64::from_bits(be_uint(cursor, 8)?)),
        Marker::FixStr(n) => bytes_value(lua, cursor, n.into())?,
        Marker::Str8
        | Marker::Bin8
        | Marker::Str16
        | Marker::Bin16
        | Marker::Str32
        | Marker::Bin32 => {
            let length = be_uint(cursor, length_bytes(marker))?;
            bytes_value(lua, cursor, length)?
        }
        Marker::FixArray(n) => array_value(lua, cursor, n.into(), depth)?,
        Marker::Array16 | Marker::Array32 => {
            let count = be_uint(cursor, length_bytes(marker))?;
            array_value(lua, cursor, count, depth)?
        }
        Marker::FixMap(n) => map_value(lua, cursor, n.into(), depth)?,
        Marker::Map16 | Marker::Map32 => {
            let count = be_uint(cursor, length_bytes(marker))?;
            map_value(lua, cursor, count, depth)?
        }
        _ => return Err(UnpackError::BadFormat.into()),
    };
    Ok(value)
}

/// How many bytes the length (or element count) after `marker` takes.
fn length_bytes(marker: Marker) -> usize {
    match marker {
        Marker::Str8 | Marker::Bin8 => 1,
        Marker::Str16 | Marker::Bin16 | Marker::Array16 | Marker::Map16 => 2,
        _ => 4,
    }
}

fn bytes_value(lua: &Lua, cursor: &mut &[u8], length: u64) -> mlua::Result<Value> {
    let length = usize::try_from(length).map_err(|_| UnpackError::Eof)?;
    Ok(Value::String(lua.create_string(take(cursor, length)?)?))
}

/// Checks that `count` elements of `per_element` bytes at least could follow, within depth.
fn check_aggregate(cursor: &[u8], count: u64, per_element: u64, depth: usize) -> mlua::Result<()> {
    if depth >= UNPACK_NESTING_MAX {
        return Err(UnpackError::BadFormat.into());
    }
    if count.saturating_mul(per_element) > cursor.len() as u64 {
        return Err(UnpackError::Eof.into());
    }
    Ok(())
}

fn array_value(lua: &Lua, cursor: &mut &[u8], count: u64, depth: usize) -> mlua::Result<Value> {
    check_aggregate(cursor, count, 1, depth)?;
    let table = lua.create_table()?;
    for index in 1..=count {
        table.raw_set(index, decode(lua, cursor, depth + 1)?)?;
    }
    Ok(Value::Table(table))
}

fn map_value(lua: &Lua, cursor: &mut &[u8], count: u64, depth: usize) -> mlua::Result<Value> {
    check_aggregate(cursor, count, 2, depth)?;
    let table = lua.create_table()?;
    for _ in 0..count {
        let key = decode(lua, cursor, depth + 1)?;
        let value = decode(lua, cursor, depth + 1)?;
        // lua_settable with a nil key raises; a NaN key too.
        table.set(key, value)?;
    }
    Ok(Value::Table(table))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packed_hex(lua: &Lua, script: &str) -> String {
        let cmsgpack = table(lua).expect("the library builds");
        lua.globals().set("cmsgpack", cmsgpack).expect("a global");
        let packed: mlua::LuaString = lua.load(script).eval().expect("the script runs");
        packed
            .as_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    #[test]
    fn values_pack_as_lua_cmsgpack_packs_them() {
        let lua = Lua::new();
        let cases = [
            ("return cmsgpack.pack(0.1)", "cb3fb999999999999a"),
            ("return cmsgpack.pack(-1099511627776)", "d3ffffff0000000000"),
            ("return cmsgpack.pack(2^40)", "cf0000010000000000"),
            ("return cmsgpack.pack(1.5, 127, -32)", "ca3fc000007fe0"),
            ("return cmsgpack.pack({})", "90"),
            ("return cmsgpack.pack({1, 'a'})", "9201a161"),
            ("return cmsgpack.pack({[2] = 1})", "810201"),
        ];
        for (script, hex) in cases {
            assert_eq!(packed_hex(&lua, script), hex, "{script}");
        }
    }

    #[test]
    fn a_self_containing_table_ends_in_nil_at_the_nesting_limit() {
        let lua = Lua::new();
        let deep = packed_hex(&lua, "local a = {} a[1] = a return cmsgpack.pack(a)");
        assert_eq!(deep, format!("{}c0", "91".repeat(PACK_NESTING_MAX)));
    }

    #[test]
    fn unpacking_returns_what_was_packed_and_refuses_bad_input() {
        let lua = Lua::new();
        lua.globals()
            .set("cmsgpack", table(&lua).expect("the library builds"))
            .expect("a global");
        let checks = r#"
            local packed = cmsgpack.pack({a = 1, b = {1, 2, 'x'}}, 'next', -5.25)
            local t, s, n = cmsgpack.unpack(packed)
            assert(t.a == 1 and t.b[3] == 'x' and s == 'next' and n == -5.25)
            local offset, one = cmsgpack.unpack_one(packed, 0)
            assert(one.b[2] == 2 and offset > 0)
            local last_offset, a, b = cmsgpack.unpack_limit(packed, 2, offset)
            assert(a == 'next' and b == -5.25 and last_offset == -1)
            assert(not pcall(cmsgpack.unpack, '\xdd\xff\xff\xff\xff'))
            assert(tostring(select(2, pcall(cmsgpack.unpack, '\xc7'))):find('Bad data format'))
            assert(tostring(select(2, pcall(cmsgpack.unpack, '\xa5ab'))):find('Missing bytes'))
            assert(not pcall(cmsgpack.pack))
            return true
        "#;
        let passed: bool = lua.load(checks).eval().expect("the checks pass");
        assert!(passed);
    }

    #[test]
    fn deep_nesting_is_refused_rather_than_recursed_into() {
        let lua = Lua::new();
        lua.globals()
            .set("cmsgpack", table(&lua).expect("the library builds"))
            .expect("a global");
        let deep: Vec<u8> = std::iter::repeat_n(0x91, 100_000).chain([0xc0]).collect();
        let text = lua.create_string(&deep).expect("a string");
        let unpack: mlua::Function = lua
            .load("return function(s) return pcall(cmsgpack.unpack, s) end")
            .eval()
            .expect("a function");
        let (ok, _): (bool, Value) = unpack.call(text).expect("pcall returns");
        assert!(!ok);
    }
}
