//! The target over the engine's msgpack decoding (LIST and MAP particles), checked against an
//! independent reference decoder written here.
//!
//! The engine's decoder is private to it, so the target reaches it the way clients do: it
//! writes the bytes as a LIST bin and as a MAP bin, and lets secondary indexes on those bins
//! split them into items.
//!
//! Invariants the target asserts, beyond "no panic":
//! - A write of a LIST (MAP) particle succeeds exactly when the reference decoder finds one
//!   complete msgpack array (map) and nothing after it, and reads back byte for byte.
//! - The list index (integers, and strings) and the map-keys and map-values indexes hold
//!   exactly one entry per distinct item of their type that the reference finds.

use std::collections::BTreeSet;

use engine::{IndexCollection, IndexDefinition, IndexKind, IndexSource, Namespace, SecondaryIndex};
use model::{Op, OpCode, ParticleType, ResultCode};

use crate::fixture;

/// Nesting deeper than this is not followed by the reference decoder (it recurses, and a test
/// thread has a 2 MiB stack); inputs that deep are only checked for not panicking.
const REFERENCE_DEPTH_MAX: usize = 2_048;

/// The prefix byte of a string inside a collection (the particle type STRING).
const STRING_PREFIX: u8 = 3;

/// The indexes the target keeps, by what they hold.
struct Indexes {
    list_ints: std::sync::Arc<SecondaryIndex>,
    list_strings: std::sync::Arc<SecondaryIndex>,
    map_keys: std::sync::Arc<SecondaryIndex>,
    map_values: std::sync::Arc<SecondaryIndex>,
}

/// Target `msgpack`: `data` is written as a LIST bin of one record and a MAP bin of another.
pub fn msgpack(data: &[u8]) {
    let (namespace, _clock) = fixture::namespace();
    let indexes = Indexes {
        list_ints: index(
            &namespace,
            "l-int",
            b"l",
            IndexKind::Numeric,
            IndexCollection::List,
        ),
        list_strings: index(
            &namespace,
            "l-str",
            b"l",
            IndexKind::String,
            IndexCollection::List,
        ),
        map_keys: index(
            &namespace,
            "m-key",
            b"m",
            IndexKind::String,
            IndexCollection::MapKeys,
        ),
        map_values: index(
            &namespace,
            "m-val",
            b"m",
            IndexKind::Numeric,
            IndexCollection::MapValues,
        ),
    };
    let reference = Reference::decode(data);
    let list = write_collection(&namespace, 1, b"l", ParticleType::List, data);
    let map = write_collection(&namespace, 2, b"m", ParticleType::Map, data);
    let Some(reference) = reference else {
        return;
    };
    assert_eq!(list.is_ok(), reference.is_array, "LIST accepted: {list:?}");
    assert_eq!(map.is_ok(), reference.is_map, "MAP accepted: {map:?}");
    let count = |index: &SecondaryIndex| namespace.index_entry_count(index);
    if reference.is_array {
        assert_eq!(
            count(&indexes.list_ints),
            distinct(reference.items.iter().map(item_int))
        );
        let strings = reference.items.iter().map(|item| item_string(item));
        assert_eq!(count(&indexes.list_strings), distinct(strings));
    }
    if reference.is_map {
        let keys = reference
            .items
            .iter()
            .step_by(2)
            .map(|item| item_string(item));
        assert_eq!(count(&indexes.map_keys), distinct(keys));
        let values = reference.items.iter().skip(1).step_by(2).map(item_int);
        assert_eq!(count(&indexes.map_values), distinct(values));
    }
}

/// Whether `bytes` is exactly one msgpack array, and whether it is exactly one map, by the
/// reference decoder; `None` when it nests deeper than the reference follows.
pub(crate) fn reference_container(bytes: &[u8]) -> Option<(bool, bool)> {
    Reference::decode(bytes).map(|reference| (reference.is_array, reference.is_map))
}

/// Whether the one msgpack value `bytes` holds contains, anywhere, the wildcard or infinity
/// extension (fixext 1 of type 0xff, 0x00 or 0x01): values that may select elements in an op
/// argument but must never be stored. `None` when `bytes` is not one complete value or nests
/// deeper than the reference follows.
pub(crate) fn reference_has_special(bytes: &[u8]) -> Option<bool> {
    let mut reader = Reader {
        bytes,
        position: 0,
        specials: false,
    };
    reader.value(0).ok()?;
    (reader.position == bytes.len()).then_some(reader.specials)
}

fn index(
    namespace: &Namespace,
    name: &str,
    bin: &[u8],
    kind: IndexKind,
    collection: IndexCollection,
) -> std::sync::Arc<SecondaryIndex> {
    let definition = IndexDefinition {
        name: name.to_owned(),
        set_name: None,
        source: IndexSource::Bin(bin.to_vec()),
        kind,
        collection,
    };
    let (index, _) = namespace
        .create_index(definition)
        .expect("a fresh namespace takes it");
    namespace.build_index(&index);
    index
}

/// Writes `value` as bin `bin` of record `key`; on success it must read back unchanged.
fn write_collection(
    namespace: &Namespace,
    key: u8,
    bin: &[u8],
    particle_type: ParticleType,
    value: &[u8],
) -> Result<(), ResultCode> {
    let digest = fixture::digest(key);
    let op = Op {
        code: OpCode::Write,
        particle_type: particle_type as u8,
        bin_name: bin,
        value,
    };
    fixture::write(namespace, digest, &[op])?;
    let (_, bins) = fixture::read_all(namespace, digest).expect("a record just written");
    assert_eq!(bins, [(bin.to_vec(), particle_type as u8, value.to_vec())]);
    Ok(())
}

fn distinct<T: Ord>(keys: impl Iterator<Item = Option<T>>) -> u64 {
    keys.flatten().collect::<BTreeSet<T>>().len() as u64
}

/// What the reference decoder found in a whole input.
#[derive(Debug)]
struct Reference<'a> {
    /// One complete array and nothing after it.
    is_array: bool,
    /// One complete map and nothing after it.
    is_map: bool,
    /// The top-level items (elements, or keys and values alternating) as their own bytes.
    items: Vec<&'a [u8]>,
}

impl<'a> Reference<'a> {
    /// `None` when the input nests deeper than the reference follows.
    fn decode(bytes: &'a [u8]) -> Option<Reference<'a>> {
        let mut reader = Reader {
            bytes,
            position: 0,
            specials: false,
        };
        let not_container = Reference {
            is_array: false,
            is_map: false,
            items: Vec::new(),
        };
        let Some(&first) = bytes.first() else {
            return Some(not_container);
        };
        let (is_array, is_map) = (is_array_marker(first), is_map_marker(first));
        if !is_array && !is_map {
            return Some(not_container);
        }
        reader.position = 1;
        let Some(count) = reader.container_count(first) else {
            return Some(not_container);
        };
        let mut items = Vec::new();
        for _ in 0..count {
            let start = reader.position;
            match reader.value(1) {
                Ok(()) => items.push(&bytes[start..reader.position]),
                Err(Stop::TooDeep) => return None,
                Err(Stop::Invalid) => return Some(not_container),
            }
        }
        if reader.position != bytes.len() {
            return Some(not_container);
        }
        Some(Reference {
            is_array,
            is_map,
            items,
        })
    }
}

/// Why the reference decoder stopped.
#[derive(Debug)]
enum Stop {
    Invalid,
    TooDeep,
}

/// A recursive-descent msgpack reader, written from the format specification.
struct Reader<'a> {
    bytes: &'a [u8],
    position: usize,
    /// Whether a wildcard or infinity extension was read.
    specials: bool,
}

impl<'a> Reader<'a> {
    fn take(&mut self, size_bytes: u64) -> Result<&'a [u8], Stop> {
        let remaining = (self.bytes.len() - self.position) as u64;
        if size_bytes > remaining {
            return Err(Stop::Invalid);
        }
        let start = self.position;
        self.position += size_bytes as usize;
        let bytes: &'a [u8] = self.bytes;
        Ok(&bytes[start..self.position])
    }

    fn length(&mut self, size_bytes: u64) -> Result<u64, Stop> {
        Ok(self
            .take(size_bytes)?
            .iter()
            .fold(0, |length, &byte| length << 8 | u64::from(byte)))
    }

    /// Elements (arrays) or keys plus values (maps) of the container whose marker was read.
    fn container_count(&mut self, marker: u8) -> Option<u64> {
        let count = match marker {
            0x90..=0x9f => u64::from(marker & 0x0f),
            0x80..=0x8f => u64::from(marker & 0x0f),
            0xdc | 0xde => self.length(2).ok()?,
            0xdd | 0xdf => self.length(4).ok()?,
            _ => return None,
        };
        Some(if is_map_marker(marker) {
            2 * count
        } else {
            count
        })
    }

    /// Reads one whole value at `depth`.
    fn value(&mut self, depth: usize) -> Result<(), Stop> {
        if depth > REFERENCE_DEPTH_MAX {
            return Err(Stop::TooDeep);
        }
        let marker = self.take(1)?[0];
        let payload_bytes = match marker {
            0x00..=0x7f | 0xe0..=0xff | 0xc0 | 0xc2 | 0xc3 => 0,
            0xa0..=0xbf => u64::from(marker & 0x1f),
            0xcc | 0xd0 => 1,
            0xcd | 0xd1 => 2,
            0xca | 0xce | 0xd2 => 4,
            0xcb | 0xcf | 0xd3 => 8,
            0xc4 | 0xd9 => self.length(1)?,
            0xc5 | 0xda => self.length(2)?,
            0xc6 | 0xdb => self.length(4)?,
            // fixext 1, 2, 4, 8, 16: a type byte and that much data.
            0xd4 => {
                let special = matches!(
                    self.bytes.get(self.position..self.position + 2),
                    Some([0xff, 0 | 1])
                );
                self.specials |= special;
                2
            }
            0xd5 => 3,
            0xd6 => 5,
            0xd7 => 9,
            0xd8 => 17,
            0xc7 => self.length(1)? + 1,
            0xc8 => self.length(2)? + 1,
            0xc9 => self.length(4)? + 1,
            0xc1 => return Err(Stop::Invalid),
            container => {
                let count = self.container_count(container).ok_or(Stop::Invalid)?;
                for _ in 0..count {
                    self.value(depth + 1)?;
                }
                0
            }
        };
        self.take(payload_bytes)?;
        Ok(())
    }
}

fn is_array_marker(marker: u8) -> bool {
    matches!(marker, 0x90..=0x9f | 0xdc | 0xdd)
}

fn is_map_marker(marker: u8) -> bool {
    matches!(marker, 0x80..=0x8f | 0xde | 0xdf)
}

/// The integer a whole item holds, if it is a msgpack integer that fits an i64.
fn item_int(item: &&[u8]) -> Option<i64> {
    let (&marker, payload) = item.split_first()?;
    let unsigned = |size_bytes: usize| {
        let bytes = payload.get(..size_bytes)?;
        Some(
            bytes
                .iter()
                .fold(0u64, |value, &byte| value << 8 | u64::from(byte)),
        )
    };
    match marker {
        0x00..=0x7f => Some(i64::from(marker)),
        0xe0..=0xff => Some(i64::from(marker as i8)),
        0xcc => unsigned(1).map(|value| value as i64),
        0xcd => unsigned(2).map(|value| value as i64),
        0xce => unsigned(4).map(|value| value as i64),
        0xcf => unsigned(8).and_then(|value| i64::try_from(value).ok()),
        0xd0 => unsigned(1).map(|value| i64::from(value as u8 as i8)),
        0xd1 => unsigned(2).map(|value| i64::from(value as u16 as i16)),
        0xd2 => unsigned(4).map(|value| i64::from(value as u32 as i32)),
        0xd3 => unsigned(8).map(|value| value as i64),
        _ => None,
    }
}

/// The text of a whole item that is a msgpack string starting with the STRING prefix byte.
fn item_string<'a>(item: &&'a [u8]) -> Option<&'a [u8]> {
    let mut reader = Reader {
        bytes: item,
        position: 1,
        specials: false,
    };
    let length = match *item.first()? {
        marker @ 0xa0..=0xbf => u64::from(marker & 0x1f),
        0xd9 => reader.length(1).ok()?,
        0xda => reader.length(2).ok()?,
        0xdb => reader.length(4).ok()?,
        _ => return None,
    };
    match reader.take(length).ok()? {
        [STRING_PREFIX, text @ ..] => Some(text),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_splits_a_list_and_a_map_into_items() {
        // [1, "\x03ab", [nil]]
        let list = [0x93, 0x01, 0xa3, 3, b'a', b'b', 0x91, 0xc0];
        let reference = Reference::decode(&list).expect("shallow");
        assert!(reference.is_array && !reference.is_map);
        assert_eq!(reference.items.len(), 3);
        assert_eq!(item_int(&reference.items[0]), Some(1));
        assert_eq!(item_string(&reference.items[1]), Some(&b"ab"[..]));
        let map = [0x81, 0xd0, 0x80, 0xc3];
        let reference = Reference::decode(&map).expect("shallow");
        assert!(reference.is_map);
        assert_eq!(item_int(&reference.items[0]), Some(-128));
        assert!(!Reference::decode(&[0x92, 0x01]).expect("shallow").is_array);
    }

    #[test]
    fn valid_and_invalid_collections_pass_every_check() {
        msgpack(&[0x93, 0x01, 0xa3, 3, b'a', b'b', 0x91, 0xc0]);
        msgpack(&[0x82, 0xa2, 3, b'k', 0x05, 0xa2, 3, b'j', 0x05]);
        msgpack(&[0xdd, 0xff, 0xff, 0xff, 0xff, 0x01]);
        msgpack(&[0x91, 0xc1]);
    }
}
