use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::*;
use crate::cdt::value::List;

type Bin = Option<(u8, Vec<u8>)>;

/// Policy flags the tests use.
const PUT: i64 = 0;
const UPDATE: i64 = FLAG_UPDATE_ONLY as i64;
const CREATE: i64 = FLAG_CREATE_ONLY as i64;
const NO_FAIL: i64 = FLAG_NO_FAIL as i64;
const PARTIAL: i64 = FLAG_PARTIAL as i64;
/// Overflow actions.
const FAIL: i64 = 0;
const SATURATE: i64 = 2;
const WRAP: i64 = 4;

fn int(value: i64) -> Value {
    Value::Int(value)
}

fn bytes(data: &[u8]) -> Value {
    Value::Bytes {
        kind: value::KIND_BLOB,
        data: data.to_vec(),
    }
}

/// The payload `[code, args...]`.
fn payload(code: u8, args: &[Value]) -> Vec<u8> {
    let mut items = vec![int(i64::from(code))];
    items.extend_from_slice(args);
    value::pack(&Value::List(List {
        ordered: false,
        items,
    }))
}

/// One op as the Go client encodes it: its code and args.
type Call = (u8, Vec<Value>);

fn resize(flags: i64, size: i64, resize_flags: i64) -> Call {
    (RESIZE, vec![int(size), int(flags), int(resize_flags)])
}
fn insert(flags: i64, at: i64, data: &[u8]) -> Call {
    (INSERT, vec![int(at), bytes(data), int(flags)])
}
fn remove(flags: i64, at: i64, size: i64) -> Call {
    (REMOVE, vec![int(at), int(size), int(flags)])
}
fn bitwise(code: u8, flags: i64, offset: i64, size: i64, data: &[u8]) -> Call {
    (code, vec![int(offset), int(size), bytes(data), int(flags)])
}
fn not(flags: i64, offset: i64, size: i64) -> Call {
    (NOT, vec![int(offset), int(size), int(flags)])
}
fn shift(code: u8, flags: i64, offset: i64, size: i64, n: i64) -> Call {
    (code, vec![int(offset), int(size), int(n), int(flags)])
}
fn math(code: u8, offset: i64, size: i64, value: i64, signed: bool, action: i64) -> Call {
    let subflags = action | i64::from(signed);
    (
        code,
        vec![int(offset), int(size), int(value), int(PUT), int(subflags)],
    )
}
fn set_int(offset: i64, size: i64, value: i64) -> Call {
    (SET_INT, vec![int(offset), int(size), int(value), int(PUT)])
}
fn read_op(code: u8, offset: i64, size: i64) -> Call {
    (code, vec![int(offset), int(size)])
}
fn scan(code: u8, offset: i64, size: i64, value: bool) -> Call {
    (code, vec![int(offset), int(size), Value::Bool(value)])
}
fn get_int_op(offset: i64, size: i64, signed: bool) -> Call {
    let mut args = vec![int(offset), int(size)];
    if signed {
        args.push(int(INT_SIGNED as i64));
    }
    (GET_INT, args)
}

/// Runs one call, modify or read, on `bin`.
fn run(bin: &mut Bin, call: &Call) -> Result<Value, ResultCode> {
    let payload = payload(call.0, &call.1);
    match is_modify(call.0) {
        Some(true) => modify(&payload, bin),
        _ => read(
            &payload,
            bin.as_ref().map(|(kind, data)| (*kind, data.as_slice())),
        ),
    }
}

/// Runs `calls` in turn on a blob bin holding `initial` (missing when `None`); the bin's
/// bytes after them, each call succeeding.
fn apply(initial: Option<&[u8]>, calls: &[Call]) -> Vec<u8> {
    let mut bin = initial.map(|data| (BLOB, data.to_vec()));
    for call in calls {
        run(&mut bin, call).unwrap_or_else(|code| panic!("{call:?}: {code:?}"));
    }
    let (kind, data) = bin.expect("bin");
    assert_eq!(kind, BLOB);
    data
}

/// The results of read `calls` on a blob holding `initial`, as integers.
fn read_ints(initial: &[u8], calls: &[Call]) -> Vec<i64> {
    calls
        .iter()
        .map(
            |call| match read(&payload(call.0, &call.1), Some((BLOB, initial))) {
                Ok(Value::Int(value)) => value,
                other => panic!("{call:?}: {other:?}"),
            },
        )
        .collect()
}

/// The error `call` gives on a blob holding `initial` (missing when `None`).
fn error(initial: Option<&[u8]>, call: &Call) -> ResultCode {
    let mut bin = initial.map(|data| (BLOB, data.to_vec()));
    run(&mut bin, call).expect_err("an error")
}

/// The first error of `calls` run in turn on a blob holding `initial`.
fn first_error(initial: &[u8], calls: &[Call]) -> ResultCode {
    let mut bin = Some((BLOB, initial.to_vec()));
    for call in calls {
        if let Err(code) = run(&mut bin, call) {
            return code;
        }
    }
    panic!("no error from {calls:?}");
}

fn get_bytes(blob: &[u8], offset: i64, size: i64) -> Vec<u8> {
    match read(&payload(GET, &[int(offset), int(size)]), Some((BLOB, blob))) {
        Ok(Value::Bytes { kind: 4, data }) => data,
        other => panic!("{other:?}"),
    }
}

#[test]
fn codes() {
    assert_eq!(is_modify(RESIZE), Some(true));
    assert_eq!(is_modify(SET_INT), Some(true));
    assert_eq!(is_modify(13), None);
    assert_eq!(is_modify(GET), Some(false));
    assert_eq!(is_modify(GET_INT), Some(false));
    assert_eq!(is_modify(55), None);
    assert_eq!(is_modify(0xff), None);
}

// The expectations below are the Go client's `cdt_bitwise_test.go`.

#[test]
fn set_a_bin() {
    let bit0 = [0x80];
    let result = apply(
        Some(&[1, 2, 3, 4, 5, 6, 7, 8]),
        &[
            bitwise(SET, PUT, 1, 1, &bit0),
            bitwise(SET, UPDATE, 3, 1, &bit0),
            remove(UPDATE, 6, 2),
        ],
    );
    assert_eq!(result, [0x51, 2, 3, 4, 5, 6]);
    assert_eq!(apply(None, &[insert(CREATE, 1, &[0x0a])]), [0x00, 0x0a]);
    assert_eq!(
        error(None, &bitwise(SET, PUT, 1, 1, &bit0)),
        ResultCode::BinNotFound
    );
    assert_eq!(
        error(Some(&[0]), &bitwise(SET, CREATE, 1, 1, &bit0)),
        ResultCode::Parameter
    );
}

#[test]
fn set_bits() {
    let bits1 = [0x11, 0x22, 0x33];
    let initial = [
        0x01, 0x12, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x0E,
        0x0F, 0x10, 0x11, 0x41,
    ];
    let result = apply(
        Some(&initial),
        &[
            bitwise(SET, PUT, 1, 1, &[0x80]),
            bitwise(SET, PUT, 15, 1, &[0x80]),
            bitwise(SET, PUT, 16, 24, &bits1),
            bitwise(SET, PUT, 40, 22, &bits1),
            bitwise(SET, PUT, 73, 21, &bits1),
            bitwise(SET, PUT, 100, 20, &bits1),
            bitwise(SET, PUT, 120, 17, &bits1),
            bitwise(SET, PUT, 144, 1, &[0x80]),
        ],
    );
    let expected = [
        0x41, 0x13, 0x11, 0x22, 0x33, 0x11, 0x22, 0x33, 0x08, 0x08, 0x91, 0x1B, 0x01, 0x12, 0x23,
        0x11, 0x22, 0x11, 0xc1,
    ];
    assert_eq!(result, expected);
}

#[test]
fn lshift_bits() {
    let result = apply(
        Some(&[0x01, 0x01, 0x00, 0x80, 0xFF, 0x01, 0x01, 0x18, 0x01]),
        &[
            shift(LSHIFT, PUT, 0, 8, 1),
            shift(LSHIFT, PUT, 9, 7, 6),
            shift(LSHIFT, PUT, 23, 2, 1),
            shift(LSHIFT, PUT, 37, 18, 3),
            shift(LSHIFT, PUT, 58, 2, 1),
            shift(LSHIFT, PUT, 64, 4, 7),
        ],
    );
    assert_eq!(
        result,
        [0x02, 0x40, 0x01, 0x00, 0xF8, 0x08, 0x01, 0x28, 0x01]
    );
    let result = apply(Some(&[0xFF, 0xFF, 0xFF]), &[shift(LSHIFT, PUT, 0, 20, 15)]);
    assert_eq!(result, [0xF8, 0x00, 0x0F]);
}

#[test]
fn rshift_bits() {
    let result = apply(
        Some(&[0x80, 0x40, 0x01, 0x00, 0xFF, 0x01, 0x01, 0x18, 0x80]),
        &[
            shift(RSHIFT, PUT, 0, 8, 1),
            shift(RSHIFT, PUT, 9, 7, 6),
            shift(RSHIFT, PUT, 23, 2, 1),
            shift(RSHIFT, PUT, 37, 18, 3),
            shift(RSHIFT, PUT, 60, 2, 1),
            shift(RSHIFT, PUT, 68, 4, 7),
        ],
    );
    assert_eq!(
        result,
        [0x40, 0x01, 0x00, 0x80, 0xF8, 0xE0, 0x21, 0x14, 0x80]
    );
}

/// The Go client's OR, XOR and AND cases: five ops on the same blob.
fn logic(code: u8) -> Vec<u8> {
    let bits1 = [0x11, 0x22, 0x33];
    apply(
        Some(&[0x80, 0x40, 0x01, 0x00, 0x00, 0x01, 0x02, 0x03]),
        &[
            bitwise(code, PUT, 0, 5, &bits1),
            bitwise(code, PUT, 9, 7, &bits1),
            bitwise(code, PUT, 23, 6, &bits1),
            bitwise(code, PUT, 32, 8, &bits1),
            bitwise(code, PUT, 40, 24, &bits1),
        ],
    )
}

#[test]
fn or_xor_and_bits() {
    assert_eq!(logic(OR), [0x90, 0x48, 0x01, 0x20, 0x11, 0x11, 0x22, 0x33]);
    assert_eq!(logic(XOR), [0x90, 0x48, 0x01, 0x20, 0x11, 0x10, 0x20, 0x30]);
    assert_eq!(logic(AND), [0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x02, 0x03]);
}

#[test]
fn not_bits() {
    let result = apply(
        Some(&[0x80, 0x40, 0x01, 0x00, 0x00, 0x01, 0x02, 0x03]),
        &[
            not(PUT, 0, 5),
            not(PUT, 9, 7),
            not(PUT, 23, 6),
            not(PUT, 32, 8),
            not(PUT, 40, 24),
        ],
    );
    assert_eq!(result, [0x78, 0x3F, 0x00, 0xF8, 0xFF, 0xFE, 0xFD, 0xFC]);
}

#[test]
fn add_bits() {
    let result = apply(
        Some(&[
            0x38, 0x1F, 0x00, 0xE8, 0x7F, 0x00, 0x00, 0x00, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01,
            0x02, 0x02, 0x02, 0x03, 0x03, 0x03,
        ]),
        &[
            math(ADD, 0, 5, 1, false, FAIL),
            math(ADD, 9, 7, 1, false, FAIL),
            math(ADD, 23, 6, 0x21, false, FAIL),
            math(ADD, 32, 8, 1, false, FAIL),
            math(ADD, 40, 24, 0x7F7F7F, false, FAIL),
            math(ADD, 64, 20, 0x01010, false, FAIL),
            math(ADD, 92, 20, 0x10101, false, FAIL),
            math(ADD, 113, 22, 0x8082, false, FAIL),
            math(ADD, 136, 23, 0x20202, false, FAIL),
        ],
    );
    let expected = [
        0x40, 0x20, 0x01, 0xF0, 0x80, 0x7F, 0x7F, 0x7F, 0x02, 0x02, 0x01, 0x02, 0x02, 0x02, 0x03,
        0x03, 0x06, 0x07, 0x07, 0x07,
    ];
    assert_eq!(result, expected);

    let twice = |byte: i64, value: i64, signed: bool, action: i64| {
        let call = math(ADD, 8 * byte, 8, value, signed, action);
        [call.clone(), call]
    };
    let calls: Vec<Call> = [
        twice(0, 0xFF, false, WRAP),
        twice(1, 0x7F, true, WRAP),
        [
            math(ADD, 16, 8, 0x80, true, WRAP),
            math(ADD, 16, 8, 0xFF, true, WRAP),
        ],
        twice(3, 0x80, false, SATURATE),
        twice(4, 0x77, true, SATURATE),
        twice(5, 0x8F, true, SATURATE),
    ]
    .concat();
    let result = apply(Some(&[0; 6]), &calls);
    assert_eq!(result, [0xFE, 0xFE, 0x7F, 0xFF, 0x7F, 0x80]);

    for pair in [
        [
            math(ADD, 0, 8, 0xFF, false, FAIL),
            math(ADD, 0, 8, 0xFF, false, FAIL),
        ],
        [
            math(ADD, 0, 8, 0x7F, true, FAIL),
            math(ADD, 0, 8, 0x02, true, FAIL),
        ],
        [
            math(ADD, 0, 8, 0x81, true, FAIL),
            math(ADD, 0, 8, 0xFE, true, FAIL),
        ],
    ] {
        assert_eq!(first_error(&[0; 6], &pair), ResultCode::OpNotApplicable);
    }
}

#[test]
fn subtract_bits() {
    let result = apply(
        Some(&[
            0x38, 0x1F, 0x00, 0xE8, 0x7F, 0x80, 0x80, 0x80, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01,
            0x02, 0x02, 0x02, 0x03, 0x03, 0x03,
        ]),
        &[
            math(SUBTRACT, 0, 5, 0x01, false, FAIL),
            math(SUBTRACT, 9, 7, 0x01, false, FAIL),
            math(SUBTRACT, 23, 6, 0x03, false, FAIL),
            math(SUBTRACT, 32, 8, 0x01, false, FAIL),
            math(SUBTRACT, 40, 24, 0x10101, false, FAIL),
            math(SUBTRACT, 64, 20, 0x101, false, FAIL),
            math(SUBTRACT, 92, 20, 0x10101, false, FAIL),
            math(SUBTRACT, 113, 21, 0x101, false, FAIL),
            math(SUBTRACT, 136, 23, 0x11111, false, FAIL),
        ],
    );
    let expected = [
        0x30, 0x1E, 0x00, 0xD0, 0x7E, 0x7F, 0x7F, 0x7F, 0x00, 0xF0, 0xF1, 0x00, 0x00, 0x00, 0x01,
        0xFD, 0xFE, 0x00, 0xE0, 0xE1,
    ];
    assert_eq!(result, expected);

    let sub = |byte: i64, value: i64, signed: bool, action: i64| {
        math(SUBTRACT, 8 * byte, 8, value, signed, action)
    };
    let result = apply(
        Some(&[0; 6]),
        &[
            sub(0, 0x01, false, WRAP),
            sub(1, 0x80, true, WRAP),
            sub(1, 0x8A, true, WRAP),
            sub(2, 0x7F, true, WRAP),
            sub(2, 0x02, true, WRAP),
            sub(3, 0xAA, false, SATURATE),
            sub(4, 0x77, true, SATURATE),
            sub(4, 0x77, true, SATURATE),
            sub(5, 0x81, true, SATURATE),
            sub(5, 0x8F, true, SATURATE),
        ],
    );
    assert_eq!(result, [0xFF, 0xF6, 0x7F, 0x00, 0x80, 0x7F]);

    let fails: [&[Call]; 3] = [
        &[sub(0, 1, false, FAIL)],
        &[sub(0, 0x7F, true, FAIL), sub(0, 0x02, true, FAIL)],
        &[sub(0, 0x81, true, FAIL), sub(0, 0xFE, true, FAIL)],
    ];
    for calls in fails {
        assert_eq!(first_error(&[0; 6], calls), ResultCode::OpNotApplicable);
    }
}

#[test]
fn set_int_bits() {
    let result = apply(
        Some(&[
            0x38, 0x1F, 0x00, 0xE8, 0x7F, 0x80, 0x80, 0x80, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01,
            0x02, 0x02, 0x02, 0x03, 0x03, 0x03,
        ]),
        &[
            set_int(0, 5, 0x01),
            set_int(9, 7, 0x01),
            set_int(23, 6, 0x03),
            set_int(32, 8, 0x01),
            set_int(40, 24, 0x10101),
            set_int(64, 20, 0x101),
            set_int(92, 20, 0x10101),
            set_int(113, 21, 0x101),
            set_int(136, 23, 0x11111),
        ],
    );
    let expected = [
        0x08, 0x01, 0x00, 0x18, 0x01, 0x01, 0x01, 0x01, 0x00, 0x10, 0x11, 0x01, 0x01, 0x01, 0x00,
        0x04, 0x06, 0x02, 0x22, 0x23,
    ];
    assert_eq!(result, expected);
}

#[test]
fn get_bits_read() {
    let blob = [0xC1, 0xAA, 0xAA];
    let cases: [(i64, i64, &[u8]); 7] = [
        (0, 1, &[0x80]),
        (1, 1, &[0x80]),
        (7, 1, &[0x80]),
        (0, 8, &[0xC1]),
        (8, 16, &[0xAA, 0xAA]),
        (9, 15, &[0x55, 0x54]),
        (9, 14, &[0x55, 0x54]),
    ];
    for (offset, size, expected) in cases {
        assert_eq!(get_bytes(&blob, offset, size), expected, "{offset} {size}");
    }
}

#[test]
fn count_bits() {
    let calls: Vec<Call> = [(0, 1), (1, 1), (7, 1), (0, 8), (8, 16), (9, 15), (9, 14)]
        .into_iter()
        .map(|(offset, size)| read_op(COUNT, offset, size))
        .collect();
    assert_eq!(
        read_ints(&[0xC1, 0xAA, 0xAB], &calls),
        [1, 1, 1, 3, 9, 8, 7]
    );
}

/// The Go client's LSCAN and RSCAN arguments.
const SCANS: [(i64, i64, bool); 14] = [
    (0, 1, true),
    (0, 8, true),
    (0, 9, true),
    (0, 32, true),
    (0, 32, false),
    (1, 30, false),
    (32, 40, true),
    (33, 38, true),
    (32, 40, false),
    (33, 38, false),
    (0, 72, true),
    (0, 72, false),
    (-1, 1, true),
    (-1, 1, false),
];
const SCANNED: [u8; 9] = [0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x00, 0x01];

#[test]
fn lscan_bits() {
    let calls: Vec<Call> = SCANS
        .iter()
        .map(|&(offset, size, value)| scan(LSCAN, offset, size, value))
        .collect();
    assert_eq!(
        read_ints(&SCANNED, &calls),
        [0, 0, 0, 0, -1, -1, 39, -1, 0, 0, 0, 32, 0, -1]
    );
}

#[test]
fn rscan_bits() {
    let calls: Vec<Call> = SCANS
        .iter()
        .map(|&(offset, size, value)| scan(RSCAN, offset, size, value))
        .collect();
    assert_eq!(
        read_ints(&SCANNED, &calls),
        [0, 7, 8, 31, -1, -1, 39, -1, 38, 37, 71, 70, 0, -1]
    );
}

#[test]
fn get_int_bits() {
    let mut calls = Vec::new();
    for (offset, size) in [
        (4, 4),
        (0, 8),
        (7, 4),
        (8, 16),
        (9, 15),
        (9, 14),
        (5, 17),
        (-12, 4),
    ] {
        calls.push(get_int_op(offset, size, false));
        calls.push(get_int_op(offset, size, true));
    }
    let expected = [
        15, -1, 15, 15, 8, -8, 3840, 3840, 3840, 3840, 1920, 1920, 115648, -15424, 15, -1,
    ];
    assert_eq!(read_ints(&[0x0F, 0x0F, 0x00], &calls), expected);
}

/// The Go client's `assertBitModifyRegion`: on a blob of `len` 0xFF bytes, `calls` must
/// leave the `size` bits at `offset` zero and every other bit set (`inserted`: the calls
/// added `size` bits).
fn assert_region_cleared(len: usize, offset: i64, size: i64, inserted: bool, calls: &[Call]) {
    let mut bin = Some((BLOB, vec![0xFF; len]));
    for call in calls {
        run(&mut bin, call).unwrap_or_else(|code| panic!("{call:?}: {code:?}"));
    }
    let blob = bin.expect("bin").1;
    let bits = len as i64 * 8 + if inserted { size } else { 0 };
    let int_size = size.min(64);
    let ints = read_ints(
        &blob,
        &[
            scan(LSCAN, offset, size, true),
            scan(RSCAN, offset, size, true),
            get_int_op(offset, int_size, false),
            read_op(COUNT, offset, size),
            scan(LSCAN, 0, bits, false),
            scan(RSCAN, 0, bits, false),
        ],
    );
    let context = format!("len {len} offset {offset} size {size} {calls:?}");
    assert_eq!(ints, [-1, -1, 0, 0, offset, offset + size - 1], "{context}");
    let zeros = vec![0; (size as usize).div_ceil(8)];
    assert_eq!(get_bytes(&blob, offset, size), zeros, "{context}");
}

/// Each (offset, size) the Go client's region tests cover on a 15-byte blob.
fn regions(max_size: i64) -> impl Iterator<Item = (i64, i64)> {
    (1..=max_size).flat_map(|size| (0..=120 - size).map(move |offset| (offset, size)))
}

#[test]
fn region_set_and_not_and() {
    for (offset, size) in regions(80) {
        let zeros = vec![0; (size as usize).div_ceil(8)];
        for call in [
            bitwise(SET, PUT, offset, size, &zeros),
            bitwise(AND, PUT, offset, size, &zeros),
            not(PUT, offset, size),
        ] {
            assert_region_cleared(15, offset, size, false, &[call]);
        }
    }
}

#[test]
fn region_shifts() {
    for (offset, size) in regions(4) {
        let zeros = vec![0; (size as usize).div_ceil(8)];
        for n in 0..=size + 1 {
            for code in [LSHIFT, RSHIFT] {
                let calls = [
                    bitwise(SET, PUT, offset, size, &zeros),
                    shift(code, PUT, offset, size, n),
                ];
                assert_region_cleared(15, offset, size, false, &calls);
            }
        }
    }
    // PARTIAL: ops running past the end are cut at it.
    for size in 1..=4_i64 {
        let zeros = vec![0; (size as usize).div_ceil(8)];
        for offset in 120 - size + 1..120 {
            let calls = [
                bitwise(SET, PARTIAL, offset, size, &zeros),
                shift(RSHIFT, PARTIAL, offset, size, 1),
            ];
            assert_region_cleared(15, offset, 120 - offset, false, &calls);
        }
    }
}

#[test]
fn region_insert() {
    for size in 1..=10_usize {
        let zeros = vec![0; size];
        for at in 0..=15_i64 {
            let calls = [insert(PUT, at, &zeros)];
            assert_region_cleared(15, at * 8, size as i64 * 8, true, &calls);
        }
    }
}

#[test]
fn region_add_subtract() {
    for (offset, size) in regions(64) {
        let all_ones = (u64::MAX >> (64 - size)) as i64;
        for call in [
            math(ADD, offset, size, 1, false, WRAP),
            math(SUBTRACT, offset, size, all_ones, false, WRAP),
        ] {
            assert_region_cleared(15, offset, size, false, &[call]);
        }
    }
}

#[test]
fn empty_blob() {
    let empty = Some(&[][..]);
    let buf = [0x80];
    let not_applicable = [
        bitwise(SET, PUT, 0, 1, &buf),
        bitwise(OR, PUT, 0, 1, &buf),
        bitwise(XOR, PUT, 0, 1, &buf),
        bitwise(AND, PUT, 0, 1, &buf),
        not(PUT, 0, 1),
        shift(LSHIFT, PUT, 0, 1, 1),
        shift(RSHIFT, PUT, 0, 1, 1),
        math(ADD, 0, 1, 1, false, FAIL),
        math(SUBTRACT, 0, 1, 1, false, FAIL),
        set_int(0, 1, 1),
        read_op(GET, 0, 1),
        read_op(COUNT, 0, 1),
        scan(LSCAN, 0, 1, true),
        scan(RSCAN, 0, 1, true),
        get_int_op(0, 1, false),
    ];
    for call in &not_applicable {
        assert_eq!(error(empty, call), ResultCode::OpNotApplicable, "{call:?}");
    }
    assert_eq!(error(empty, &remove(PUT, 0, 1)), ResultCode::Parameter);
    assert_eq!(apply(empty, &[insert(PUT, 0, &[7])]), [7]);
}

#[test]
fn resize_bits() {
    let mut bin: Bin = None;
    let calls = [
        (resize(PUT, 20, 0), None),
        (read_op(GET, 19 * 8, 8), Some(19 * 8)),
        (resize(NO_FAIL, 10, RESIZE_GROW_ONLY as i64), None),
        (read_op(GET, 19 * 8, 8), Some(19 * 8)),
        (resize(PUT, 10, RESIZE_SHRINK_ONLY as i64), None),
        (read_op(GET, 9 * 8, 8), Some(9 * 8)),
        (resize(NO_FAIL, 30, RESIZE_SHRINK_ONLY as i64), None),
        (read_op(GET, 9 * 8, 8), Some(9 * 8)),
        (resize(PUT, 19, RESIZE_GROW_ONLY as i64), None),
        (read_op(GET, 18 * 8, 8), Some(18 * 8)),
        (resize(NO_FAIL, 0, RESIZE_GROW_ONLY as i64), None),
        (resize(PUT, 0, RESIZE_SHRINK_ONLY as i64), None),
    ];
    for (call, get) in &calls {
        let result = run(&mut bin, call).unwrap_or_else(|code| panic!("{call:?}: {code:?}"));
        match get {
            Some(_) => assert!(
                matches!(&result, Value::Bytes { kind: 4, data } if data == &[0]),
                "{result:?}"
            ),
            None => assert!(matches!(result, Value::Nil)),
        }
    }
    assert_eq!(bin, Some((BLOB, Vec::new())));
}

#[test]
fn resize_flags() {
    let blob: &[u8] = &[1, 2, 3];
    let front = RESIZE_FROM_FRONT as i64;
    assert_eq!(apply(Some(blob), &[resize(PUT, 5, 0)]), [1, 2, 3, 0, 0]);
    assert_eq!(apply(Some(blob), &[resize(PUT, 5, front)]), [0, 0, 1, 2, 3]);
    assert_eq!(apply(Some(blob), &[resize(PUT, 1, 0)]), [1]);
    assert_eq!(apply(Some(blob), &[resize(PUT, 1, front)]), [3]);
    assert_eq!(apply(None, &[resize(PUT, 2, 0)]), [0, 0]);
    let grow_only = RESIZE_GROW_ONLY as i64;
    let shrink_only = RESIZE_SHRINK_ONLY as i64;
    assert_eq!(
        error(Some(blob), &resize(PUT, 1, grow_only)),
        ResultCode::Parameter
    );
    assert_eq!(
        error(Some(blob), &resize(PUT, 4, shrink_only)),
        ResultCode::Parameter
    );
    assert_eq!(
        error(Some(blob), &resize(PUT, 4, grow_only | shrink_only)),
        ResultCode::Parameter
    );
    assert_eq!(error(Some(blob), &resize(PUT, 4, 8)), ResultCode::Parameter);
    // A resize to 0 of a missing bin leaves it missing.
    let mut bin: Bin = None;
    assert!(run(&mut bin, &resize(PUT, 0, 0)).is_ok());
    assert_eq!(bin, None);
    // UPDATE_ONLY on a missing bin, CREATE_ONLY on an existing one.
    assert_eq!(error(None, &resize(UPDATE, 4, 0)), ResultCode::BinNotFound);
    assert_eq!(
        error(Some(blob), &resize(CREATE, 4, 0)),
        ResultCode::BinExists
    );
    assert_eq!(apply(Some(blob), &[resize(CREATE | NO_FAIL, 4, 0)]), blob);
    assert_eq!(apply(None, &[resize(CREATE, 1, 0)]), [0]);
}

#[test]
fn sizes_are_capped_before_allocation() {
    // Past the cap while parsing, and a result of exactly the cap.
    for size in [
        1 << 40,
        PROTO_SIZE_MAX as i64 + 1,
        PROTO_SIZE_MAX as i64,
        -1,
    ] {
        assert_eq!(
            error(Some(&[1]), &resize(PUT, size, 0)),
            ResultCode::Parameter
        );
        assert_eq!(error(None, &resize(PUT, size, 0)), ResultCode::Parameter);
    }
    let big_insert = insert(PUT, PROTO_SIZE_MAX as i64, &[1]);
    assert_eq!(error(None, &big_insert), ResultCode::Parameter);
    let far_insert = insert(PUT, PROTO_SIZE_MAX as i64 - 1, &[1]);
    assert_eq!(error(None, &far_insert), ResultCode::Parameter);
    for offset in [i64::MIN, i64::MAX, PROTO_BITS_MAX as i64 + 1] {
        let call = bitwise(SET, PUT, offset, 1, &[0]);
        assert_eq!(error(Some(&[0]), &call), ResultCode::Parameter, "{offset}");
    }
    let call = remove(PUT, 0, PROTO_SIZE_MAX as i64 + 1);
    assert_eq!(error(Some(&[0]), &call), ResultCode::Parameter);
    let call = shift(LSHIFT, PUT, 0, 8, PROTO_BITS_MAX as i64 + 1);
    assert_eq!(error(Some(&[0]), &call), ResultCode::Parameter);
    // A huge shift within the cap just clears the region.
    assert_eq!(
        apply(
            Some(&[0xff]),
            &[shift(LSHIFT, PUT, 0, 8, PROTO_BITS_MAX as i64)]
        ),
        [0]
    );
}

#[test]
fn insert_and_remove() {
    let blob: &[u8] = &[1, 2, 3, 4, 5];
    assert_eq!(
        apply(Some(blob), &[insert(PUT, 1, &[0xFF, 0xC7])]),
        [1, 0xFF, 0xC7, 2, 3, 4, 5]
    );
    assert_eq!(
        apply(Some(blob), &[insert(PUT, 7, &[9])]),
        [1, 2, 3, 4, 5, 0, 0, 9]
    );
    assert_eq!(
        apply(Some(blob), &[insert(PUT, -1, &[9])]),
        [1, 2, 3, 4, 9, 5]
    );
    assert_eq!(
        error(Some(blob), &insert(PUT, -6, &[9])),
        ResultCode::Parameter
    );
    assert_eq!(error(None, &insert(PUT, -1, &[9])), ResultCode::Parameter);
    assert_eq!(
        error(Some(blob), &insert(PUT, 0, &[])),
        ResultCode::Parameter
    );
    assert_eq!(apply(Some(blob), &[remove(PUT, 2, 3)]), [1, 2]);
    assert_eq!(apply(Some(blob), &[remove(PUT, -2, 1)]), [1, 2, 3, 5]);
    assert_eq!(error(Some(blob), &remove(PUT, 3, 3)), ResultCode::Parameter);
    assert_eq!(apply(Some(blob), &[remove(PARTIAL, 3, 3)]), [1, 2, 3]);
    assert_eq!(apply(Some(blob), &[remove(NO_FAIL, 3, 3)]), blob);
    assert_eq!(error(Some(blob), &remove(PUT, 5, 1)), ResultCode::Parameter);
    assert_eq!(error(Some(blob), &remove(PUT, 0, 0)), ResultCode::Parameter);
    assert_eq!(error(None, &remove(PUT, 0, 1)), ResultCode::BinNotFound);
    assert_eq!(apply(Some(blob), &[remove(PUT, 0, 5)]), []);
}

#[test]
fn bounds_and_flags() {
    let blob: &[u8] = &[0xF0, 0x0F];
    // Past the end: OP_NOT_APPLICABLE, or a no-op under NO_FAIL, or cut under PARTIAL.
    let past = bitwise(SET, PUT, 12, 8, &[0xFF]);
    assert_eq!(error(Some(blob), &past), ResultCode::OpNotApplicable);
    assert_eq!(
        error(Some(blob), &read_op(GET, 16, 1)),
        ResultCode::OpNotApplicable
    );
    assert_eq!(
        error(Some(blob), &read_op(GET, 9, 8)),
        ResultCode::OpNotApplicable
    );
    assert_eq!(
        apply(Some(blob), &[bitwise(SET, NO_FAIL, 12, 8, &[0xFF])]),
        blob
    );
    assert_eq!(
        apply(Some(blob), &[bitwise(SET, PARTIAL, 12, 8, &[0x00])]),
        [0xF0, 0x00]
    );
    assert_eq!(apply(Some(blob), &[not(PARTIAL, -4, 8)]), [0xF0, 0x00]);
    let past_int = math(ADD, 12, 8, 1, false, FAIL);
    assert_eq!(error(Some(blob), &past_int), ResultCode::OpNotApplicable);
    // Integer ops take no PARTIAL.
    let call = (ADD, vec![int(0), int(8), int(1), int(PARTIAL), int(0)]);
    assert_eq!(error(Some(blob), &call), ResultCode::Parameter);
    // Negative offsets past the start.
    assert_eq!(
        error(Some(blob), &read_op(GET, -17, 1)),
        ResultCode::Parameter
    );
    assert_eq!(get_bytes(blob, -16, 4), [0xF0]);
    // Flag combinations and unknown bits.
    let both = bitwise(SET, CREATE | UPDATE, 0, 1, &[0]);
    assert_eq!(error(Some(blob), &both), ResultCode::Parameter);
    assert_eq!(
        error(Some(blob), &bitwise(SET, 16, 0, 1, &[0])),
        ResultCode::Parameter
    );
    let sat_wrap = math(ADD, 0, 8, 1, false, SATURATE | WRAP);
    assert_eq!(error(Some(blob), &sat_wrap), ResultCode::Parameter);
    let bad_action = math(ADD, 0, 8, 1, false, 8);
    assert_eq!(error(Some(blob), &bad_action), ResultCode::Parameter);
    let bad_signed = (GET_INT, vec![int(0), int(8), int(2)]);
    assert_eq!(error(Some(blob), &bad_signed), ResultCode::Parameter);
    // Integer sizes are 1 to 64 bits; bit sizes at least 1; a short buffer is refused.
    assert_eq!(
        error(Some(blob), &get_int_op(0, 65, false)),
        ResultCode::Parameter
    );
    assert_eq!(error(Some(blob), &set_int(0, 0, 1)), ResultCode::Parameter);
    assert_eq!(
        error(Some(blob), &read_op(COUNT, 0, 0)),
        ResultCode::Parameter
    );
    assert_eq!(
        error(Some(blob), &bitwise(OR, PUT, 0, 9, &[0xFF])),
        ResultCode::Parameter
    );
    // UPDATE_ONLY and NO_FAIL on a missing bin.
    assert_eq!(
        error(None, &insert(UPDATE, 0, &[1])),
        ResultCode::BinNotFound
    );
    let mut bin: Bin = None;
    assert!(run(&mut bin, &not(NO_FAIL, 0, 1)).is_ok());
    assert_eq!(bin, None);
    // An overflow under NO_FAIL leaves the blob as it was.
    let overflow = (
        ADD,
        vec![int(0), int(8), int(0x20), int(NO_FAIL), int(FAIL)],
    );
    assert_eq!(apply(Some(blob), &[overflow]), blob);
}

#[test]
fn wide_integers() {
    let blob = [0xFF; 9];
    assert_eq!(read_ints(&blob, &[get_int_op(4, 64, false)]), [-1]);
    assert_eq!(read_ints(&blob, &[get_int_op(4, 64, true)]), [-1]);
    assert_eq!(read_ints(&blob, &[get_int_op(4, 63, false)]), [i64::MAX]);
    let result = apply(Some(&[0; 9]), &[set_int(4, 64, -1)]);
    assert_eq!(
        result,
        [0x0F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xF0]
    );
    // Saturating signed 64-bit arithmetic.
    let max = apply(
        Some(&[0; 8]),
        &[
            set_int(0, 64, i64::MAX),
            math(ADD, 0, 64, 1, true, SATURATE),
        ],
    );
    assert_eq!(max, i64::MAX.to_be_bytes());
    let min = apply(
        Some(&[0; 8]),
        &[
            set_int(0, 64, i64::MIN),
            math(SUBTRACT, 0, 64, 1, true, SATURATE),
        ],
    );
    assert_eq!(min, i64::MIN.to_be_bytes());
    let call = math(ADD, 0, 64, 1, false, FAIL);
    assert_eq!(
        first_error(&[0xFF; 8], &[call]),
        ResultCode::OpNotApplicable
    );
    assert_eq!(
        apply(Some(&[0xFF; 8]), &[math(ADD, 0, 64, 1, false, SATURATE)]),
        [0xFF; 8]
    );
    assert_eq!(
        apply(Some(&[0x80]), &[math(ADD, 0, 1, 1, false, WRAP)]),
        [0x00]
    );
}

#[test]
fn bin_types_and_payloads() {
    let string = Some((3_u8, b"abc".to_vec()));
    let get = payload(GET, &[int(0), int(8)]);
    assert_eq!(
        read(&get, Some((3, b"abc"))).err(),
        Some(ResultCode::IncompatibleType)
    );
    assert!(matches!(read(&get, None), Ok(Value::Nil)));
    let mut bin = string.clone();
    let set = payload(SET, &[int(0), int(8), bytes(&[1]), int(PUT)]);
    assert_eq!(
        modify(&set, &mut bin).err(),
        Some(ResultCode::IncompatibleType)
    );
    // A read code sent as a modify and the reverse, unknown codes, malformed payloads.
    let mut blob: Bin = Some((BLOB, vec![0]));
    assert_eq!(modify(&get, &mut blob).err(), Some(ResultCode::Parameter));
    assert_eq!(
        read(&set, Some((BLOB, &[0]))).err(),
        Some(ResultCode::Parameter)
    );
    for bad in [
        payload(13, &[]),
        payload(GET, &[int(0)]),
        payload(GET, &[int(0), int(8), int(0)]),
        payload(LSCAN, &[int(0), int(8), int(1)]),
        payload(GET, &[bytes(&[0]), int(8)]),
        value::pack(&int(GET.into())),
        value::pack(&Value::List(List::default())),
        vec![0x92, 0x32],
        vec![],
    ] {
        assert_eq!(
            read(&bad, Some((BLOB, &[0]))).err(),
            Some(ResultCode::Parameter)
        );
    }
    // Bit ops on a blob nested in a list or map are not implemented.
    let nested = value::pack(&Value::List(List {
        ordered: false,
        items: vec![
            int(0xff),
            Value::List(List::default()),
            Value::List(List {
                ordered: false,
                items: vec![int(GET.into()), int(0), int(8)],
            }),
        ],
    }));
    assert_eq!(
        read(&nested, Some((BLOB, &[0]))).err(),
        Some(ResultCode::UnsupportedFeature)
    );
}

/// The seed of a randomized test: `OSPREY_BITS_SEED` when set, else from the clock;
/// printed so that a failure can be replayed.
fn seed() -> u64 {
    let seed = std::env::var("OSPREY_BITS_SEED")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |elapsed| elapsed.as_nanos() as u64)
        });
    println!("OSPREY_BITS_SEED={seed}");
    seed
}

fn to_bools(blob: &[u8]) -> Vec<bool> {
    blob.iter()
        .flat_map(|byte| (0..8).map(move |bit| byte & (0x80 >> bit) != 0))
        .collect()
}

fn from_bools(bits: &[bool]) -> Vec<u8> {
    bits.chunks(8)
        .map(|chunk| {
            chunk
                .iter()
                .enumerate()
                .fold(0, |byte, (bit, &set)| byte | (u8::from(set) << (7 - bit)))
        })
        .collect()
}

#[test]
fn randomized_against_reference() {
    let mut rng = SmallRng::seed_from_u64(seed());
    for _ in 0..3000 {
        let len = rng.random_range(1..=24_usize);
        let blob: Vec<u8> = (0..len).map(|_| rng.random()).collect();
        let bits = len * 8;
        let offset = rng.random_range(0..bits);
        let size = rng.random_range(1..=bits - offset);
        // Half the time, the offset counted from the end.
        let sent = match rng.random_bool(0.5) {
            true => offset as i64 - bits as i64,
            false => offset as i64,
        };
        let arg: Vec<u8> = (0..size.div_ceil(8)).map(|_| rng.random()).collect();
        let arg_bits = to_bools(&arg);
        let code = [SET, OR, XOR, AND, NOT, LSHIFT, RSHIFT][rng.random_range(0..7)];
        let n = rng.random_range(0..=size + 2);
        let call = match code {
            NOT => not(PUT, sent, size as i64),
            LSHIFT | RSHIFT => shift(code, PUT, sent, size as i64, n as i64),
            _ => bitwise(code, PUT, sent, size as i64, &arg),
        };
        let mut expected = to_bools(&blob);
        let region: Vec<bool> = expected[offset..offset + size].to_vec();
        for i in 0..size {
            let old = region[i];
            expected[offset + i] = match code {
                SET => arg_bits[i],
                OR => old | arg_bits[i],
                XOR => old ^ arg_bits[i],
                AND => old & arg_bits[i],
                NOT => !old,
                LSHIFT => i + n < size && region[i + n],
                _ => i >= n && region[i - n],
            };
        }
        let context = format!("{blob:02x?} {call:?}");
        let result = apply(Some(&blob), &[call]);
        assert_eq!(result, from_bools(&expected), "{context}");
        // Reads of the changed region agree with the reference.
        let changed = &expected[offset..offset + size];
        let mut padded = changed.to_vec();
        padded.resize(size.div_ceil(8) * 8, false);
        assert_eq!(
            get_bytes(&result, sent, size as i64),
            from_bools(&padded),
            "{context}"
        );
        let ones = changed.iter().filter(|&&bit| bit).count() as i64;
        let first = |value: bool| changed.iter().position(|&bit| bit == value);
        let last = |value: bool| changed.iter().rposition(|&bit| bit == value);
        let index = |found: Option<usize>| found.map_or(-1, |at| at as i64);
        let value = rng.random_bool(0.5);
        let reads = [
            read_op(COUNT, sent, size as i64),
            scan(LSCAN, sent, size as i64, value),
            scan(RSCAN, sent, size as i64, value),
        ];
        let expected_reads = [ones, index(first(value)), index(last(value))];
        assert_eq!(read_ints(&result, &reads), expected_reads, "{context}");
        if size <= 64 {
            let number = changed
                .iter()
                .fold(0_u64, |number, &bit| (number << 1) | u64::from(bit));
            let got = read_ints(&result, &[get_int_op(sent, size as i64, false)]);
            assert_eq!(got, [number as i64], "{context}");
        }
    }
}

#[test]
fn random_payloads_never_panic() {
    let mut rng = SmallRng::seed_from_u64(seed());
    for _ in 0..20_000 {
        let code = [
            RESIZE, INSERT, REMOVE, SET, NOT, LSHIFT, ADD, GET, LSCAN, RSCAN, GET_INT,
        ][rng.random_range(0..11)];
        let arity = rng.random_range(0..6);
        let args: Vec<Value> = (0..arity)
            .map(|_| match rng.random_range(0..4) {
                0 => int(rng.random_range(-40..40)),
                1 => int(rng.random()),
                2 => Value::Bool(rng.random()),
                _ => bytes(&[rng.random(); 3][..rng.random_range(0..3)]),
            })
            .collect();
        let bytes = payload(code, &args);
        let blob = vec![0x5A; rng.random_range(0..6)];
        let _ = read(&bytes, Some((BLOB, &blob)));
        let mut bin = match rng.random_bool(0.8) {
            true => Some((BLOB, blob)),
            false => None,
        };
        let _ = modify(&bytes, &mut bin);
        if let Some((_, data)) = &bin {
            assert!(data.len() < 100, "{args:?}");
        }
    }
}
