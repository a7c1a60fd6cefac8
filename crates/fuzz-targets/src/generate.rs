//! A small msgpack writer and a generator of values as Aerospike packs them inside LIST and
//! MAP particles and op payloads, driven by the fuzzer's bytes: what `collection_ops` and
//! `expressions` build their bins, op arguments and expression literals from.
//!
//! Invariants:
//! - [`Style::Stored`] values are well-formed msgpack a plain write accepts, nested at most
//!   [`NESTING_MAX`] deep, with no wildcard or infinity: what a client may store.
//! - [`Style::Argument`] values may also hold what only an op argument should: the wildcard and
//!   infinity extensions, HyperLogLog sketches, a container header declaring 2^32 - 1 items
//!   that are not there, nesting around the engine's depth limit.
//! - Generation is bounded whatever the input: counts come from a byte modulo a small number,
//!   depth is capped, and past the input's end every choice is 0 (a zero or an empty list).

use crate::input::Input;

/// How deep generated containers nest (the hostile deep nesting aside).
pub const NESTING_MAX: usize = 4;

/// Most items of a generated list (entries of a map).
const ITEMS_MAX: usize = 5;

/// The first byte of a msgpack str that makes it a string, a blob, an HLL or GeoJSON.
pub const KIND_STRING: u8 = 3;
/// ... a blob.
pub const KIND_BLOB: u8 = 4;
/// ... a HyperLogLog sketch.
pub const KIND_HLL: u8 = 18;
/// ... a GeoJSON text.
pub const KIND_GEOJSON: u8 = 23;

/// The wildcard extension (fixext 1, type 0xff, 0x00): selects, never stored.
pub const WILDCARD: [u8; 3] = [0xd4, 0xff, 0x00];
/// The infinity extension (fixext 1, type 0xff, 0x01): selects, never stored.
pub const INFINITY: [u8; 3] = [0xd4, 0xff, 0x01];

/// An array header declaring 2^32 - 1 items.
pub const HUGE_ARRAY: [u8; 5] = [0xdd, 0xff, 0xff, 0xff, 0xff];

/// Integers worth trying: the edges of every msgpack width, of Aerospike's index and count
/// arithmetic, of bit offsets and of HyperLogLog bit counts.
const INTERESTING_INTS: [i64; 24] = [
    0,
    1,
    2,
    3,
    4,
    8,
    16,
    64,
    -1,
    -2,
    -3,
    127,
    128,
    255,
    -32,
    -33,
    65_535,
    0x7fff_ffff,
    0xffff_ffff,
    1 << 20,
    1 << 27,
    i64::MAX,
    i64::MIN,
    -0x8000_0000,
];

/// What a generated value may contain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    /// Only what a client may store in a bin.
    Stored,
    /// Anything an op argument may carry, hostile shapes included.
    Argument,
}

/// Appends a msgpack integer in its smallest encoding.
pub fn int(out: &mut Vec<u8>, value: i64) {
    match value {
        -32..=0x7f => out.push(value as u8),
        0x80..=0xff => out.extend_from_slice(&[0xcc, value as u8]),
        0x100..=0xffff => {
            out.push(0xcd);
            out.extend_from_slice(&(value as u16).to_be_bytes());
        }
        0x1_0000..=0xffff_ffff => {
            out.push(0xce);
            out.extend_from_slice(&(value as u32).to_be_bytes());
        }
        -0x80..=-33 => out.extend_from_slice(&[0xd0, value as u8]),
        -0x8000..=-0x81 => {
            out.push(0xd1);
            out.extend_from_slice(&(value as i16).to_be_bytes());
        }
        -0x8000_0000..=-0x8001 => {
            out.push(0xd2);
            out.extend_from_slice(&(value as i32).to_be_bytes());
        }
        _ => {
            out.push(0xd3);
            out.extend_from_slice(&value.to_be_bytes());
        }
    }
}

/// Appends a msgpack str whose first byte is `kind` (Aerospike's particle-typed strings).
pub fn bytes(out: &mut Vec<u8>, kind: u8, data: &[u8]) {
    let size = data.len() + 1;
    match size {
        0..=31 => out.push(0xa0 | size as u8),
        32..=0xff => out.extend_from_slice(&[0xd9, size as u8]),
        0x100..=0xffff => {
            out.push(0xda);
            out.extend_from_slice(&(size as u16).to_be_bytes());
        }
        _ => {
            out.push(0xdb);
            out.extend_from_slice(&(size as u32).to_be_bytes());
        }
    }
    out.push(kind);
    out.extend_from_slice(data);
}

/// Appends a plain msgpack str (no kind byte): a bin or variable name in an expression.
pub fn raw_str(out: &mut Vec<u8>, text: &[u8]) {
    debug_assert!(text.len() < 32, "names are short");
    out.push(0xa0 | text.len() as u8);
    out.extend_from_slice(text);
}

/// Appends an array header for `count` items.
pub fn array(out: &mut Vec<u8>, count: usize) {
    match count {
        0..=15 => out.push(0x90 | count as u8),
        16..=0xffff => {
            out.push(0xdc);
            out.extend_from_slice(&(count as u16).to_be_bytes());
        }
        _ => {
            out.push(0xdd);
            out.extend_from_slice(&(count as u32).to_be_bytes());
        }
    }
}

/// Appends a map header for `count` entries.
pub fn map(out: &mut Vec<u8>, count: usize) {
    match count {
        0..=15 => out.push(0x80 | count as u8),
        _ => {
            out.push(0xde);
            out.extend_from_slice(&(count as u16).to_be_bytes());
        }
    }
}

/// Appends a double.
pub fn float(out: &mut Vec<u8>, value: f64) {
    out.push(0xcb);
    out.extend_from_slice(&value.to_be_bytes());
}

/// An integer: one of [`INTERESTING_INTS`], a small one, or any 64 bits.
pub fn choose_int(input: &mut Input<'_>) -> i64 {
    match input.byte() % 4 {
        0 | 1 => input.pick(&INTERESTING_INTS),
        2 => i64::from(input.byte() as i8),
        _ => input.u64() as i64,
    }
}

/// A short string (its text only, without the kind byte).
fn choose_text<'a>(input: &mut Input<'a>) -> &'a [u8] {
    let size = input.below(6);
    input.bytes(size)
}

/// Appends one value of `style`, `depth` containers deep.
pub fn value(input: &mut Input<'_>, out: &mut Vec<u8>, depth: usize, style: Style) {
    let leaf = depth >= NESTING_MAX;
    let choices = match (leaf, style) {
        (true, _) => 6,
        (false, Style::Stored) => 10,
        (false, Style::Argument) => 13,
    };
    match input.below(choices) {
        0 | 1 => int(out, choose_int(input)),
        2 => out.push(input.pick(&[0xc0, 0xc2, 0xc3])),
        3 => bytes(out, KIND_STRING, choose_text(input)),
        4 => bytes(
            out,
            input.pick(&[KIND_BLOB, KIND_BLOB, 7, KIND_GEOJSON]),
            choose_text(input),
        ),
        5 => float(
            out,
            input.pick(&[0.0, -1.5, 1e300, f64::NAN, f64::INFINITY]),
        ),
        6 | 7 => list(input, out, depth, style),
        8 => map_value(input, out, depth, style),
        9 => ordered_container(input, out, depth, style),
        10 => out.extend_from_slice(input.pick(&[&WILDCARD, &INFINITY])),
        11 => hll(input, out),
        _ => hostile(input, out),
    }
}

/// Appends a list of up to [`ITEMS_MAX`] values.
pub fn list(input: &mut Input<'_>, out: &mut Vec<u8>, depth: usize, style: Style) {
    let count = input.below(ITEMS_MAX + 1);
    array(out, count);
    for _ in 0..count {
        value(input, out, depth + 1, style);
    }
}

/// Appends a map of up to [`ITEMS_MAX`] entries with integer or string keys (a key may repeat:
/// the engine's own business what it makes of that).
pub fn map_value(input: &mut Input<'_>, out: &mut Vec<u8>, depth: usize, style: Style) {
    let count = input.below(ITEMS_MAX + 1);
    map(out, count);
    for _ in 0..count {
        map_key(input, out);
        value(input, out, depth + 1, style);
    }
}

/// Appends a map key: a small integer or a one-letter string.
pub fn map_key(input: &mut Input<'_>, out: &mut Vec<u8>) {
    let choice = input.byte();
    match choice % 2 {
        0 => int(out, i64::from(choice >> 1) % 8),
        _ => bytes(out, KIND_STRING, &[b'a' + (choice >> 1) % 4]),
    }
}

/// Appends an ordered list or key-ordered map: the order extension counts as an item (for a
/// map, the pair extension + nil), as Aerospike packs them.
fn ordered_container(input: &mut Input<'_>, out: &mut Vec<u8>, depth: usize, style: Style) {
    let flags = input.pick(&[1u8, 3, 0x11]);
    let count = input.below(ITEMS_MAX);
    if input.byte().is_multiple_of(2) {
        array(out, count + 1);
        out.extend_from_slice(&[0xc7, 0x00, flags & 0x11]);
        for _ in 0..count {
            value(input, out, depth + 1, style);
        }
    } else {
        map(out, count + 1);
        out.extend_from_slice(&[0xc7, 0x00, flags, 0xc0]);
        for _ in 0..count {
            map_key(input, out);
            value(input, out, depth + 1, style);
        }
    }
}

/// Appends an empty HyperLogLog sketch of fuzz-chosen bit counts (valid or not), as a str of
/// kind [`KIND_HLL`].
pub fn hll(input: &mut Input<'_>, out: &mut Vec<u8>) {
    let index_bits = input.pick(&[4u8, 5, 8, 10, 3, 17]);
    let minhash_bits = input.pick(&[0u8, 4, 8, 51, 2]);
    let register_bits = (6 + usize::from(minhash_bits)) << index_bits.min(17);
    let mut sketch = vec![0, index_bits, minhash_bits, 0, 0, 0, 0, 0, 0, 0, 0];
    sketch.resize(11 + register_bits.div_ceil(8), 0);
    let fill = input.byte();
    if let Some(register) = sketch.get_mut(11 + usize::from(fill) % 4) {
        *register = fill;
    }
    bytes(out, KIND_HLL, &sketch);
}

/// Appends a shape meant to break decoders: a header declaring 2^32 - 1 items, or nesting
/// around the engine's depth limit (64).
fn hostile(input: &mut Input<'_>, out: &mut Vec<u8>) {
    match input.byte() % 3 {
        0 => out.extend_from_slice(&HUGE_ARRAY),
        1 => out.extend_from_slice(&[0xdf, 0xff, 0xff, 0xff, 0xff]),
        _ => {
            let depth = input.pick(&[62usize, 63, 64, 65, 66, 100, 1000]);
            out.extend(std::iter::repeat_n(0x91, depth));
            out.push(0x01);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_take_their_smallest_encoding() {
        let mut out = Vec::new();
        for value in [5, -5, 200, -100, 70_000, -70_000, i64::MIN] {
            int(&mut out, value);
        }
        let expected: &[u8] = &[
            0x05, 0xfb, 0xcc, 200, 0xd0, 0x9c, 0xce, 0, 1, 0x11, 0x70, 0xd2, 0xff, 0xfe, 0xee,
            0x90, 0xd3, 0x80, 0, 0, 0, 0, 0, 0, 0,
        ];
        assert_eq!(out, expected);
    }

    #[test]
    fn stored_values_are_complete_lists_whatever_the_input() {
        for seed in 0..=255u8 {
            let data: Vec<u8> = (0..64)
                .map(|i| seed.wrapping_mul(31).wrapping_add(i))
                .collect();
            let mut out = Vec::new();
            list(&mut Input::new(&data), &mut out, 0, Style::Stored);
            let found = crate::msgpack::reference_container(&out);
            assert_eq!(found, Some((true, false)), "{out:02x?}");
            assert_eq!(crate::msgpack::reference_has_special(&out), Some(false));
        }
    }
}
