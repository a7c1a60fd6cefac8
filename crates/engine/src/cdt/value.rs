//! Collection values: msgpack as Aerospike packs it inside LIST and MAP particles and CDT op
//! arguments, decoded into a tree, ordered as Aerospike orders it, and packed back.
//!
//! Aerospike's twists on msgpack (see the protocol reference, "Msgpack conventions"):
//! - a msgpack str or bin carries the particle type in its first byte: 3 string, 23 GeoJSON,
//!   anything else bytes (4 for a plain blob);
//! - an ordered list or map starts with an extension element of size 0 whose type byte holds
//!   the order flags (for a map, the pair ext + nil), counted in the header;
//! - fixext1 of type 0xff holds the comparison specials: 0x00 wildcard, 0x01 infinity;
//! - every integer, unsigned 64-bit ones included, is an i64 (Aerospike reads u64 bits as one).
//!
//! Invariants:
//! - Decoding never allocates more than the bytes it was given justify: each declared count is
//!   checked against the bytes left (every value takes at least one byte) before any vector is
//!   sized, and nesting deeper than [`DEPTH_MAX`] is refused, so hostile input cannot exhaust
//!   memory or the stack.
//! - [`compare`] is Aerospike's order: by type (nil, bool, integer, string, list, map, bytes,
//!   double, GeoJSON, other extensions, infinity), then by value; a wildcard equals anything,
//!   and a wildcard inside a list or map ends the comparison as equal.
//! - Packing is canonical (the smallest header that fits, doubles as 8 bytes), so a value
//!   decoded and packed again may differ in bytes from what a client sent, never in meaning.
//!   [`canonical_end`] accepts exactly the bytes that decode and pack back to themselves, so
//!   that a caller may keep them as they are instead.
//! - Reading in place ([`Scalar`], [`compare_packed`]) orders as [`compare`] orders the
//!   decoded values.

use std::cmp::Ordering;

use model::{ParticleType, ResultCode};

/// Nesting deeper than this is refused, as Aerospike refuses it (`MSGPACK_MAX_DEPTH`).
pub(crate) const DEPTH_MAX: usize = 64;

/// The first byte of a str or bin payload that makes it a string.
pub const KIND_STRING: u8 = 3;
/// ... a plain blob.
pub const KIND_BLOB: u8 = 4;
/// ... a GeoJSON text.
pub const KIND_GEOJSON: u8 = 23;

/// The extension type of the comparison specials, and their payloads.
const EXT_COMPARE: u8 = 0xff;
const COMPARE_WILDCARD: u8 = 0x00;
const COMPARE_INFINITY: u8 = 0x01;

/// One collection value.
#[derive(Clone, Debug)]
pub enum Value {
    /// Nil.
    Nil,
    /// A boolean.
    Bool(bool),
    /// An integer (unsigned 64-bit ones too, as their bits).
    Int(i64),
    /// A double.
    Float(f64),
    /// A str or bin payload after its kind byte ([`KIND_STRING`], [`KIND_BLOB`], ...).
    Bytes {
        /// The kind byte: a particle type.
        kind: u8,
        /// The bytes after it.
        data: Vec<u8>,
    },
    /// A list.
    List(List),
    /// A map.
    Map(Map),
    /// An extension other than the specials and the order headers, kept as sent.
    Ext {
        /// The extension's type byte.
        kind: u8,
        /// Its payload.
        data: Vec<u8>,
    },
    /// Matches any value in a comparison (range ends, value lists).
    Wildcard,
    /// Greater than any value (open range ends).
    Infinity,
}

/// A list: its elements and whether it is kept sorted.
#[derive(Clone, Debug, Default)]
pub struct List {
    /// Whether it is kept sorted.
    pub ordered: bool,
    /// Its elements.
    pub items: Vec<Value>,
}

/// A map's order: by insertion (unordered), by key, or by key then value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MapOrder {
    /// In insertion order.
    #[default]
    Unordered,
    /// By key.
    KeyOrdered,
    /// By key, then value.
    KeyValueOrdered,
    /// A KEY_VALUE result's entries, in the order the op selected them (Aerospike's
    /// `AS_PACKED_MAP_FLAG_PRESERVE_ORDER`, 0x08): packed with a header so that clients
    /// keep that order, otherwise an unordered map.
    PreserveOrder,
}

impl MapOrder {
    /// The order an attribute or header flag byte names (bit 0: by key; bit 1: and value;
    /// a preserve-order result header, 0x08, read back is an unordered map).
    pub(crate) fn from_flags(flags: u8) -> MapOrder {
        match flags & 0x03 {
            0 => MapOrder::Unordered,
            3 => MapOrder::KeyValueOrdered,
            _ => MapOrder::KeyOrdered,
        }
    }

    fn flags(self) -> u8 {
        match self {
            MapOrder::Unordered => 0,
            MapOrder::KeyOrdered => 1,
            MapOrder::KeyValueOrdered => 3,
            MapOrder::PreserveOrder => 0x08,
        }
    }

    /// Whether the entries are kept sorted by key: an ordered map (a preserve-order result
    /// is not one, as Aerospike's `map_is_k_ordered` says).
    pub fn is_key_sorted(self) -> bool {
        matches!(self, MapOrder::KeyOrdered | MapOrder::KeyValueOrdered)
    }
}

/// A map: its entries, in key order unless unordered (then in insertion order).
#[derive(Clone, Debug, Default)]
pub struct Map {
    /// Its order.
    pub order: MapOrder,
    /// Its entries, in that order.
    pub entries: Vec<(Value, Value)>,
}

impl Value {
    /// A string value.
    pub fn string(text: &[u8]) -> Value {
        Value::Bytes {
            kind: KIND_STRING,
            data: text.to_vec(),
        }
    }

    /// The rank of the value's type in Aerospike's order (`as_val_t`).
    fn type_rank(&self) -> u8 {
        match self {
            Value::Nil => 1,
            Value::Bool(_) => 2,
            Value::Int(_) => RANK_INT,
            Value::Bytes { kind, .. } => bytes_rank(*kind),
            Value::List(_) => 5,
            Value::Map(_) => 6,
            Value::Float(_) => 10,
            Value::Ext { .. } => 12,
            Value::Wildcard => 13,
            Value::Infinity => 14,
        }
    }

    /// The integer, if the value is one.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Value::Int(value) => Some(*value),
            _ => None,
        }
    }

    /// Whether the value holds a wildcard or infinity anywhere: such a value may select,
    /// never be stored.
    pub(crate) fn has_special(&self) -> bool {
        match self {
            Value::Wildcard | Value::Infinity => true,
            Value::List(list) => list.items.iter().any(Value::has_special),
            Value::Map(map) => map
                .entries
                .iter()
                .any(|(key, value)| key.has_special() || value.has_special()),
            _ => false,
        }
    }
}

/// The rank of an integer in Aerospike's order.
const RANK_INT: u8 = 3;

/// The rank of a str or bin payload of `kind` in Aerospike's order: strings, GeoJSON and
/// every other kind (blobs) each have their own.
fn bytes_rank(kind: u8) -> u8 {
    match kind {
        KIND_STRING => 4,
        KIND_GEOJSON => 11,
        _ => 9,
    }
}

/// Aerospike's order between two values (see the module's invariants).
pub fn compare(a: &Value, b: &Value) -> Ordering {
    if matches!(a, Value::Wildcard) || matches!(b, Value::Wildcard) {
        return Ordering::Equal;
    }
    let by_type = a.type_rank().cmp(&b.type_rank());
    if by_type != Ordering::Equal {
        return by_type;
    }
    match (a, b) {
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        (Value::Int(x), Value::Int(y)) => x.cmp(y),
        // NaN is neither less nor greater than anything, so it compares equal.
        (Value::Float(x), Value::Float(y)) => x.partial_cmp(y).unwrap_or(Ordering::Equal),
        (Value::Bytes { data: x, .. }, Value::Bytes { data: y, .. }) => x.cmp(y),
        (Value::List(x), Value::List(y)) => compare_lists(&x.items, &y.items),
        (Value::Map(x), Value::Map(y)) => compare_maps(x, y),
        (Value::Ext { kind: k1, data: d1 }, Value::Ext { kind: k2, data: d2 }) => {
            k1.cmp(k2).then_with(|| d1.cmp(d2))
        }
        _ => Ordering::Equal,
    }
}

/// Element by element; a wildcard element ends the comparison as equal; then the shorter
/// list first.
fn compare_lists(a: &[Value], b: &[Value]) -> Ordering {
    for (x, y) in a.iter().zip(b) {
        if matches!(x, Value::Wildcard) || matches!(y, Value::Wildcard) {
            return Ordering::Equal;
        }
        let order = compare(x, y);
        if order != Ordering::Equal {
            return order;
        }
    }
    a.len().cmp(&b.len())
}

/// The smaller map first; then entry by entry, key then value, in stored order.
fn compare_maps(a: &Map, b: &Map) -> Ordering {
    let by_size = a.entries.len().cmp(&b.entries.len());
    if by_size != Ordering::Equal {
        return by_size;
    }
    for ((k1, v1), (k2, v2)) in a.entries.iter().zip(&b.entries) {
        for (x, y) in [(k1, k2), (v1, v2)] {
            if matches!(x, Value::Wildcard) || matches!(y, Value::Wildcard) {
                return Ordering::Equal;
            }
            let order = compare(x, y);
            if order != Ordering::Equal {
                return order;
            }
        }
    }
    Ordering::Equal
}

/// Equality in Aerospike's order (a wildcard equals anything).
pub(crate) fn equal(a: &Value, b: &Value) -> bool {
    compare(a, b) == Ordering::Equal
}

// ---- decoding ----------------------------------------------------------------------------

/// Decodes `bytes`, which must hold exactly one value.
///
/// # Errors
/// PARAMETER for anything but one complete, well-formed value.
pub fn decode(bytes: &[u8]) -> Result<Value, ResultCode> {
    let mut reader = Reader { bytes, position: 0 };
    let value = reader.value(0)?;
    match reader.position == bytes.len() {
        true => Ok(value),
        false => Err(ResultCode::Parameter),
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    position: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, count: usize) -> Result<&'a [u8], ResultCode> {
        let end = self
            .position
            .checked_add(count)
            .filter(|&end| end <= self.bytes.len())
            .ok_or(ResultCode::Parameter)?;
        let taken = &self.bytes[self.position..end];
        self.position = end;
        Ok(taken)
    }

    fn byte(&mut self) -> Result<u8, ResultCode> {
        Ok(self.take(1)?[0])
    }

    fn uint(&mut self, size: usize) -> Result<u64, ResultCode> {
        Ok(self
            .take(size)?
            .iter()
            .fold(0_u64, |value, &byte| (value << 8) | u64::from(byte)))
    }

    /// A declared element count, refused when the bytes left cannot hold that many values.
    fn count(&mut self, size: usize, per_element: usize) -> Result<usize, ResultCode> {
        let count = self.uint(size)? as usize;
        Self::check_count(self, count, per_element)
    }

    fn check_count(&self, count: usize, per_element: usize) -> Result<usize, ResultCode> {
        let left = self.bytes.len() - self.position;
        match count.checked_mul(per_element) {
            Some(needed) if needed <= left => Ok(count),
            _ => Err(ResultCode::Parameter),
        }
    }

    fn value(&mut self, depth: usize) -> Result<Value, ResultCode> {
        if depth > DEPTH_MAX {
            return Err(ResultCode::Parameter);
        }
        let marker = self.byte()?;
        if let Some(number) = self.int_after(marker)? {
            return Ok(Value::Int(number));
        }
        if let Some(size) = self.payload_size_after(marker)? {
            return self.bytes_value(size);
        }
        Ok(match marker {
            0xc0 => Value::Nil,
            0xc2 => Value::Bool(false),
            0xc3 => Value::Bool(true),
            0xca => Value::Float(f64::from(f32::from_bits(self.uint(4)? as u32))),
            0xcb => Value::Float(f64::from_bits(self.uint(8)?)),
            0x90..=0x9f => {
                let count = self.check_count(usize::from(marker & 0x0f), 1)?;
                self.list(count, depth)?
            }
            0xdc => {
                let count = self.count(2, 1)?;
                self.list(count, depth)?
            }
            0xdd => {
                let count = self.count(4, 1)?;
                self.list(count, depth)?
            }
            0x80..=0x8f => {
                let count = self.check_count(usize::from(marker & 0x0f), 2)?;
                self.map(count, depth)?
            }
            0xde => {
                let count = self.count(2, 2)?;
                self.map(count, depth)?
            }
            0xdf => {
                let count = self.count(4, 2)?;
                self.map(count, depth)?
            }
            0xd4..=0xd8 => {
                let size = 1_usize << (marker - 0xd4);
                self.ext(size)?
            }
            0xc7 => {
                let size = self.uint(1)? as usize;
                self.ext(size)?
            }
            0xc8 => {
                let size = self.uint(2)? as usize;
                self.ext(size)?
            }
            0xc9 => {
                let size = self.uint(4)? as usize;
                self.ext(size)?
            }
            // 0xc1 is reserved.
            _ => return Err(ResultCode::Parameter),
        })
    }

    /// The integer an integer `marker` starts (its payload read), `None` for another marker.
    fn int_after(&mut self, marker: u8) -> Result<Option<i64>, ResultCode> {
        Ok(Some(match marker {
            0x00..=0x7f => i64::from(marker),
            0xe0..=0xff => i64::from(marker as i8),
            0xcc => self.uint(1)? as i64,
            0xcd => self.uint(2)? as i64,
            0xce => self.uint(4)? as i64,
            0xcf => self.uint(8)? as i64,
            0xd0 => i64::from(self.uint(1)? as u8 as i8),
            0xd1 => i64::from(self.uint(2)? as u16 as i16),
            0xd2 => i64::from(self.uint(4)? as u32 as i32),
            0xd3 => self.uint(8)? as i64,
            _ => return Ok(None),
        }))
    }

    /// The payload size a str or bin `marker` declares (its size field read), `None` for
    /// another marker.
    fn payload_size_after(&mut self, marker: u8) -> Result<Option<usize>, ResultCode> {
        Ok(Some(match marker {
            0xa0..=0xbf => usize::from(marker & 0x1f),
            0xc4 | 0xd9 => self.uint(1)? as usize,
            0xc5 | 0xda => self.uint(2)? as usize,
            0xc6 | 0xdb => self.uint(4)? as usize,
            _ => return Ok(None),
        }))
    }

    /// A str or bin payload: its first byte is the kind; an empty one has none (refused, as
    /// Aerospike refuses to compare it).
    fn bytes_value(&mut self, size: usize) -> Result<Value, ResultCode> {
        let payload = self.take(size)?;
        let (&kind, data) = payload.split_first().ok_or(ResultCode::Parameter)?;
        Ok(Value::Bytes {
            kind,
            data: data.to_vec(),
        })
    }

    fn ext(&mut self, size: usize) -> Result<Value, ResultCode> {
        let kind = self.byte()?;
        let data = self.take(size)?;
        Ok(match (kind, data) {
            (EXT_COMPARE, [COMPARE_WILDCARD]) => Value::Wildcard,
            (EXT_COMPARE, [COMPARE_INFINITY]) => Value::Infinity,
            _ => Value::Ext {
                kind,
                data: data.to_vec(),
            },
        })
    }

    /// Whether an order header (an extension of size 0) comes next; returns its flags.
    fn order_header(&mut self) -> Option<u8> {
        match self.bytes.get(self.position..self.position + 3) {
            Some([0xc7, 0x00, flags]) => {
                self.position += 3;
                Some(*flags)
            }
            _ => None,
        }
    }

    fn list(&mut self, count: usize, depth: usize) -> Result<Value, ResultCode> {
        let mut list = List::default();
        let mut count = count;
        if count > 0
            && let Some(flags) = self.order_header()
        {
            list.ordered = flags & 0x01 != 0;
            count -= 1;
        }
        list.items.reserve(count);
        for _ in 0..count {
            list.items.push(self.value(depth + 1)?);
        }
        Ok(Value::List(list))
    }

    fn map(&mut self, count: usize, depth: usize) -> Result<Value, ResultCode> {
        let mut map = Map::default();
        let mut count = count;
        if count > 0
            && let Some(flags) = self.order_header()
        {
            if self.byte()? != 0xc0 {
                return Err(ResultCode::Parameter);
            }
            map.order = MapOrder::from_flags(flags);
            count -= 1;
        }
        map.entries.reserve(count);
        for _ in 0..count {
            let key = self.value(depth + 1)?;
            let value = self.value(depth + 1)?;
            map.entries.push((key, value));
        }
        Ok(Value::Map(map))
    }
}

// ---- packed elements, read in place ------------------------------------------------------

/// An integer or a str/bin payload (what map keys usually are), borrowed from packed bytes or
/// from a [`Value`], so that it can be compared without decoding it into an owned value.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Scalar<'a> {
    /// An integer.
    Int(i64),
    /// A str or bin payload: its kind byte and the bytes after it.
    Bytes { kind: u8, data: &'a [u8] },
}

impl<'a> Scalar<'a> {
    /// The scalar `value` is, if it is one.
    pub(crate) fn of(value: &'a Value) -> Option<Scalar<'a>> {
        match value {
            Value::Int(number) => Some(Scalar::Int(*number)),
            Value::Bytes { kind, data } => Some(Scalar::Bytes { kind: *kind, data }),
            _ => None,
        }
    }

    /// The scalar `element` (exactly one packed element) holds, if it holds one that
    /// decodes.
    pub(crate) fn packed(element: &'a [u8]) -> Option<Scalar<'a>> {
        let mut reader = Reader {
            bytes: element,
            position: 0,
        };
        let marker = reader.byte().ok()?;
        let scalar = if let Some(number) = reader.int_after(marker).ok()? {
            Scalar::Int(number)
        } else {
            let size = reader.payload_size_after(marker).ok()??;
            let (&kind, data) = reader.take(size).ok()?.split_first()?;
            Scalar::Bytes { kind, data }
        };
        (reader.position == element.len()).then_some(scalar)
    }

    fn rank(self) -> u8 {
        match self {
            Scalar::Int(_) => RANK_INT,
            Scalar::Bytes { kind, .. } => bytes_rank(kind),
        }
    }

    /// Aerospike's order, as [`compare`] orders the values these are.
    fn compare(self, other: Scalar<'_>) -> Ordering {
        match (self, other) {
            (Scalar::Int(x), Scalar::Int(y)) => x.cmp(&y),
            (Scalar::Bytes { data: x, .. }, Scalar::Bytes { data: y, .. })
                if self.rank() == other.rank() =>
            {
                x.cmp(y)
            }
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

/// Aerospike's order between a packed element (exactly one) and a value; scalars are compared
/// in place, anything else is decoded first.
///
/// # Errors
/// PARAMETER for an element that does not decode.
pub(crate) fn compare_packed(element: &[u8], value: &Value) -> Result<Ordering, ResultCode> {
    match (Scalar::packed(element), Scalar::of(value)) {
        (Some(a), Some(b)) => Ok(a.compare(b)),
        _ => Ok(compare(&decode(element)?, value)),
    }
}

/// Aerospike's order between two packed elements (exactly one each), as [`compare_packed`].
///
/// # Errors
/// PARAMETER for an element that does not decode.
pub(crate) fn compare_both_packed(a: &[u8], b: &[u8]) -> Result<Ordering, ResultCode> {
    match (Scalar::packed(a), Scalar::packed(b)) {
        (Some(x), Some(y)) => Ok(x.compare(y)),
        _ => Ok(compare(&decode(a)?, &decode(b)?)),
    }
}

/// The header of a packed map: its order and where its entries start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MapHeader {
    /// The map's order.
    pub(crate) order: MapOrder,
    /// How many entries it holds (the order header not counted).
    pub(crate) entry_count: usize,
    /// Where its first entry starts.
    pub(crate) entries_at: usize,
}

/// The header of the map `bytes` start with, if it is canonical (see [`canonical_end`]).
pub(crate) fn canonical_map_header(bytes: &[u8]) -> Option<MapHeader> {
    let mut reader = Reader { bytes, position: 0 };
    let marker = reader.byte().ok()?;
    let (order, entry_count) = reader.canonical_map_header(marker)?;
    Some(MapHeader {
        order,
        entry_count,
        entries_at: reader.position,
    })
}

/// Where the element at `position` ends, if it is canonical: well-formed, no deeper than
/// [`decode`] allows (`depth` is its own depth, as `decode` counts it) and packed back to
/// exactly its bytes once decoded (`pack(decode(element)) == element`).
pub(crate) fn canonical_end(bytes: &[u8], position: usize, depth: usize) -> Option<usize> {
    let mut reader = Reader { bytes, position };
    reader.skip_canonical(depth)?;
    Some(reader.position)
}

impl Reader<'_> {
    /// Steps over one canonical element; `None` for anything else (see [`canonical_end`]).
    fn skip_canonical(&mut self, depth: usize) -> Option<()> {
        if depth > DEPTH_MAX {
            return None;
        }
        let marker = self.byte().ok()?;
        // The commonest elements first: a small integer, nil, a boolean, a short string.
        match marker {
            0x00..=0x7f | 0xe0..=0xff | 0xc0 | 0xc2 | 0xc3 => return Some(()),
            0xa1..=0xbf => return self.take(usize::from(marker & 0x1f)).ok().map(drop),
            _ => {}
        }
        if let Some(number) = self.int_after(marker).ok()? {
            return (int_marker(number) == marker).then_some(());
        }
        if let Some(size) = self.payload_size_after(marker).ok()? {
            // A bin form packs back as a str; an empty payload has no kind and is refused.
            if str_marker(size) != marker || size == 0 {
                return None;
            }
            return self.take(size).ok().map(drop);
        }
        match marker {
            // A double; a float32 would pack back as one.
            0xcb => self.take(8).ok().map(drop),
            0x90..=0x9f | 0xdc | 0xdd => self.skip_canonical_list(marker, depth),
            0x80..=0x8f | 0xde | 0xdf => {
                let (_, entry_count) = self.canonical_map_header(marker)?;
                for _ in 0..entry_count {
                    self.skip_canonical(depth + 1)?;
                    self.skip_canonical(depth + 1)?;
                }
                Some(())
            }
            0xd4..=0xd8 | 0xc7..=0xc9 => {
                let size = match marker {
                    0xd4..=0xd8 => 1_usize << (marker - 0xd4),
                    0xc7 => self.uint(1).ok()? as usize,
                    0xc8 => self.uint(2).ok()? as usize,
                    _ => self.uint(4).ok()? as usize,
                };
                // The specials are fixext1 too, so one rule covers them.
                (ext_marker(size) == marker).then_some(())?;
                self.take(size + 1).ok().map(drop)
            }
            _ => None,
        }
    }

    fn skip_canonical_list(&mut self, marker: u8, depth: usize) -> Option<()> {
        let mut count = self.container_count(marker)?;
        if array_marker(count) != marker {
            return None;
        }
        if count > 0
            && let Some(flags) = self.order_header()
        {
            // Only the ordered flag survives decoding, and an unordered list has no header.
            (flags == 0x01).then_some(())?;
            count -= 1;
        }
        (0..count).try_for_each(|_| self.skip_canonical(depth + 1))
    }

    /// After a map `marker`: the order and entry count of a canonical map header, its order
    /// header (if any) read.
    fn canonical_map_header(&mut self, marker: u8) -> Option<(MapOrder, usize)> {
        let mut count = self.container_count(marker)?;
        if map_marker(count) != marker {
            return None;
        }
        let mut order = MapOrder::Unordered;
        if count > 0
            && let Some(flags) = self.order_header()
        {
            (self.byte().ok()? == 0xc0).then_some(())?;
            order = MapOrder::from_flags(flags);
            // An unordered map has no header; any other flags pack back as the order's own.
            (order != MapOrder::Unordered && order.flags() == flags).then_some(())?;
            count -= 1;
        }
        Some((order, count))
    }

    /// The element count an array or map `marker` declares (its count field read).
    fn container_count(&mut self, marker: u8) -> Option<usize> {
        Some(match marker {
            0x90..=0x9f => usize::from(marker & 0x0f),
            0x80..=0x8f => usize::from(marker & 0x0f),
            0xdc | 0xde => self.uint(2).ok()? as usize,
            _ => self.uint(4).ok()? as usize,
        })
    }
}

/// The first byte [`pack_int`] writes for `number`.
fn int_marker(number: i64) -> u8 {
    match number {
        -32..=0x7f => number as u8,
        0x80..=0xff => 0xcc,
        0x100..=0xffff => 0xcd,
        0x1_0000..=0xffff_ffff => 0xce,
        0x1_0000_0000.. => 0xcf,
        -128..=-33 => 0xd0,
        -32768..=-129 => 0xd1,
        -2_147_483_648..=-32769 => 0xd2,
        _ => 0xd3,
    }
}

/// The first byte a str of `size` payload bytes packs with (see [`pack_sized`]).
fn str_marker(size: usize) -> u8 {
    sized_marker(0xa0, 0x1f, [0xd9, 0xda, 0xdb], size)
}

/// ... an array of `count` elements.
fn array_marker(count: usize) -> u8 {
    sized_marker(0x90, 0x0f, [0, 0xdc, 0xdd], count)
}

/// ... a map of `count` entries (an order header counted).
fn map_marker(count: usize) -> u8 {
    sized_marker(0x80, 0x0f, [0, 0xde, 0xdf], count)
}

/// The first byte [`pack_sized`] writes.
fn sized_marker(fix: u8, fix_max: u8, wide: [u8; 3], size: usize) -> u8 {
    if size <= usize::from(fix_max) {
        fix | size as u8
    } else if size <= 0xff && wide[0] != 0 {
        wide[0]
    } else if size <= 0xffff {
        wide[1]
    } else {
        wide[2]
    }
}

/// The first byte [`pack_ext`] writes for a payload of `size` bytes.
fn ext_marker(size: usize) -> u8 {
    match size {
        1 => 0xd4,
        2 => 0xd5,
        4 => 0xd6,
        8 => 0xd7,
        16 => 0xd8,
        0..=0xff => 0xc7,
        0x100..=0xffff => 0xc8,
        _ => 0xc9,
    }
}

// ---- packing -----------------------------------------------------------------------------

/// Packs `value` as msgpack.
pub fn pack(value: &Value) -> Vec<u8> {
    pack_with_capacity(value, 0)
}

/// Packs `value` as msgpack into a buffer that starts with room for `capacity` bytes (the
/// size it had before a change, say, so that packing a large value grows it at most once).
pub fn pack_with_capacity(value: &Value, capacity: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(capacity);
    pack_into(value, &mut out);
    out
}

/// Appends `value`, packed, to `out`.
pub(crate) fn pack_into(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Nil => out.push(0xc0),
        Value::Bool(flag) => out.push(if *flag { 0xc3 } else { 0xc2 }),
        Value::Int(number) => pack_int(*number, out),
        Value::Float(number) => {
            out.push(0xcb);
            out.extend_from_slice(&number.to_bits().to_be_bytes());
        }
        Value::Bytes { kind, data } => {
            pack_sized(0xa0, 0x1f, [0xd9, 0xda, 0xdb], data.len() + 1, out);
            out.push(*kind);
            out.extend_from_slice(data);
        }
        Value::List(list) => {
            let header = usize::from(list.ordered);
            pack_sized(0x90, 0x0f, [0, 0xdc, 0xdd], list.items.len() + header, out);
            if list.ordered {
                out.extend_from_slice(&[0xc7, 0x00, 0x01]);
            }
            for item in &list.items {
                pack_into(item, out);
            }
        }
        Value::Map(map) => {
            pack_map_header(map.order, map.entries.len(), out);
            for (key, value) in &map.entries {
                pack_into(key, out);
                pack_into(value, out);
            }
        }
        Value::Ext { kind, data } => pack_ext(*kind, data, out),
        Value::Wildcard => pack_ext(EXT_COMPARE, &[COMPARE_WILDCARD], out),
        Value::Infinity => pack_ext(EXT_COMPARE, &[COMPARE_INFINITY], out),
    }
}

/// Appends the header of a map of `entry_count` entries in `order`: the count (an order
/// header counted), then the order header, unless unordered.
pub(crate) fn pack_map_header(order: MapOrder, entry_count: usize, out: &mut Vec<u8>) {
    let header = usize::from(order != MapOrder::Unordered);
    pack_sized(0x80, 0x0f, [0, 0xde, 0xdf], entry_count + header, out);
    if header == 1 {
        out.extend_from_slice(&[0xc7, 0x00, order.flags(), 0xc0]);
    }
}

/// A header for `size`: the fix form when it fits `fix_max`, else the 8-, 16- or 32-bit
/// form (`wide[0]` 0 when there is no 8-bit form, as for arrays and maps).
fn pack_sized(fix: u8, fix_max: u8, wide: [u8; 3], size: usize, out: &mut Vec<u8>) {
    if size <= usize::from(fix_max) {
        out.push(fix | size as u8);
    } else if size <= 0xff && wide[0] != 0 {
        out.extend_from_slice(&[wide[0], size as u8]);
    } else if size <= 0xffff {
        out.push(wide[1]);
        out.extend_from_slice(&(size as u16).to_be_bytes());
    } else {
        out.push(wide[2]);
        out.extend_from_slice(&(size as u32).to_be_bytes());
    }
}

/// The smallest msgpack form of an integer (Aerospike's `pack_int64`).
fn pack_int(number: i64, out: &mut Vec<u8>) {
    match number {
        0..=0x7f => out.push(number as u8),
        0x80..=0xff => out.extend_from_slice(&[0xcc, number as u8]),
        0x100..=0xffff => {
            out.push(0xcd);
            out.extend_from_slice(&(number as u16).to_be_bytes());
        }
        0x1_0000..=0xffff_ffff => {
            out.push(0xce);
            out.extend_from_slice(&(number as u32).to_be_bytes());
        }
        0x1_0000_0000.. => {
            out.push(0xcf);
            out.extend_from_slice(&(number as u64).to_be_bytes());
        }
        -32..=-1 => out.push(number as i8 as u8),
        -128..=-33 => out.extend_from_slice(&[0xd0, number as i8 as u8]),
        -32768..=-129 => {
            out.push(0xd1);
            out.extend_from_slice(&(number as i16).to_be_bytes());
        }
        -2_147_483_648..=-32769 => {
            out.push(0xd2);
            out.extend_from_slice(&(number as i32).to_be_bytes());
        }
        _ => {
            out.push(0xd3);
            out.extend_from_slice(&number.to_be_bytes());
        }
    }
}

fn pack_ext(kind: u8, data: &[u8], out: &mut Vec<u8>) {
    match data.len() {
        1 => out.push(0xd4),
        2 => out.push(0xd5),
        4 => out.push(0xd6),
        8 => out.push(0xd7),
        16 => out.push(0xd8),
        size if size <= 0xff => out.extend_from_slice(&[0xc7, size as u8]),
        size if size <= 0xffff => {
            out.push(0xc8);
            out.extend_from_slice(&(size as u16).to_be_bytes());
        }
        size => {
            out.push(0xc9);
            out.extend_from_slice(&(size as u32).to_be_bytes());
        }
    }
    out.push(kind);
    out.extend_from_slice(data);
}

// ---- particles ---------------------------------------------------------------------------

/// A bin's value as a collection value: a LIST or MAP particle decoded, any other particle as
/// the scalar it holds.
///
/// # Errors
/// PARAMETER for a stored collection that does not decode (never stored by Osprey).
pub fn from_particle(particle_type: u8, bytes: &[u8]) -> Result<Value, ResultCode> {
    let eight = |bytes: &[u8]| -> Result<[u8; 8], ResultCode> {
        bytes.try_into().map_err(|_| ResultCode::Parameter)
    };
    Ok(match ParticleType::from_u8(particle_type) {
        Some(ParticleType::List | ParticleType::Map) => decode(bytes)?,
        Some(ParticleType::Integer) => Value::Int(i64::from_be_bytes(eight(bytes)?)),
        Some(ParticleType::Float) => Value::Float(f64::from_be_bytes(eight(bytes)?)),
        Some(ParticleType::Bool) => Value::Bool(bytes.first().is_some_and(|&b| b != 0)),
        Some(ParticleType::Null) | None => Value::Nil,
        Some(_) => Value::Bytes {
            kind: particle_type,
            data: bytes.to_vec(),
        },
    })
}

/// `value` as a bin's particle: its type and bytes (a nil as NULL, no bytes).
pub fn to_particle(value: &Value) -> (u8, Vec<u8>) {
    match value {
        Value::Nil => (ParticleType::Null as u8, Vec::new()),
        Value::Bool(flag) => (ParticleType::Bool as u8, vec![u8::from(*flag)]),
        Value::Int(number) => (ParticleType::Integer as u8, number.to_be_bytes().to_vec()),
        Value::Float(number) => (ParticleType::Float as u8, number.to_be_bytes().to_vec()),
        Value::Bytes { kind, data } => (*kind, data.clone()),
        Value::List(_) => (ParticleType::List as u8, pack(value)),
        Value::Map(_) => (ParticleType::Map as u8, pack(value)),
        Value::Ext { .. } | Value::Wildcard | Value::Infinity => {
            (ParticleType::Blob as u8, pack(value))
        }
    }
}

#[cfg(test)]
mod tests;
