//! The host-side value model exchanged with Lua.

/// A value crossing the boundary between the server and a UDF: arguments,
/// bin values, record keys and results.
///
/// It mirrors the `as_val` kinds that Aerospike's Lua runtime converts:
/// Lua integers become [`Value::Int`], Lua floats [`Value::Float`], Lua
/// strings [`Value::Str`] (or [`Value::Bytes`] when they are not UTF-8), and
/// the `list`, `map`, `bytes` and `geojson` userdata their namesakes.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// No value; as a bin value it removes the bin.
    Nil,
    /// A boolean.
    Bool(bool),
    /// A 64-bit signed integer.
    Int(i64),
    /// A double.
    Float(f64),
    /// A UTF-8 string.
    Str(String),
    /// A byte blob.
    Bytes(Vec<u8>),
    /// An ordered list.
    List(Vec<Value>),
    /// A map, as its entries in insertion order (keys are unique).
    Map(Vec<(Value, Value)>),
    /// A GeoJSON document, as its text.
    GeoJson(String),
}

impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::Int(v)
    }
}

impl From<&str> for Value {
    fn from(v: &str) -> Self {
        Value::Str(v.to_owned())
    }
}

impl From<String> for Value {
    fn from(v: String) -> Self {
        Value::Str(v)
    }
}

impl From<bool> for Value {
    fn from(v: bool) -> Self {
        Value::Bool(v)
    }
}

impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Value::Float(v)
    }
}
