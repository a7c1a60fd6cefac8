//! Aerospike's Lua value types: the `list`, `map`, `bytes` and `geojson`
//! globals (constructors through `__call`, functions taking the value as
//! first argument, as in `mod_lua_list.c` & co.) and their userdata.

use std::sync::Arc;

use indexmap::IndexMap;
use mlua::{AnyUserData, Function, Lua, MetaMethod, Table, UserData, UserDataMethods};
use parking_lot::Mutex;

use crate::guard::{SLOT_COST, charge};
use crate::item::{
    Item, LuaBytes, LuaGeo, LuaList, LuaMap, SharedBytes, SharedList, SharedMap, describe_bytes,
    string_item,
};

/// Largest capacity hint honoured by `list.create(n)` / `bytes(n)`.
const MAX_CAPACITY_HINT: usize = 4096;

/// Installs `list`, `map`, `bytes` and `geojson` into the globals.
pub(crate) fn register(lua: &Lua) -> mlua::Result<()> {
    let globals = lua.globals();
    globals.set("list", list_table(lua)?)?;
    globals.set("map", map_table(lua)?)?;
    globals.set("bytes", bytes_table(lua)?)?;
    globals.set("geojson", geojson_table(lua)?)?;
    Ok(())
}

/// The growth cost of storing `item` in a container.
fn cost(item: &Item) -> usize {
    SLOT_COST
        + match item {
            Item::Str(s) | Item::GeoJson(s) => s.len(),
            _ => 0,
        }
}

/// Converts a value to be stored in a container; unsupported kinds (Lua
/// tables, functions) are refused, as Aerospike's `valid_list_val`.
fn storable(lua: &Lua, value: &mlua::Value) -> mlua::Result<Option<Item>> {
    let Some(item) = Item::from_lua(value) else {
        return Ok(None);
    };
    charge(lua, cost(&item))?;
    Ok(Some(item))
}

fn list_of(ud: &AnyUserData) -> mlua::Result<SharedList> {
    Ok(ud.borrow::<LuaList>()?.0.clone())
}

fn map_of(ud: &AnyUserData) -> mlua::Result<SharedMap> {
    Ok(ud.borrow::<LuaMap>()?.0.clone())
}

fn bytes_of(ud: &AnyUserData) -> mlua::Result<SharedBytes> {
    Ok(ud.borrow::<LuaBytes>()?.0.clone())
}

fn new_list(lua: &Lua, items: Vec<Item>) -> mlua::Result<AnyUserData> {
    lua.create_userdata(LuaList(Arc::new(Mutex::new(items))))
}

fn new_map(lua: &Lua) -> mlua::Result<(AnyUserData, SharedMap)> {
    let shared: SharedMap = Arc::new(Mutex::new(IndexMap::new()));
    Ok((lua.create_userdata(LuaMap(shared.clone()))?, shared))
}

/// A 1-based Lua position as a 0-based index, None when below 1.
fn index0(pos: i64) -> Option<usize> {
    usize::try_from(pos).ok()?.checked_sub(1)
}

/// A Lua iterator function over a snapshot of items.
fn iterator(lua: &Lua, items: Vec<Item>) -> mlua::Result<Function> {
    let mut it = items.into_iter();
    lua.create_function_mut(move |lua, ()| match it.next() {
        Some(item) => item.into_lua(lua),
        None => Ok(mlua::Value::Nil),
    })
}

/// A Lua iterator function over a snapshot of map entries.
fn pair_iterator(lua: &Lua, entries: Vec<(Item, Item)>) -> mlua::Result<Function> {
    let mut it = entries.into_iter();
    lua.create_function_mut(move |lua, ()| match it.next() {
        Some((k, v)) => Ok((k.into_lua(lua)?, v.into_lua(lua)?)),
        None => Ok((mlua::Value::Nil, mlua::Value::Nil)),
    })
}

impl UserData for LuaList {
    fn add_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        methods.add_meta_method(MetaMethod::Index, |lua, this, pos: i64| {
            let item = index0(pos).and_then(|i| this.0.lock().get(i).cloned());
            item.unwrap_or(Item::Nil).into_lua(lua)
        });
        methods.add_meta_method(
            MetaMethod::NewIndex,
            |lua, this, (pos, value): (i64, mlua::Value)| {
                if let (Some(i), Some(item)) = (index0(pos), storable(lua, &value)?) {
                    list_set(lua, &this.0, i, item)?;
                }
                Ok(())
            },
        );
        methods.add_meta_method(MetaMethod::Len, |_, this, ()| Ok(this.0.lock().len()));
        methods.add_meta_method(MetaMethod::ToString, |_, this, ()| {
            Ok(Item::List(this.0.clone()).describe(0))
        });
    }
}

/// `l[i] = v`: sets, padding with nils past the end.
fn list_set(lua: &Lua, list: &SharedList, i: usize, item: Item) -> mlua::Result<()> {
    let len = list.lock().len();
    if i >= len {
        charge(lua, (i + 1 - len).saturating_mul(SLOT_COST))?;
    }
    let mut guard = list.lock();
    if i >= guard.len() {
        guard.resize(i + 1, Item::Nil);
    }
    guard[i] = item;
    Ok(())
}

fn list_table(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    let create = lua.create_function(|lua, cap: Option<i64>| {
        let cap = usize::try_from(cap.unwrap_or(0)).unwrap_or(0);
        new_list(lua, Vec::with_capacity(cap.min(MAX_CAPACITY_HINT)))
    })?;
    t.set("create", create.clone())?;
    t.set("new", create)?;
    t.set("append", lua.create_function(list_append)?)?;
    t.set("prepend", lua.create_function(list_prepend)?)?;
    t.set("insert", lua.create_function(list_insert)?)?;
    t.set("remove", lua.create_function(list_remove)?)?;
    t.set("concat", lua.create_function(list_concat)?)?;
    t.set("trim", lua.create_function(list_trim)?)?;
    t.set("take", lua.create_function(list_take)?)?;
    t.set("drop", lua.create_function(list_drop)?)?;
    t.set(
        "size",
        lua.create_function(|_, l: AnyUserData| Ok(list_of(&l)?.lock().len()))?,
    )?;
    t.set(
        "iterator",
        lua.create_function(|lua, l: AnyUserData| iterator(lua, list_of(&l)?.lock().clone()))?,
    )?;
    t.set(
        "tostring",
        lua.create_function(|_, l: AnyUserData| Ok(Item::List(list_of(&l)?).describe(0)))?,
    )?;
    let mt = lua.create_table()?;
    mt.set("__call", lua.create_function(list_cons)?)?;
    t.set_metatable(Some(mt))?;
    Ok(t)
}

/// `list()` / `list{...}`: a new list from a table's sequence.
fn list_cons(lua: &Lua, (_, init): (Table, Option<Table>)) -> mlua::Result<AnyUserData> {
    let mut items = Vec::new();
    if let Some(init) = init {
        for value in init.sequence_values::<mlua::Value>() {
            if let Some(item) = storable(lua, &value?)? {
                items.push(item);
            }
        }
    }
    new_list(lua, items)
}

fn list_append(lua: &Lua, (l, v): (AnyUserData, mlua::Value)) -> mlua::Result<()> {
    let list = list_of(&l)?;
    if let Some(item) = storable(lua, &v)? {
        list.lock().push(item);
    }
    Ok(())
}

fn list_prepend(lua: &Lua, (l, v): (AnyUserData, mlua::Value)) -> mlua::Result<()> {
    let list = list_of(&l)?;
    if let Some(item) = storable(lua, &v)? {
        list.lock().insert(0, item);
    }
    Ok(())
}

fn list_insert(lua: &Lua, (l, pos, v): (AnyUserData, i64, mlua::Value)) -> mlua::Result<()> {
    let list = list_of(&l)?;
    let (Some(i), Some(item)) = (index0(pos), storable(lua, &v)?) else {
        return Ok(());
    };
    let len = list.lock().len();
    if i >= len {
        return list_set(lua, &list, i, item);
    }
    list.lock().insert(i, item);
    Ok(())
}

fn list_remove(_: &Lua, (l, pos): (AnyUserData, i64)) -> mlua::Result<()> {
    let list = list_of(&l)?;
    let mut guard = list.lock();
    if let Some(i) = index0(pos).filter(|i| *i < guard.len()) {
        guard.remove(i);
    }
    Ok(())
}

/// `list.concat(l1, l2)`: appends l2's items to l1.
fn list_concat(lua: &Lua, (l1, l2): (AnyUserData, AnyUserData)) -> mlua::Result<()> {
    let dest = list_of(&l1)?;
    let items = list_of(&l2)?.lock().clone();
    charge(lua, items.iter().map(cost).sum())?;
    dest.lock().extend(items);
    Ok(())
}

/// `list.trim(l, i)`: removes items from position i on.
fn list_trim(_: &Lua, (l, pos): (AnyUserData, i64)) -> mlua::Result<()> {
    if let Some(i) = index0(pos) {
        list_of(&l)?.lock().truncate(i);
    }
    Ok(())
}

/// `list.take(l, n)`: a new list of the first n items.
fn list_take(lua: &Lua, (l, n): (AnyUserData, i64)) -> mlua::Result<AnyUserData> {
    let n = usize::try_from(n).unwrap_or(0);
    let items: Vec<Item> = list_of(&l)?.lock().iter().take(n).cloned().collect();
    charge(lua, items.len().saturating_mul(SLOT_COST))?;
    new_list(lua, items)
}

/// `list.drop(l, n)`: a new list without the first n items.
fn list_drop(lua: &Lua, (l, n): (AnyUserData, i64)) -> mlua::Result<AnyUserData> {
    let n = usize::try_from(n).unwrap_or(0);
    let items: Vec<Item> = list_of(&l)?.lock().iter().skip(n).cloned().collect();
    charge(lua, items.len().saturating_mul(SLOT_COST))?;
    new_list(lua, items)
}

impl UserData for LuaMap {
    fn add_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        methods.add_meta_method(MetaMethod::Index, |lua, this, key: mlua::Value| {
            map_get(lua, &this.0, &key)
        });
        methods.add_meta_method(
            MetaMethod::NewIndex,
            |lua, this, (key, value): (mlua::Value, mlua::Value)| {
                map_set(lua, &this.0, &key, &value)
            },
        );
        methods.add_meta_method(MetaMethod::Len, |_, this, ()| Ok(this.0.lock().len()));
        methods.add_meta_method(MetaMethod::ToString, |_, this, ()| {
            Ok(Item::Map(this.0.clone()).describe(0))
        });
    }
}

fn map_get(lua: &Lua, map: &SharedMap, key: &mlua::Value) -> mlua::Result<mlua::Value> {
    let Some(key) = Item::from_lua(key) else {
        return Ok(mlua::Value::Nil);
    };
    let id = key.key()?;
    let found = map.lock().get(&id).map(|(_, v)| v.clone());
    found.unwrap_or(Item::Nil).into_lua(lua)
}

/// `m[k] = v`; a nil value removes the key.
fn map_set(lua: &Lua, map: &SharedMap, key: &mlua::Value, value: &mlua::Value) -> mlua::Result<()> {
    let Some(k) = Item::from_lua(key) else {
        return Ok(());
    };
    let id = k.key()?;
    match Item::from_lua(value) {
        None => {}
        Some(Item::Nil) => {
            map.lock().shift_remove(&id);
        }
        Some(v) => {
            charge(lua, cost(&k) + cost(&v))?;
            map.lock().insert(id, (k, v));
        }
    }
    Ok(())
}

fn map_table(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    let create = lua.create_function(|lua, _: Option<i64>| Ok(new_map(lua)?.0))?;
    t.set("create", create.clone())?;
    t.set("new", create)?;
    let pairs = lua.create_function(|lua, m: AnyUserData| {
        let entries: Vec<(Item, Item)> = map_of(&m)?.lock().values().cloned().collect();
        pair_iterator(lua, entries)
    })?;
    t.set("pairs", pairs.clone())?;
    t.set("iterator", pairs)?;
    t.set(
        "keys",
        lua.create_function(|lua, m: AnyUserData| {
            let keys = map_of(&m)?
                .lock()
                .values()
                .map(|(k, _)| k.clone())
                .collect();
            iterator(lua, keys)
        })?,
    )?;
    t.set(
        "values",
        lua.create_function(|lua, m: AnyUserData| {
            let values = map_of(&m)?
                .lock()
                .values()
                .map(|(_, v)| v.clone())
                .collect();
            iterator(lua, values)
        })?,
    )?;
    t.set(
        "remove",
        lua.create_function(|lua, (m, k): (AnyUserData, mlua::Value)| {
            map_set(lua, &map_of(&m)?, &k, &mlua::Value::Nil)
        })?,
    )?;
    t.set(
        "size",
        lua.create_function(|_, m: AnyUserData| Ok(map_of(&m)?.lock().len()))?,
    )?;
    t.set(
        "tostring",
        lua.create_function(|_, m: AnyUserData| Ok(Item::Map(map_of(&m)?).describe(0)))?,
    )?;
    let mt = lua.create_table()?;
    mt.set("__call", lua.create_function(map_cons)?)?;
    t.set_metatable(Some(mt))?;
    Ok(t)
}

/// `map()` / `map{k=v}` / `map(t, size)`: a new map from a table's pairs.
fn map_cons(
    lua: &Lua,
    (_, init, _): (Table, Option<Table>, Option<i64>),
) -> mlua::Result<AnyUserData> {
    let (ud, shared) = new_map(lua)?;
    if let Some(init) = init {
        for pair in init.pairs::<mlua::Value, mlua::Value>() {
            let (k, v) = pair?;
            map_set(lua, &shared, &k, &v)?;
        }
    }
    Ok(ud)
}

impl UserData for LuaBytes {
    fn add_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        methods.add_meta_method(MetaMethod::Index, |_, this, pos: i64| {
            Ok(get_byte(&this.0, pos))
        });
        methods.add_meta_method(MetaMethod::NewIndex, |lua, this, (pos, v): (i64, i64)| {
            set_byte(lua, &this.0, pos, v).map(|_| ())
        });
        methods.add_meta_method(MetaMethod::Len, |_, this, ()| Ok(this.0.lock().len()));
        methods.add_meta_method(MetaMethod::ToString, |_, this, ()| {
            Ok(describe_bytes(&this.0.lock()))
        });
    }
}

fn get_byte(bytes: &SharedBytes, pos: i64) -> Option<u8> {
    index0(pos).and_then(|i| bytes.lock().get(i).copied())
}

/// Writes `data` at 0-based `at`, growing (zero-filled) as needed.
fn write_at(lua: &Lua, bytes: &SharedBytes, at: usize, data: &[u8]) -> mlua::Result<()> {
    let end = at.saturating_add(data.len());
    let len = bytes.lock().len();
    if end > len {
        charge(lua, end - len)?;
    }
    let mut guard = bytes.lock();
    if end > guard.len() {
        guard.resize(end, 0);
    }
    guard[at..end].copy_from_slice(data);
    Ok(())
}

fn set_byte(lua: &Lua, bytes: &SharedBytes, pos: i64, v: i64) -> mlua::Result<bool> {
    let (Some(i), Ok(v)) = (index0(pos), u8::try_from(v)) else {
        return Ok(false);
    };
    write_at(lua, bytes, i, &[v])?;
    Ok(true)
}

fn append(lua: &Lua, bytes: &SharedBytes, data: &[u8]) -> mlua::Result<bool> {
    let at = bytes.lock().len();
    write_at(lua, bytes, at, data)?;
    Ok(true)
}

fn bytes_table(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set(
        "size",
        lua.create_function(|_, b: AnyUserData| Ok(bytes_of(&b)?.lock().len()))?,
    )?;
    t.set(
        "set_size",
        lua.create_function(|lua, (b, n): (AnyUserData, i64)| {
            let Ok(n) = usize::try_from(n) else {
                return Ok(false);
            };
            let bytes = bytes_of(&b)?;
            let len = bytes.lock().len();
            charge(lua, n.saturating_sub(len))?;
            bytes.lock().resize(n, 0);
            Ok(true)
        })?,
    )?;
    t.set(
        "get_byte",
        lua.create_function(|_, (b, pos): (AnyUserData, i64)| Ok(get_byte(&bytes_of(&b)?, pos)))?,
    )?;
    t.set(
        "set_byte",
        lua.create_function(|lua, (b, pos, v): (AnyUserData, i64, i64)| {
            set_byte(lua, &bytes_of(&b)?, pos, v)
        })?,
    )?;
    t.set(
        "append_byte",
        lua.create_function(|lua, (b, v): (AnyUserData, i64)| match u8::try_from(v) {
            Ok(v) => append(lua, &bytes_of(&b)?, &[v]),
            Err(_) => Ok(false),
        })?,
    )?;
    t.set(
        "append_string",
        lua.create_function(|lua, (b, s): (AnyUserData, mlua::LuaString)| {
            append(lua, &bytes_of(&b)?, &s.as_bytes())
        })?,
    )?;
    t.set(
        "append_bytes",
        lua.create_function(
            |lua, (b, other, n): (AnyUserData, AnyUserData, Option<i64>)| {
                let mut data = bytes_of(&other)?.lock().clone();
                if let Some(n) = n.and_then(|n| usize::try_from(n).ok()) {
                    data.truncate(n);
                }
                append(lua, &bytes_of(&b)?, &data)
            },
        )?,
    )?;
    t.set(
        "get_string",
        lua.create_function(|lua, (b, pos, n): (AnyUserData, i64, i64)| {
            match slice(&bytes_of(&b)?, pos, n) {
                Some(data) => string_item(&data).into_lua(lua),
                None => Ok(mlua::Value::Nil),
            }
        })?,
    )?;
    t.set(
        "get_bytes",
        lua.create_function(|lua, (b, pos, n): (AnyUserData, i64, i64)| {
            match slice(&bytes_of(&b)?, pos, n) {
                Some(data) => Ok(Some(
                    lua.create_userdata(LuaBytes(Arc::new(Mutex::new(data))))?,
                )),
                None => Ok(None),
            }
        })?,
    )?;
    register_ints(lua, &t)?;
    let mt = lua.create_table()?;
    mt.set(
        "__call",
        lua.create_function(|lua, (_, cap): (Table, Option<i64>)| {
            let cap = usize::try_from(cap.unwrap_or(0)).unwrap_or(0);
            let data = Vec::with_capacity(cap.min(MAX_CAPACITY_HINT));
            lua.create_userdata(LuaBytes(Arc::new(Mutex::new(data))))
        })?,
    )?;
    t.set_metatable(Some(mt))?;
    Ok(t)
}

/// `n` bytes from 1-based `pos`, None when out of range.
fn slice(bytes: &SharedBytes, pos: i64, n: i64) -> Option<Vec<u8>> {
    let start = index0(pos)?;
    let n = usize::try_from(n).ok()?;
    let guard = bytes.lock();
    guard.get(start..start.checked_add(n)?).map(<[u8]>::to_vec)
}

/// `get_int16/32/64[_be|_le]`, `set_...` and `append_...`.
fn register_ints(lua: &Lua, t: &Table) -> mlua::Result<()> {
    for width in [2usize, 4, 8] {
        let bits = width * 8;
        for (suffix, big) in [("", true), ("_be", true), ("_le", false)] {
            t.set(
                format!("get_int{bits}{suffix}"),
                int_getter(lua, width, big)?,
            )?;
            t.set(
                format!("set_int{bits}{suffix}"),
                int_setter(lua, width, big)?,
            )?;
            t.set(
                format!("append_int{bits}{suffix}"),
                int_appender(lua, width, big)?,
            )?;
        }
    }
    Ok(())
}

fn encode(v: i64, width: usize, big: bool) -> Vec<u8> {
    let all = if big {
        v.to_be_bytes()
    } else {
        v.to_le_bytes()
    };
    if big {
        all[8 - width..].to_vec()
    } else {
        all[..width].to_vec()
    }
}

fn decode(data: &[u8], big: bool) -> i64 {
    let width = data.len();
    let mut buf = [0u8; 8];
    if big {
        buf[8 - width..].copy_from_slice(data);
        i64::from_be_bytes(buf) << (64 - width * 8) >> (64 - width * 8)
    } else {
        buf[..width].copy_from_slice(data);
        i64::from_le_bytes(buf) << (64 - width * 8) >> (64 - width * 8)
    }
}

fn int_getter(lua: &Lua, width: usize, big: bool) -> mlua::Result<Function> {
    lua.create_function(move |_, (b, pos): (AnyUserData, i64)| {
        let width = i64::try_from(width).unwrap_or(8);
        Ok(slice(&bytes_of(&b)?, pos, width).map(|d| decode(&d, big)))
    })
}

fn int_setter(lua: &Lua, width: usize, big: bool) -> mlua::Result<Function> {
    lua.create_function(move |lua, (b, pos, v): (AnyUserData, i64, i64)| {
        let Some(at) = index0(pos) else {
            return Ok(false);
        };
        write_at(lua, &bytes_of(&b)?, at, &encode(v, width, big))?;
        Ok(true)
    })
}

fn int_appender(lua: &Lua, width: usize, big: bool) -> mlua::Result<Function> {
    lua.create_function(move |lua, (b, v): (AnyUserData, i64)| {
        append(lua, &bytes_of(&b)?, &encode(v, width, big))
    })
}

impl UserData for LuaGeo {
    fn add_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        methods.add_meta_method(MetaMethod::ToString, |_, this, ()| Ok(this.0.clone()));
    }
}

fn geojson_table(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    let mt = lua.create_table()?;
    mt.set(
        "__call",
        lua.create_function(|lua, (_, text): (Table, String)| {
            charge(lua, text.len())?;
            lua.create_userdata(LuaGeo(text))
        })?,
    )?;
    t.set_metatable(Some(mt))?;
    Ok(t)
}
