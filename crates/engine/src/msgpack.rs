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
