use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::*;

fn int(n: i64) -> Value {
    Value::Int(n)
}

fn list(items: Vec<Value>) -> Value {
    Value::List(List {
        ordered: false,
        items,
    })
}

#[test]
fn types_order_as_aerospike_orders_them() {
    let ascending = [
        Value::Nil,
        Value::Bool(false),
        Value::Bool(true),
        int(-5),
        int(7),
        Value::string(b"a"),
        Value::string(b"ab"),
        Value::string(b"b"),
        list(vec![int(1)]),
        list(vec![int(1), int(0)]),
        list(vec![int(2)]),
        Value::Map(Map::default()),
        Value::Bytes {
            kind: KIND_BLOB,
            data: vec![0],
        },
        Value::Float(-1.0),
        Value::Float(2.5),
        Value::Infinity,
    ];
    for (i, a) in ascending.iter().enumerate() {
        for (j, b) in ascending.iter().enumerate() {
            assert_eq!(compare(a, b), i.cmp(&j), "{a:?} vs {b:?}");
        }
    }
}

#[test]
fn a_wildcard_equals_anything_and_ends_a_list_comparison() {
    assert!(equal(&Value::Wildcard, &int(3)));
    let prefix = list(vec![int(1), Value::Wildcard]);
    assert!(equal(&prefix, &list(vec![int(1), int(9), int(9)])));
    assert!(!equal(&prefix, &list(vec![int(2), int(9)])));
}

#[test]
fn values_pack_canonically_and_decode_back() {
    let mut map = Map {
        order: MapOrder::KeyOrdered,
        entries: Vec::new(),
    };
    map.entries
        .push((Value::string(b"k"), list(vec![int(-200), int(1 << 40)])));
    let value = list(vec![
        Value::Map(map),
        Value::Float(1.5),
        Value::Bool(true),
        Value::Nil,
        Value::Wildcard,
        Value::Bytes {
            kind: KIND_BLOB,
            data: vec![1; 40],
        },
    ]);
    let packed = pack(&value);
    let back = decode(&packed).expect("decodes");
    assert_eq!(pack(&back), packed);
    assert!(equal(&back, &value));
    let Value::List(items) = back else {
        panic!("a list")
    };
    let Value::Map(map) = &items.items[0] else {
        panic!("a map")
    };
    assert_eq!(map.order, MapOrder::KeyOrdered);
}

#[test]
fn integers_take_the_smallest_form() {
    for (number, size) in [
        (0, 1),
        (127, 1),
        (128, 2),
        (-32, 1),
        (-33, 2),
        (65535, 3),
        (-32769, 5),
        (i64::MIN, 9),
        (i64::MAX, 9),
    ] {
        let packed = pack(&int(number));
        assert_eq!(packed.len(), size, "{number}");
        assert_eq!(decode(&packed).unwrap().as_int(), Some(number));
    }
}

/// Random msgpack as a client might send it: each element in its smallest form or not
/// (wide integer and size forms, bin instead of str, float32, ext8 for a fixext size,
/// order headers with odd flags), sometimes malformed (an empty str, the reserved byte,
/// a map order header without its nil).
fn random_element(rng: &mut SmallRng, depth: usize, out: &mut Vec<u8>) {
    let pick = if depth >= 3 {
        rng.random_range(0..7)
    } else {
        rng.random_range(0..9)
    };
    match pick {
        0 => random_int(rng, out),
        1 | 2 => {
            let size = [0, 1, 2, 5, 31, 32, 40, 300][rng.random_range(0..8)];
            random_size_header(rng, [0xa0, 0xd9, 0xda, 0xdb, 0xc4, 0xc5, 0xc6], size, out);
            out.extend((0..size).map(|_| rng.random_range(2..6_u8)));
        }
        3 => match rng.random_range(0..2) {
            0 => out.extend_from_slice(&[0xca, 0x3f, 0xc0, 0, 0]),
            _ => {
                out.push(0xcb);
                out.extend_from_slice(&std::f64::consts::PI.to_be_bytes());
            }
        },
        4 => out.push([0xc0, 0xc2, 0xc3, 0xc1][rng.random_range(0..4)]),
        5 | 6 => {
            let size = [0, 1, 2, 3, 4, 8, 16][rng.random_range(0..7)];
            match (rng.random_range(0..2), size) {
                (0, 1 | 2 | 4 | 8 | 16) => out.push(ext_marker(size)),
                _ => out.extend_from_slice(&[0xc7, size as u8]),
            }
            out.push([0xff, 0x01, 0x07][rng.random_range(0..3)]);
            out.extend((0..size).map(|_| rng.random_range(0..2_u8)));
        }
        7 => {
            let count = rng.random_range(0..4);
            let header = rng.random_range(0..3) == 0;
            random_size_header(
                rng,
                [0x90, 0, 0xdc, 0xdd, 0, 0, 0],
                count + usize::from(header),
                out,
            );
            if header {
                out.extend_from_slice(&[0xc7, 0x00, [0, 1, 3][rng.random_range(0..3)]]);
            }
            (0..count).for_each(|_| random_element(rng, depth + 1, out));
        }
        _ => {
            let count = rng.random_range(0..4);
            let header = rng.random_range(0..3) == 0;
            random_size_header(
                rng,
                [0x80, 0, 0xde, 0xdf, 0, 0, 0],
                count + usize::from(header),
                out,
            );
            if header {
                out.extend_from_slice(&[0xc7, 0x00, [0, 1, 2, 3, 8][rng.random_range(0..5)]]);
                out.push(if rng.random_range(0..8) == 0 {
                    0x01
                } else {
                    0xc0
                });
            }
            (0..2 * count).for_each(|_| random_element(rng, depth + 1, out));
        }
    }
}

/// An integer near a form's bounds, in a random form that holds it (or, for a positive
/// number in a negative form, its bits).
fn random_int(rng: &mut SmallRng, out: &mut Vec<u8>) {
    let bounds = [
        0,
        0x7f,
        0x80,
        0xff,
        0x100,
        0xffff,
        0x1_0000,
        0xffff_ffff,
        0x1_0000_0000,
    ];
    let magnitude: i64 = bounds[rng.random_range(0..bounds.len())];
    let number = match rng.random_range(0..3) {
        0 => -magnitude - 1,
        1 => i64::MIN + magnitude,
        _ => magnitude,
    };
    let (marker, width) = [
        (0xcc, 1),
        (0xcd, 2),
        (0xce, 4),
        (0xcf, 8),
        (0xd0, 1),
        (0xd1, 2),
        (0xd2, 4),
        (0xd3, 8),
    ][rng.random_range(0..8)];
    match rng.random_range(0..2) {
        0 => pack_int(number, out),
        _ => {
            out.push(marker);
            out.extend_from_slice(&number.to_be_bytes()[8 - width..]);
        }
    }
}

/// A size header from `forms` (fix, 8-, 16-, 32-bit; then the bin forms, 0 where none):
/// any that holds `size`.
fn random_size_header(rng: &mut SmallRng, forms: [u8; 7], size: usize, out: &mut Vec<u8>) {
    loop {
        let form = rng.random_range(0..7);
        let marker = forms[form];
        match form {
            0 if marker != 0 && size <= if marker == 0xa0 { 31 } else { 15 } => {
                out.push(marker | size as u8);
            }
            1 | 4 if marker != 0 => out.extend_from_slice(&[marker, size as u8]),
            2 | 5 if marker != 0 => {
                out.push(marker);
                out.extend_from_slice(&(size as u16).to_be_bytes());
            }
            3 | 6 if marker != 0 => {
                out.push(marker);
                out.extend_from_slice(&(size as u32).to_be_bytes());
            }
            _ => continue,
        }
        return;
    }
}

#[test]
fn canonical_end_accepts_exactly_what_packs_back_to_itself() {
    // The packed map path trusts `canonical_end`: an element it accepts must decode and
    // pack back to the same bytes, and one that does must be accepted (or the fast path
    // would be taken too rarely to matter). Random encodings, canonical or not, some
    // malformed, some cut short, check both directions.
    let mut rng = SmallRng::seed_from_u64(crate::cdt::test_support::seed("canonical"));
    let (mut canonical, mut other) = (0, 0);
    for _ in 0..20_000 {
        let mut bytes = Vec::new();
        random_element(&mut rng, 0, &mut bytes);
        if rng.random_range(0..10) == 0 {
            bytes.truncate(rng.random_range(0..bytes.len()));
        }
        let accepted = canonical_end(&bytes, 0, 0) == Some(bytes.len());
        let round_trips = decode(&bytes).is_ok_and(|value| pack(&value) == bytes);
        assert_eq!(accepted, round_trips, "{bytes:02x?}");
        if accepted { canonical += 1 } else { other += 1 }
    }
    assert!(
        canonical > 2_000 && other > 2_000,
        "{canonical} canonical, {other} not"
    );
    let deep = [vec![0x91; DEPTH_MAX + 1], vec![0x01]].concat();
    assert_eq!(canonical_end(&deep, 0, 0), None);
    let fine = [vec![0x91; DEPTH_MAX], vec![0x01]].concat();
    assert_eq!(canonical_end(&fine, 0, 0), Some(fine.len()));
}

#[test]
fn packed_comparisons_order_as_the_decoded_values_do() {
    // Keys are compared where they lie (integers and strings without decoding); the
    // order must be `compare`'s on the decoded values, whatever the forms.
    let mut rng = SmallRng::seed_from_u64(crate::cdt::test_support::seed("packed compare"));
    for _ in 0..20_000 {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        random_element(&mut rng, 2, &mut a);
        random_element(&mut rng, 2, &mut b);
        let (Ok(x), Ok(y)) = (decode(&a), decode(&b)) else {
            continue;
        };
        let want = compare(&x, &y);
        assert_eq!(compare_packed(&a, &y), Ok(want), "{a:02x?} {b:02x?}");
        assert_eq!(compare_both_packed(&a, &b), Ok(want), "{a:02x?} {b:02x?}");
    }
}

#[test]
fn lying_counts_deep_nesting_and_truncation_are_parameter_errors() {
    // An array32 declaring four billion elements in six bytes allocates nothing.
    assert_eq!(
        decode(&[0xdd, 0xff, 0xff, 0xff, 0xff, 0x01]).unwrap_err(),
        ResultCode::Parameter
    );
    let deep = [vec![0x91; DEPTH_MAX + 2], vec![0x01]].concat();
    assert_eq!(decode(&deep).unwrap_err(), ResultCode::Parameter);
    let fine = [vec![0x91; DEPTH_MAX], vec![0x01]].concat();
    assert!(decode(&fine).is_ok());
    assert_eq!(decode(&[0x92, 0x01]).unwrap_err(), ResultCode::Parameter);
    assert_eq!(decode(&[0xc1]).unwrap_err(), ResultCode::Parameter);
    assert_eq!(decode(&[0x01, 0x02]).unwrap_err(), ResultCode::Parameter);
}
