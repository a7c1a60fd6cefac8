use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::*;
use crate::cdt::map::{INCREMENT, PUT_ITEMS};
use crate::cdt::test_support::seed;
use crate::cdt::value::{KIND_BLOB, KIND_STRING, List, Map, MapOrder};
use crate::cdt::{self, Call};
use model::ParticleType;

const MAP: u8 = ParticleType::Map as u8;

/// A key a stored map may hold: mostly integers, strings and blobs, now and then one no op
/// may write (a double, a list, nil, a wildcard: a plain write may store any of them).
fn random_key(rng: &mut SmallRng) -> Value {
    match rng.random_range(0..40) {
        0..=1 => Value::Float(1.5),
        2..=3 => int_list(&[rng.random_range(0..3)]),
        4 => Value::Nil,
        5 => Value::Wildcard,
        _ => random_valid_key(rng),
    }
}

/// An integer, a string or a blob (of two kinds, which compare by their bytes alone).
fn random_valid_key(rng: &mut SmallRng) -> Value {
    match rng.random_range(0..3) {
        0 => Value::Int(rng.random_range(-3..12)),
        1 => Value::string(format!("k{}", rng.random_range(0..12)).as_bytes()),
        _ => Value::Bytes {
            kind: [KIND_BLOB, 5][rng.random_range(0..2)],
            data: vec![rng.random_range(0..3); rng.random_range(0..3)],
        },
    }
}

fn random_value(rng: &mut SmallRng) -> Value {
    match rng.random_range(0..7) {
        0 => Value::Int(rng.random_range(-200..70_000)),
        1 => Value::string(&vec![b'v'; rng.random_range(0..40)]),
        2 => Value::Float(-2.5),
        3 => int_list(&[1, rng.random_range(0..300)]),
        4 => Value::Map(Map {
            order: MapOrder::KeyOrdered,
            entries: vec![(Value::Int(1), Value::Bool(true))],
        }),
        5 => Value::Nil,
        _ => Value::Bool(false),
    }
}

fn int_list(items: &[i64]) -> Value {
    Value::List(List {
        ordered: false,
        items: items.iter().map(|&n| Value::Int(n)).collect(),
    })
}

/// A map of 0 to 19 entries (either side of the 16 that need a wider header), in a random
/// order: a key-ordered one mostly sorted, now and then not (a client may write one that
/// is not) or with a repeated key; an unordered one sorted or not.
fn random_map(rng: &mut SmallRng) -> Map {
    let order = [
        MapOrder::Unordered,
        MapOrder::KeyOrdered,
        MapOrder::KeyValueOrdered,
    ][rng.random_range(0..3)];
    let mut entries: Vec<(Value, Value)> = (0..rng.random_range(0..20))
        .map(|_| (random_key(rng), random_value(rng)))
        .collect();
    let sort = order.is_key_sorted() || rng.random_range(0..2) == 0;
    if sort && rng.random_range(0..10) != 0 {
        entries.sort_by(|a, b| value::compare(&a.0, &b.0));
    }
    if rng.random_range(0..10) != 0 {
        entries.dedup_by(|a, b| value::equal(&a.0, &b.0));
    }
    Map { order, entries }
}

/// `map` packed; now and then in a form that is not canonical (a map16 header for a small
/// map, a value as a 64-bit integer or a bin) or with a byte after it, which the fast path
/// must leave alone.
fn random_bytes(rng: &mut SmallRng, map: &Map) -> Vec<u8> {
    let mut bytes = value::pack(&Value::Map(map.clone()));
    match rng.random_range(0..12) {
        0 if bytes[0] & 0xf0 == 0x80 => {
            let count = bytes[0] & 0x0f;
            bytes.splice(0..1, [0xde, 0x00, count]);
        }
        1 => {
            let mut entries = Vec::new();
            value::pack_map_header(map.order, map.entries.len() + 1, &mut entries);
            bytes.splice(0..bytes.len() - packed_entries_len(map), entries);
            bytes.extend_from_slice(&[0x01, 0xd3, 0, 0, 0, 0, 0, 0, 0, 7]);
        }
        2 => {
            let mut entries = Vec::new();
            value::pack_map_header(map.order, map.entries.len() + 1, &mut entries);
            bytes.splice(0..bytes.len() - packed_entries_len(map), entries);
            bytes.extend_from_slice(&[0x02, 0xc4, 0x02, KIND_STRING, b'x']);
        }
        3 => bytes.push(0x01),
        _ => {}
    }
    bytes
}

fn packed_entries_len(map: &Map) -> usize {
    let mut out = Vec::new();
    for (key, stored) in &map.entries {
        value::pack_into(key, &mut out);
        value::pack_into(stored, &mut out);
    }
    out.len()
}

/// An ADD, PUT or REPLACE of a key the map holds or not (now and then one no op may write,
/// or a wildcard), with random flags and order attribute; now and then another op, or the
/// wrong number of arguments, which the general path refuses.
fn random_call(rng: &mut SmallRng, map: &Map) -> Call {
    let codes = [
        PUT, PUT, PUT, PUT, PUT, PUT, ADD, REPLACE, PUT_ITEMS, INCREMENT,
    ];
    let code = codes[rng.random_range(0..codes.len())];
    let key = match rng.random_range(0..20) {
        0..=9 if !map.entries.is_empty() => map.entries[rng.random_range(0..map.entries.len())]
            .0
            .clone(),
        10 => Value::Float(0.5),
        11 => Value::Wildcard,
        _ => random_valid_key(rng),
    };
    let stored = match rng.random_range(0..30) {
        0 => int_list(&[1]).clone_with_wildcard(),
        _ => random_value(rng),
    };
    let mut args = vec![key, stored];
    let options = match code {
        PUT => rng.random_range(0..3),
        ADD => rng.random_range(0..2),
        _ => 0,
    };
    if options > 0 {
        args.push(Value::Int(rng.random_range(0..4)));
    }
    if options > 1 {
        args.push(Value::Int(rng.random_range(0..16)));
    }
    if rng.random_range(0..30) == 0 {
        args.push(Value::string(b"odd"));
    }
    Call {
        context: Vec::new(),
        code,
        args,
    }
}

trait WithWildcard {
    fn clone_with_wildcard(&self) -> Value;
}

impl WithWildcard for Value {
    /// The list with a wildcard appended.
    fn clone_with_wildcard(&self) -> Value {
        let Value::List(list) = self else {
            panic!("a list")
        };
        let mut items = list.items.clone();
        items.push(Value::Wildcard);
        Value::List(List {
            ordered: false,
            items,
        })
    }
}

/// What a fast-path outcome was, to check that the test reached each.
#[derive(Default, Debug)]
struct Reached {
    replaced: usize,
    inserted: usize,
    refused_quietly: usize,
    refused: usize,
    general_path: usize,
}

/// Runs `call` on `bytes` both ways; panics unless the fast path, where it runs, answers
/// what the general path answers and leaves the same bytes.
fn compare_paths(call: &Call, bytes: &[u8], reached: &mut Reached) {
    let fast = cdt::modify_packed(call, MAP, bytes);
    let mut bin = match value::from_particle(MAP, bytes) {
        Ok(decoded) => Some(decoded),
        Err(_) => {
            assert!(
                fast.is_none(),
                "{call:?} on {bytes:02x?}: fast path on a bad map"
            );
            return;
        }
    };
    let size_before = match &bin {
        Some(Value::Map(map)) => map.entries.len(),
        _ => usize::MAX,
    };
    let general = cdt::modify(call, &mut bin);
    let context = format!("{call:?} on {bytes:02x?}");
    match fast {
        None => reached.general_path += 1,
        Some(Err(code)) => {
            assert_eq!(general.unwrap_err(), code, "{context}");
            reached.refused += 1;
        }
        Some(Ok(written)) => {
            let general = general.unwrap_or_else(|code| panic!("{context}: general {code:?}"));
            assert_eq!(general.as_int(), Some(written.size), "{context}");
            let packed = value::pack(bin.as_ref().expect("a map"));
            match &written.bytes {
                None => reached.refused_quietly += 1,
                Some(_) if written.size == len_i64(size_before) => reached.replaced += 1,
                Some(_) => reached.inserted += 1,
            }
            let got = written.bytes.unwrap_or_else(|| bytes.to_vec());
            assert_eq!(got, packed, "{context}");
        }
    }
}

#[test]
fn a_put_on_the_packed_map_matches_the_general_path_byte_for_byte() {
    // Random maps (every order, sorted or not, canonical or not, keys of every kind) and
    // random single-key writes; each runs on the packed bytes and on the decoded map, and
    // where the packed path runs it must answer the same and leave the same bytes.
    let mut rng = SmallRng::seed_from_u64(seed("packed map put"));
    let mut reached = Reached::default();
    for _ in 0..20_000 {
        let map = random_map(&mut rng);
        let bytes = random_bytes(&mut rng, &map);
        let call = random_call(&mut rng, &map);
        compare_paths(&call, &bytes, &mut reached);
    }
    // Other ops, keys no op may write, wildcards and maps that are not canonical or not
    // sorted take the general path by design; about half the calls are such.
    let fast = reached.replaced + reached.inserted + reached.refused_quietly + reached.refused;
    assert!(fast > reached.general_path / 2, "{reached:?}");
    assert!(
        reached.replaced > 1000 && reached.inserted > 1000,
        "{reached:?}"
    );
    assert!(
        reached.refused_quietly > 200 && reached.refused > 200,
        "{reached:?}"
    );
}

#[test]
fn a_new_key_goes_where_the_general_path_puts_it() {
    // Insertion points: in key order for an ordered map; for an unordered one, before the
    // first greater key of its leading ascending run, else at the end.
    let unordered = [3, 5, 9, 4, 1];
    for (order, stored) in [
        (MapOrder::KeyOrdered, &[1, 3, 5, 9][..]),
        (MapOrder::Unordered, &unordered),
    ] {
        for key in 0..11 {
            let map = Map {
                order,
                entries: stored
                    .iter()
                    .map(|&k| (Value::Int(k), Value::Nil))
                    .collect(),
            };
            let call = Call {
                context: Vec::new(),
                code: PUT,
                args: vec![Value::Int(key), Value::Int(-key)],
            };
            let mut reached = Reached::default();
            compare_paths(&call, &value::pack(&Value::Map(map)), &mut reached);
            assert_eq!(reached.general_path, 0, "{order:?} {key}");
        }
    }
}

#[test]
fn a_key_ordered_map_out_of_order_lands_where_the_binary_search_does() {
    // A client may write a key-ordered map whose keys are not sorted; the general path's
    // binary search then lands where a scan may not, and the packed path must land there too.
    for stored in [[5, 1, 9, 2, 7], [9, 7, 5, 3, 1], [1, 9, 2, 8, 3]] {
        for key in 0..11 {
            let map = Map {
                order: MapOrder::KeyOrdered,
                entries: stored
                    .iter()
                    .map(|&k| (Value::Int(k), Value::Nil))
                    .collect(),
            };
            let call = Call {
                context: Vec::new(),
                code: PUT,
                args: vec![Value::Int(key), Value::Int(-key)],
            };
            let mut reached = Reached::default();
            compare_paths(&call, &value::pack(&Value::Map(map)), &mut reached);
            assert_eq!(reached.general_path, 0, "{stored:?} {key}");
        }
    }
}

#[test]
fn a_stored_wildcard_key_equals_any_key_as_in_the_general_path() {
    // A plain write may store a map whose key is a wildcard; Aerospike's order makes it equal
    // to every key, so a put of any key replaces its value, on either path.
    let bytes = [0x82, 0x01, 0x02, 0xd4, 0xff, 0x00, 0x03];
    for key in [Value::Int(1), Value::Int(7), Value::string(b"k")] {
        let call = Call {
            context: Vec::new(),
            code: PUT,
            args: vec![key, Value::Int(9)],
        };
        let mut reached = Reached::default();
        compare_paths(&call, &bytes, &mut reached);
        assert_eq!(reached.replaced, 1, "{call:?}");
    }
}
