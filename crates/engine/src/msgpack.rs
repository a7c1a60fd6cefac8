//! Structural validation of msgpack values, for LIST and MAP particles.
//!
//! Osprey stores collection values byte-exact, so it must not store bytes a client could not
//! decode later: Aerospike refuses them too. The check walks the value iteratively, counting
//! values still to read instead of recursing, so a hostile nesting depth cannot exhaust the
//! stack, and it gives up as soon as the declared counts need more bytes than remain.

use rmp::Marker;

/// The container a particle must hold at its top level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Container {
    /// A LIST particle: a msgpack array.
    Array,
    /// A MAP particle: a msgpack map.
    Map,
}

/// Whether `bytes` is exactly one complete msgpack value of kind `container`.
pub(crate) fn is_valid_container(bytes: &[u8], container: Container) -> bool {
    let Some(&first) = bytes.first() else {
        return false;
    };
    let top_level_matches = match Marker::from_u8(first) {
        Marker::FixArray(_) | Marker::Array16 | Marker::Array32 => container == Container::Array,
        Marker::FixMap(_) | Marker::Map16 | Marker::Map32 => container == Container::Map,
        _ => false,
    };
    top_level_matches && skip_one_value(bytes) == Some(bytes.len())
}

/// The top-level items of a valid LIST (its elements) or MAP (keys and values alternating)
/// particle, each as its own msgpack bytes; `None` for anything else.
pub(crate) fn container_items(bytes: &[u8]) -> Option<Vec<&[u8]>> {
    let mut position = 1;
    let marker = Marker::from_u8(*bytes.first()?);
    let count = match marker {
        Marker::FixArray(count) => usize::from(count),
        Marker::FixMap(count) => 2 * usize::from(count),
        Marker::Array16 | Marker::Array32 | Marker::Map16 | Marker::Map32 => {
            let size_bytes = if matches!(marker, Marker::Array16 | Marker::Map16) {
                2
            } else {
                4
            };
            let count = read_length(bytes, &mut position, size_bytes)?;
            if matches!(marker, Marker::Map16 | Marker::Map32) {
                count.checked_mul(2)?
            } else {
                count
            }
        }
        _ => return None,
    };
    // Each item takes at least a byte: a count beyond that is a lie, refused before allocating.
    if count > bytes.len() - position {
        return None;
    }
    let mut items = Vec::with_capacity(count);
    for _ in 0..count {
        let size = skip_one_value(&bytes[position..])?;
        items.push(&bytes[position..position + size]);
        position += size;
    }
    (position == bytes.len()).then_some(items)
}

/// The integer one item holds, if it is one that fits an i64.
pub(crate) fn item_int(item: &[u8]) -> Option<i64> {
    let mut reader = item;
    rmp::decode::read_int::<i64, _>(&mut reader).ok()
}

/// The string one item holds: Aerospike's clients write a string inside a collection as a
/// msgpack str whose first byte is the particle type STRING (3); that byte is not returned.
pub(crate) fn item_string(item: &[u8]) -> Option<&[u8]> {
    let mut reader = item;
    let len = rmp::decode::read_str_len(&mut reader).ok()? as usize;
    match reader.get(..len)? {
        [STRING_PARTICLE_TYPE, text @ ..] => Some(text),
        _ => None,
    }
}

/// The prefix byte of a string inside a collection.
const STRING_PARTICLE_TYPE: u8 = 3;

/// Skips one complete value at the start of `bytes`; returns its size, or `None` if the bytes
/// end early or use the reserved marker 0xc1.
fn skip_one_value(bytes: &[u8]) -> Option<usize> {
    let mut position = 0usize;
    let mut values_pending: u64 = 1;
    while values_pending > 0 {
        let marker = Marker::from_u8(*bytes.get(position)?);
        position += 1;
        values_pending -= 1;
        let (payload_bytes, children) = value_shape(marker, bytes, &mut position)?;
        position = position
            .checked_add(payload_bytes)
            .filter(|&end| end <= bytes.len())?;
        values_pending = values_pending.checked_add(children)?;
        // Each pending value needs at least one more byte.
        if values_pending > (bytes.len() - position) as u64 {
            return None;
        }
    }
    Some(position)
}

/// For one marker: how many payload bytes follow its header, and how many nested values.
fn value_shape(marker: Marker, bytes: &[u8], position: &mut usize) -> Option<(usize, u64)> {
    let mut length = |size_bytes: usize| read_length(bytes, position, size_bytes);
    Some(match marker {
        Marker::FixPos(_) | Marker::FixNeg(_) | Marker::Null | Marker::True | Marker::False => {
            (0, 0)
        }
        Marker::U8 | Marker::I8 => (1, 0),
        Marker::U16 | Marker::I16 => (2, 0),
        Marker::U32 | Marker::I32 | Marker::F32 => (4, 0),
        Marker::U64 | Marker::I64 | Marker::F64 => (8, 0),
        Marker::FixStr(len) => (usize::from(len), 0),
        Marker::Str8 | Marker::Bin8 => (length(1)?, 0),
        Marker::Str16 | Marker::Bin16 => (length(2)?, 0),
        Marker::Str32 | Marker::Bin32 => (length(4)?, 0),
        Marker::FixArray(count) => (0, u64::from(count)),
        Marker::Array16 => (0, length(2)? as u64),
        Marker::Array32 => (0, length(4)? as u64),
        Marker::FixMap(count) => (0, 2 * u64::from(count)),
        Marker::Map16 => (0, 2 * length(2)? as u64),
        Marker::Map32 => (0, 2 * length(4)? as u64),
        // Ext payloads are a type byte plus data.
        Marker::FixExt1 => (2, 0),
        Marker::FixExt2 => (3, 0),
        Marker::FixExt4 => (5, 0),
        Marker::FixExt8 => (9, 0),
        Marker::FixExt16 => (17, 0),
        Marker::Ext8 => (length(1)? + 1, 0),
        Marker::Ext16 => (length(2)? + 1, 0),
        Marker::Ext32 => (length(4)? + 1, 0),
        Marker::Reserved => return None,
    })
}

/// Reads a big-endian length of `size_bytes` at `position` and moves past it.
fn read_length(bytes: &[u8], position: &mut usize, size_bytes: usize) -> Option<usize> {
    let field = bytes.get(*position..*position + size_bytes)?;
    *position += size_bytes;
    let mut buffer = [0u8; 4];
    buffer[4 - size_bytes..].copy_from_slice(field);
    usize::try_from(u32::from_be_bytes(buffer)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_nested_lists_maps_strings_and_numbers() {
        // [1, "a", [nil, true], {1: -1}, 3.5f64, bin8(2)]
        let list = [
            0x96, 0x01, 0xa1, b'a', 0x92, 0xc0, 0xc3, 0x81, 0x01, 0xff, 0xcb, 0x40, 0x0c, 0, 0, 0,
            0, 0, 0, 0xc4, 0x02, 0xaa, 0xbb,
        ];
        assert!(is_valid_container(&list, Container::Array));
        assert!(!is_valid_container(&list, Container::Map));
        // An Aerospike key-ordered map: ext8 flags pseudo-entry, then {"k": 1}.
        let map = [0x82, 0xc7, 0x00, 0x01, 0xc0, 0xa2, 0x03, b'k', 0x01];
        assert!(is_valid_container(&map, Container::Map));
    }

    #[test]
    fn container_items_split_lists_and_maps_at_the_top_level() {
        // [1, [2, 3], "a"]
        let list = [0x93, 0x01, 0x92, 0x02, 0x03, 0xa1, b'a'];
        let items = container_items(&list).expect("a list");
        assert_eq!(items, vec![&[0x01][..], &[0x92, 0x02, 0x03], &[0xa1, b'a']]);
        // {1: -1, "k": [nil]} as map16
        let map = [0xde, 0x00, 0x02, 0x01, 0xff, 0xa1, b'k', 0x91, 0xc0];
        let items = container_items(&map).expect("a map");
        assert_eq!(
            items,
            vec![&[0x01][..], &[0xff], &[0xa1, b'k'], &[0x91, 0xc0]]
        );
        assert_eq!(container_items(&[0x92, 0x01]), None, "one element short");
        assert_eq!(
            container_items(&[0xdd, 0xff, 0xff, 0xff, 0xff]),
            None,
            "count beyond the bytes"
        );
        assert_eq!(container_items(&[0x01]), None, "not a container");
    }

    #[test]
    fn items_decode_as_integers_and_prefixed_strings() {
        assert_eq!(item_int(&[0x05]), Some(5));
        assert_eq!(item_int(&[0xd0, 0x80]), Some(-128));
        assert_eq!(
            item_int(&[0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]),
            None,
            "u64 max"
        );
        assert_eq!(item_string(&[0xa3, 3, b'a', b'b']), Some(&b"ab"[..]));
        assert_eq!(item_string(&[0xa2, b'a', b'b']), None, "no STRING prefix");
        assert_eq!(item_string(&[0xa3, 3, b'a']), None, "short");
        assert_eq!(item_int(&[0xa1, 3]), None);
    }

    #[test]
    fn rejects_truncated_trailing_reserved_and_empty_values() {
        assert!(!is_valid_container(&[], Container::Array));
        assert!(
            !is_valid_container(&[0x92, 0x01], Container::Array),
            "one element short"
        );
        assert!(
            !is_valid_container(&[0x91, 0x01, 0x02], Container::Array),
            "trailing byte"
        );
        assert!(
            !is_valid_container(&[0x91, 0xc1], Container::Array),
            "reserved marker"
        );
        assert!(
            !is_valid_container(&[0x81, 0x01], Container::Map),
            "value missing"
        );
        assert!(
            !is_valid_container(&[0x91, 0xa5, b'a'], Container::Array),
            "short string"
        );
    }

    #[test]
    fn hostile_counts_and_depth_fail_fast_without_recursion() {
        let huge_array = [0xdd, 0xff, 0xff, 0xff, 0xff, 0x01];
        assert!(!is_valid_container(&huge_array, Container::Array));
        let mut deep = vec![0x91u8; 1_000_000];
        deep.push(0xc0);
        assert!(is_valid_container(&deep, Container::Array));
        deep.pop();
        assert!(!is_valid_container(&deep, Container::Array));
    }
}
