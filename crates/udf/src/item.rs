//! Lua-side values: shared containers behind the `list`, `map`, `bytes` and
//! `geojson` userdata, and their conversions to and from [`Value`].
//!
//! Invariant: no code holds two container locks at once. Every operation
//! that reads one container while touching another (or the same one) first
//! takes a shallow snapshot, so `list.concat(l, l)` or a list that contains
//! itself cannot deadlock; conversions bound the nesting depth so cycles end
//! in an error rather than a stack overflow.

use std::sync::Arc;

use indexmap::IndexMap;
use mlua::{AnyUserData, Lua};
use parking_lot::Mutex;

use crate::Value;

/// Deepest nesting converted; deeper (or cyclic) values are refused.
pub(crate) const MAX_DEPTH: usize = 64;

/// A list shared between Lua handles.
pub(crate) type SharedList = Arc<Mutex<Vec<Item>>>;
/// A map shared between Lua handles: key identity -> (key, value).
pub(crate) type SharedMap = Arc<Mutex<IndexMap<Key, (Item, Item)>>>;
/// A byte blob shared between Lua handles.
pub(crate) type SharedBytes = Arc<Mutex<Vec<u8>>>;

/// A value as Lua code holds it: scalars by value, containers shared.
#[derive(Debug, Clone)]
pub(crate) enum Item {
    Nil,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Bytes(SharedBytes),
    List(SharedList),
    Map(SharedMap),
    GeoJson(String),
}

/// A hashable, deep snapshot of an [`Item`], used as a map key identity.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Key {
    Nil,
    Bool(bool),
    Int(i64),
    Float(u64),
    Str(String),
    Bytes(Vec<u8>),
    List(Vec<Key>),
    Map(Vec<(Key, Key)>),
    GeoJson(String),
}

/// The userdata behind Lua `list` values.
pub(crate) struct LuaList(pub(crate) SharedList);
/// The userdata behind Lua `map` values.
pub(crate) struct LuaMap(pub(crate) SharedMap);
/// The userdata behind Lua `bytes` values.
pub(crate) struct LuaBytes(pub(crate) SharedBytes);
/// The userdata behind Lua `geojson` values.
pub(crate) struct LuaGeo(pub(crate) String);

fn too_deep() -> mlua::Error {
    mlua::Error::runtime("value nesting too deep (or cyclic)")
}

impl Item {
    /// Builds the Lua-side twin of a host value.
    pub(crate) fn from_value(value: Value) -> Item {
        match value {
            Value::Nil => Item::Nil,
            Value::Bool(b) => Item::Bool(b),
            Value::Int(i) => Item::Int(i),
            Value::Float(f) => Item::Float(f),
            Value::Str(s) => Item::Str(s),
            Value::Bytes(b) => Item::Bytes(Arc::new(Mutex::new(b))),
            Value::List(l) => {
                let items = l.into_iter().map(Item::from_value).collect();
                Item::List(Arc::new(Mutex::new(items)))
            }
            Value::Map(m) => Item::Map(Arc::new(Mutex::new(map_from_values(m)))),
            Value::GeoJson(g) => Item::GeoJson(g),
        }
    }

    /// Deep-copies this item into a host value.
    pub(crate) fn to_value(&self) -> mlua::Result<Value> {
        self.to_value_at(0)
    }

    fn to_value_at(&self, depth: usize) -> mlua::Result<Value> {
        if depth > MAX_DEPTH {
            return Err(too_deep());
        }
        Ok(match self {
            Item::Nil => Value::Nil,
            Item::Bool(b) => Value::Bool(*b),
            Item::Int(i) => Value::Int(*i),
            Item::Float(f) => Value::Float(*f),
            Item::Str(s) => Value::Str(s.clone()),
            Item::Bytes(b) => Value::Bytes(b.lock().clone()),
            Item::List(l) => {
                let snapshot = l.lock().clone();
                let out: mlua::Result<Vec<Value>> =
                    snapshot.iter().map(|i| i.to_value_at(depth + 1)).collect();
                Value::List(out?)
            }
            Item::Map(m) => {
                let snapshot: Vec<(Item, Item)> = m.lock().values().cloned().collect();
                let mut out = Vec::with_capacity(snapshot.len());
                for (k, v) in &snapshot {
                    out.push((k.to_value_at(depth + 1)?, v.to_value_at(depth + 1)?));
                }
                Value::Map(out)
            }
            Item::GeoJson(g) => Value::GeoJson(g.clone()),
        })
    }

    /// The map-key identity of this item (a deep snapshot).
    pub(crate) fn key(&self) -> mlua::Result<Key> {
        self.key_at(0)
    }

    fn key_at(&self, depth: usize) -> mlua::Result<Key> {
        if depth > MAX_DEPTH {
            return Err(too_deep());
        }
        Ok(match self {
            Item::Nil => Key::Nil,
            Item::Bool(b) => Key::Bool(*b),
            Item::Int(i) => Key::Int(*i),
            Item::Float(f) => Key::Float(f.to_bits()),
            Item::Str(s) => Key::Str(s.clone()),
            Item::Bytes(b) => Key::Bytes(b.lock().clone()),
            Item::List(l) => {
                let snapshot = l.lock().clone();
                let keys: mlua::Result<Vec<Key>> =
                    snapshot.iter().map(|i| i.key_at(depth + 1)).collect();
                Key::List(keys?)
            }
            Item::Map(m) => {
                let snapshot: Vec<(Item, Item)> = m.lock().values().cloned().collect();
                let mut out = Vec::with_capacity(snapshot.len());
                for (k, v) in &snapshot {
                    out.push((k.key_at(depth + 1)?, v.key_at(depth + 1)?));
                }
                Key::Map(out)
            }
            Item::GeoJson(g) => Key::GeoJson(g.clone()),
        })
    }

    /// Converts a Lua value; None for kinds Aerospike does not convert
    /// (tables, functions, threads, foreign userdata), as `mod_lua_toval`.
    pub(crate) fn from_lua(value: &mlua::Value) -> Option<Item> {
        match value {
            mlua::Value::Nil => Some(Item::Nil),
            mlua::Value::Boolean(b) => Some(Item::Bool(*b)),
            mlua::Value::Integer(i) => Some(Item::Int(*i)),
            mlua::Value::Number(n) => Some(Item::Float(*n)),
            mlua::Value::String(s) => Some(string_item(&s.as_bytes())),
            mlua::Value::UserData(ud) => from_userdata(ud),
            _ => None,
        }
    }

    /// Pushes this item into Lua: scalars by value, containers as userdata
    /// sharing the same storage.
    pub(crate) fn into_lua(self, lua: &Lua) -> mlua::Result<mlua::Value> {
        Ok(match self {
            Item::Nil => mlua::Value::Nil,
            Item::Bool(b) => mlua::Value::Boolean(b),
            Item::Int(i) => mlua::Value::Integer(i),
            Item::Float(f) => mlua::Value::Number(f),
            Item::Str(s) => mlua::Value::String(lua.create_string(s)?),
            Item::Bytes(b) => mlua::Value::UserData(lua.create_userdata(LuaBytes(b))?),
            Item::List(l) => mlua::Value::UserData(lua.create_userdata(LuaList(l))?),
            Item::Map(m) => mlua::Value::UserData(lua.create_userdata(LuaMap(m))?),
            Item::GeoJson(g) => mlua::Value::UserData(lua.create_userdata(LuaGeo(g))?),
        })
    }

    /// Aerospike-like text for `tostring` of containers.
    pub(crate) fn describe(&self, depth: usize) -> String {
        if depth > MAX_DEPTH {
            return "...".to_owned();
        }
        match self {
            Item::Nil => "NIL".to_owned(),
            Item::Bool(b) => b.to_string(),
            Item::Int(i) => i.to_string(),
            Item::Float(f) => f.to_string(),
            Item::Str(s) => s.clone(),
            Item::Bytes(b) => describe_bytes(&b.lock()),
            Item::List(l) => {
                let snapshot = l.lock().clone();
                let parts: Vec<String> = snapshot.iter().map(|i| i.describe(depth + 1)).collect();
                format!("List({})", parts.join(", "))
            }
            Item::Map(m) => {
                let snapshot: Vec<(Item, Item)> = m.lock().values().cloned().collect();
                let parts: Vec<String> = snapshot
                    .iter()
                    .map(|(k, v)| format!("{}->{}", k.describe(depth + 1), v.describe(depth + 1)))
                    .collect();
                format!("Map({})", parts.join(", "))
            }
            Item::GeoJson(g) => g.clone(),
        }
    }
}

/// Hex text of a byte blob, as `tostring(bytes)`.
pub(crate) fn describe_bytes(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02X}")).collect()
}

/// A Lua string as an item: a string when UTF-8, else bytes.
pub(crate) fn string_item(raw: &[u8]) -> Item {
    match std::str::from_utf8(raw) {
        Ok(s) => Item::Str(s.to_owned()),
        Err(_) => Item::Bytes(Arc::new(Mutex::new(raw.to_vec()))),
    }
}

fn from_userdata(ud: &AnyUserData) -> Option<Item> {
    if let Ok(l) = ud.borrow::<LuaList>() {
        return Some(Item::List(l.0.clone()));
    }
    if let Ok(m) = ud.borrow::<LuaMap>() {
        return Some(Item::Map(m.0.clone()));
    }
    if let Ok(b) = ud.borrow::<LuaBytes>() {
        return Some(Item::Bytes(b.0.clone()));
    }
    if let Ok(g) = ud.borrow::<LuaGeo>() {
        return Some(Item::GeoJson(g.0.clone()));
    }
    None
}

fn map_from_values(entries: Vec<(Value, Value)>) -> IndexMap<Key, (Item, Item)> {
    let mut map = IndexMap::with_capacity(entries.len());
    for (k, v) in entries {
        let k = Item::from_value(k);
        // Fresh items own no shared cycle, so their keys always convert.
        if let Ok(id) = k.key() {
            map.insert(id, (k, Item::from_value(v)));
        }
    }
    map
}
