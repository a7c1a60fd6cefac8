//! Map writes on the packed bytes: an ADD, PUT or REPLACE of one key on a stored map, done on
//! its msgpack bytes, as Aerospike works on its packed maps, rather than on a decoded tree.
//!
//! One pass over the entries checks them and finds the key: an unordered map's by comparing
//! each key's bytes with the op's key packed, a key-ordered map's by a binary search over the
//! keys read in place (integers and strings are compared where they lie, never copied into
//! owned values); values are stepped over. The new map is then the bytes before the written
//! spot, the written value (or, for a new key, the pair) packed, and the bytes after it,
//! under a header rewritten for the new count.
//!
//! Invariants:
//! - The result, bytes and answer, is the general path's ([`super::modify`] on the decoded
//!   map, packed back whole): the pass runs only over a map whose every element is canonical
//!   ([`value::canonical_end`]: decoded and packed again, it gives back its bytes), so packing
//!   the decoded map would change nothing outside the written spot, and both paths pack what
//!   they write with [`value::pack_into`].
//! - A key is found as the general path finds it: in a key-ordered map by the same binary
//!   search over the same comparisons (so that even a map a client wrote out of order gives
//!   the same answer); in an unordered one by the first equal key, then (for a new key) the
//!   same insertion rule.
//! - Anything else is `None`, and the caller takes the general path: arguments it refuses,
//!   a map that is not canonical, bytes that are not exactly one map.

use std::cmp::Ordering;
use std::ops::Range;

use model::ResultCode;

use super::{ADD, PUT, PutOne, REPLACE, len_i64};
use crate::cdt::value::{self, KIND_BLOB, MapHeader, Value};

/// What a packed write did: the map's new bytes (`None`: left as it was) and its size (the
/// op's answer).
#[derive(Debug)]
pub(crate) struct PackedWrite {
    pub(crate) bytes: Option<Vec<u8>>,
    pub(crate) size: i64,
}

/// Runs ADD, PUT or REPLACE `code` with `args` on the map packed in `bytes` (a MAP bin's).
/// `None` when the op or the map is not one this path takes (see the module's invariants).
///
/// # Errors
/// ELEMENT_EXISTS or ELEMENT_NOT_FOUND for a write the op's flags refuse.
pub(crate) fn put_one(
    code: u8,
    args: &[Value],
    bytes: &[u8],
) -> Option<Result<PackedWrite, ResultCode>> {
    if !matches!(code, ADD | PUT | REPLACE) {
        return None;
    }
    let put = PutOne::parse(code, args).ok()?;
    let header = value::canonical_map_header(bytes)?;
    let place = find(bytes, header, put.key)?;
    let size = len_i64(header.entry_count);
    let allowed = match put.control.allows(matches!(place, Place::Existing(_))) {
        Ok(allowed) => allowed,
        Err(refusal) => return Some(Err(refusal)),
    };
    let write = match allowed {
        false => PackedWrite { bytes: None, size },
        true => write(bytes, header, place, &put),
    };
    Some(Ok(write))
}

/// Where a key is in a packed map, or where it goes.
enum Place {
    /// It is there; its value is at this range.
    Existing(Range<usize>),
    /// It is not; a new pair goes at this offset.
    New(usize),
}

/// One entry of a packed map: where its key starts, where its value starts and ends.
#[derive(Clone, Copy)]
struct Entry {
    key_at: usize,
    value_at: usize,
    end: usize,
}

/// A wildcard, packed: equal to any key (see [`value::compare`]).
const WILDCARD_PACKED: [u8; 3] = [0xd4, 0xff, 0x00];

/// Where `key` is in the map, or where it would be inserted, as [`super::find_key`] decides;
/// `None` for a map this path does not take.
fn find(bytes: &[u8], header: MapHeader, key: &Value) -> Option<Place> {
    if header.order.is_key_sorted() {
        return find_sorted(bytes, header, key);
    }
    let key_packed = value::pack(key);
    let mut position = header.entries_at;
    let mut existing = None;
    for _ in 0..header.entry_count {
        let entry = entry_at(bytes, position)?;
        if existing.is_none() && equals(&bytes[entry.key_at..entry.value_at], key, &key_packed) {
            existing = Some(entry.value_at..entry.end);
        }
        position = entry.end;
    }
    if position != bytes.len() {
        return None;
    }
    Some(match existing {
        Some(value_at) => Place::Existing(value_at),
        None => Place::New(unordered_insertion_point(bytes, header, key)),
    })
}

/// The entry at `position`, if its key and value are canonical.
fn entry_at(bytes: &[u8], position: usize) -> Option<Entry> {
    let value_at = value::canonical_end(bytes, position, 1)?;
    let end = value::canonical_end(bytes, value_at, 1)?;
    Some(Entry {
        key_at: position,
        value_at,
        end,
    })
}

/// Whether the canonical key `stored` equals `key` (packed: `key_packed`) in Aerospike's
/// order. An integer or a string equals only itself, whose canonical bytes are unique, or a
/// wildcard; a blob equals any blob kind with its bytes, so it is compared.
fn equals(stored: &[u8], key: &Value, key_packed: &[u8]) -> bool {
    match key {
        Value::Bytes {
            kind: KIND_BLOB, ..
        } => value::compare_packed(stored, key) == Ok(Ordering::Equal),
        _ => stored == key_packed || stored == WILDCARD_PACKED,
    }
}

/// In a key-ordered map, the general path's binary search, run on the packed keys: the same
/// search on the same comparisons lands on the same entry, sorted keys or not.
fn find_sorted(bytes: &[u8], header: MapHeader, key: &Value) -> Option<Place> {
    let mut entries = Vec::with_capacity(header.entry_count.min(bytes.len()));
    let mut position = header.entries_at;
    for _ in 0..header.entry_count {
        let entry = entry_at(bytes, position)?;
        entries.push(entry);
        position = entry.end;
    }
    if position != bytes.len() {
        return None;
    }
    let found = entries.binary_search_by(|entry| {
        let stored = &bytes[entry.key_at..entry.value_at];
        value::compare_packed(stored, key).expect("a canonical key decodes")
    });
    Some(match found {
        Ok(at) => Place::Existing(entries[at].value_at..entries[at].end),
        Err(at) => Place::New(entries.get(at).map_or(bytes.len(), |entry| entry.key_at)),
    })
}

/// Where a new `key` goes in an unordered canonical map: before the first greater key of the
/// leading strictly ascending run, else at the end (see [`super::unordered_insertion_point`]).
fn unordered_insertion_point(bytes: &[u8], header: MapHeader, key: &Value) -> usize {
    let mut position = header.entries_at;
    let mut previous: Option<&[u8]> = None;
    for _ in 0..header.entry_count {
        let entry = entry_at(bytes, position).expect("a map checked canonical");
        let stored = &bytes[entry.key_at..entry.value_at];
        let ascending = previous.is_none_or(|previous| {
            let order = value::compare_both_packed(previous, stored);
            order.expect("canonical keys decode").is_lt()
        });
        if !ascending {
            break;
        }
        let order = value::compare_packed(stored, key).expect("a canonical key decodes");
        if order.is_gt() {
            return position;
        }
        previous = Some(stored);
        position = entry.end;
    }
    bytes.len()
}

/// The map `bytes` with `put` written at `place`.
fn write(bytes: &[u8], header: MapHeader, place: Place, put: &PutOne<'_>) -> PackedWrite {
    let mut out = Vec::with_capacity(bytes.len() + 16);
    let entry_count = match place {
        Place::Existing(value_at) => {
            out.extend_from_slice(&bytes[..value_at.start]);
            value::pack_into(put.value, &mut out);
            out.extend_from_slice(&bytes[value_at.end..]);
            header.entry_count
        }
        Place::New(at) => {
            let entry_count = header.entry_count + 1;
            value::pack_map_header(header.order, entry_count, &mut out);
            out.extend_from_slice(&bytes[header.entries_at..at]);
            value::pack_into(put.key, &mut out);
            value::pack_into(put.value, &mut out);
            out.extend_from_slice(&bytes[at..]);
            entry_count
        }
    };
    PackedWrite {
        bytes: Some(out),
        size: len_i64(entry_count),
    }
}

#[cfg(test)]
mod tests;
