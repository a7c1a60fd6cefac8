use std::collections::BTreeMap;

use super::*;

// Return types.
const RT_NONE: i64 = 0;
const RT_INDEX: i64 = 1;
const RT_REVERSE_INDEX: i64 = 2;
const RT_RANK: i64 = 3;
const RT_REVERSE_RANK: i64 = 4;
const RT_COUNT: i64 = 5;
const RT_KEY: i64 = 6;
const RT_VALUE: i64 = 7;
const RT_KEY_VALUE: i64 = 8;
const RT_EXISTS: i64 = 13;
const RT_ORDERED_MAP: i64 = 17;
const INVERTED: i64 = 0x10000;

fn int(n: i64) -> Value {
    Value::Int(n)
}

fn s(text: &str) -> Value {
    Value::string(text.as_bytes())
}

fn ints(items: &[i64]) -> Value {
    list(items.iter().map(|&n| int(n)).collect())
}

fn strs(items: &[&str]) -> Value {
    list(items.iter().map(|t| s(t)).collect())
}

fn pairs(entries: Vec<(Value, Value)>) -> Value {
    Value::Map(Map {
        order: MapOrder::Unordered,
        entries,
    })
}

fn int_pairs(entries: &[(i64, i64)]) -> Value {
    pairs(entries.iter().map(|&(k, v)| (int(k), int(v))).collect())
}

fn str_pairs(entries: &[(&str, i64)]) -> Value {
    pairs(entries.iter().map(|&(k, v)| (s(k), int(v))).collect())
}

/// `map` as a KEY_VALUE result: the same entries, with the preserve-order header.
fn kv(map: Value) -> Value {
    match map {
        Value::Map(map) => Value::Map(Map {
            order: MapOrder::PreserveOrder,
            ..map
        }),
        other => panic!("not a map: {other:?}"),
    }
}

/// Runs op `code` (read or modify, as it is) on `bin`.
fn op(code: u8, args: Vec<Value>, bin: &mut Option<Value>) -> Result<Value, ResultCode> {
    match is_modify(code).expect("a map op") {
        true => modify(code, &args, bin),
        false => read(code, &args, bin.as_ref()),
    }
}

/// Runs op `code` and checks its result is `expected` (by Aerospike equality, header
/// order flags included).
fn check(code: u8, args: Vec<Value>, bin: &mut Option<Value>, expected: Value) {
    let got = op(code, args.clone(), bin).expect("op succeeds");
    assert!(
        value::pack(&got) == value::pack(&expected),
        "op {code} {args:?}: got {got:?}, expected {expected:?}"
    );
}

fn entries_of(bin: &Option<Value>) -> Vec<(Value, Value)> {
    match bin {
        Some(Value::Map(map)) => map.entries.clone(),
        other => panic!("not a map: {other:?}"),
    }
}

/// The Go client's four-name map, written with PUT_ITEMS (default policy).
fn names() -> Option<Value> {
    let mut bin = None;
    let items = str_pairs(&[("Charlie", 55), ("Jim", 98), ("John", 76), ("Harry", 82)]);
    check(PUT_ITEMS, vec![items], &mut bin, int(4));
    bin
}

#[test]
fn op_codes_split_into_reads_and_modifies() {
    assert_eq!(is_modify(PUT), Some(true));
    assert_eq!(is_modify(REMOVE_BY_VALUE_REL_RANK_RANGE), Some(true));
    assert_eq!(is_modify(SIZE), Some(false));
    assert_eq!(is_modify(GET_BY_VALUE_REL_RANK_RANGE), Some(false));
    for code in [0, 63, 71, 72, 80, 90, 95, 101, 111, 255] {
        assert_eq!(is_modify(code), None, "{code}");
    }
}

#[test]
fn missing_bins_and_wrong_types() {
    let mut bin = None;
    check(SIZE, vec![], &mut bin, Value::Nil);
    check(
        GET_BY_KEY,
        vec![int(RT_VALUE), int(1)],
        &mut bin,
        Value::Nil,
    );
    check(
        REMOVE_BY_KEY,
        vec![int(RT_VALUE), int(1)],
        &mut bin,
        Value::Nil,
    );
    check(CLEAR, vec![], &mut bin, Value::Nil);
    assert!(bin.is_none());
    assert_eq!(
        op(REPLACE, vec![int(1), int(2)], &mut bin).unwrap_err(),
        ResultCode::ElementNotFound
    );
    assert_eq!(
        op(REPLACE_ITEMS, vec![int_pairs(&[(1, 2)])], &mut None).unwrap_err(),
        ResultCode::ElementNotFound
    );
    let mut wrong = Some(int(5));
    assert_eq!(
        op(PUT, vec![int(1), int(2)], &mut wrong).unwrap_err(),
        ResultCode::IncompatibleType
    );
    assert_eq!(
        op(SIZE, vec![], &mut wrong).unwrap_err(),
        ResultCode::IncompatibleType
    );
    // Keys are integers, strings or blobs.
    assert_eq!(
        op(PUT, vec![Value::Float(1.0), int(2)], &mut None).unwrap_err(),
        ResultCode::Parameter
    );
    assert_eq!(
        op(PUT, vec![ints(&[1]), int(2)], &mut None).unwrap_err(),
        ResultCode::Parameter
    );
    // Too many or too few arguments.
    assert_eq!(
        op(REPLACE, vec![int(1), int(2), int(0)], &mut None).unwrap_err(),
        ResultCode::Parameter
    );
    assert_eq!(
        op(GET_BY_KEY, vec![int(RT_VALUE)], &mut Some(int_pairs(&[]))).unwrap_err(),
        ResultCode::Parameter
    );
}

#[test]
fn put_keeps_an_unordered_sorted_map_sorted_and_set_type_reorders() {
    // Go: "should create a valid CDT Map and then Switch Policy For Order".
    let mut bin = None;
    for (n, (k, v)) in [(4, 1), (3, 2), (2, 3), (1, 4)].into_iter().enumerate() {
        check(PUT, vec![int(k), int(v)], &mut bin, int(n as i64 + 1));
    }
    check(
        GET_BY_INDEX,
        vec![int(RT_KEY_VALUE), int(2)],
        &mut bin,
        kv(int_pairs(&[(3, 2)])),
    );
    let all = int_pairs(&[(1, 4), (2, 3), (3, 2), (4, 1)]);
    check(
        GET_BY_INDEX_RANGE,
        vec![int(RT_KEY_VALUE), int(0), int(10)],
        &mut bin,
        kv(all),
    );
    check(SET_TYPE, vec![int(1)], &mut bin, Value::Nil);
    check(
        GET_BY_KEY_INTERVAL,
        vec![int(RT_COUNT), int(3), int(5)],
        &mut bin,
        int(2),
    );
    check(
        GET_BY_KEY_INTERVAL,
        vec![int(RT_KEY_VALUE), int(-5), int(2)],
        &mut bin,
        kv(int_pairs(&[(1, 4)])),
    );
    // An unsorted map (as a plain write stores it): a new key goes to the end once the
    // leading ascending run ends; SET_TYPE sorts.
    let mut bin = Some(int_pairs(&[(5, 0), (1, 0), (9, 0)]));
    op(PUT, vec![int(7), int(0)], &mut bin).unwrap();
    let keys: Vec<_> = entries_of(&bin)
        .iter()
        .map(|e| e.0.as_int().unwrap())
        .collect();
    assert_eq!(keys, [5, 1, 9, 7]);
    op(PUT, vec![int(3), int(0)], &mut bin).unwrap();
    let keys: Vec<_> = entries_of(&bin)
        .iter()
        .map(|e| e.0.as_int().unwrap())
        .collect();
    assert_eq!(keys, [3, 5, 1, 9, 7]);
    check(GET_BY_INDEX, vec![int(RT_KEY), int(2)], &mut bin, int(5));
    check(SET_TYPE, vec![int(3)], &mut bin, Value::Nil);
    let keys: Vec<_> = entries_of(&bin)
        .iter()
        .map(|e| e.0.as_int().unwrap())
        .collect();
    assert_eq!(keys, [1, 3, 5, 7, 9]);
    assert_eq!(
        op(SET_TYPE, vec![int(4)], &mut bin).unwrap_err(),
        ResultCode::OpNotApplicable
    );
    // SET_TYPE on a missing bin creates an empty map of that order.
    let mut bin = None;
    check(SET_TYPE, vec![int(1)], &mut bin, Value::Nil);
    assert!(matches!(&bin, Some(Value::Map(m)) if m.order == MapOrder::KeyOrdered));
}

#[test]
fn put_items_with_write_modes() {
    // Go: "should create a valid CDT Map using MapPutItemsOp".
    let mut bin = None;
    let add = pairs(vec![
        (int(12), s("myValue")),
        (int(-8734), s("str2")),
        (int(1), s("my default")),
    ]);
    check(ADD_ITEMS, vec![add, int(1)], &mut bin, int(3));
    let put = pairs(vec![(int(12), s("myval12222")), (int(13), s("str13"))]);
    check(PUT_ITEMS, vec![put], &mut bin, int(4));
    check(
        REPLACE_ITEMS,
        vec![pairs(vec![(int(13), s("myval2"))])],
        &mut bin,
        int(4),
    );
    let replace = pairs(vec![(int(12), int(23)), (int(-8734), s("changed"))]);
    check(REPLACE_ITEMS, vec![replace], &mut bin, int(4));
    check(
        GET_BY_KEY,
        vec![int(RT_VALUE), int(1)],
        &mut bin,
        s("my default"),
    );
    check(
        GET_BY_KEY,
        vec![int(RT_VALUE), int(-8734)],
        &mut bin,
        s("changed"),
    );
    check(
        GET_BY_KEY_INTERVAL,
        vec![int(RT_KEY_VALUE), int(12), int(15)],
        &mut bin,
        kv(pairs(vec![(int(12), int(23)), (int(13), s("myval2"))])),
    );
    let keys: Vec<_> = entries_of(&bin).iter().map(|e| e.0.clone()).collect();
    assert!(
        keys.iter()
            .zip([-8734, 1, 12, 13])
            .all(|(k, n)| k.as_int() == Some(n))
    );
    assert_eq!(
        op(ADD_ITEMS, vec![int_pairs(&[(1, 1)])], &mut bin).unwrap_err(),
        ResultCode::ElementExists
    );
    assert_eq!(
        op(REPLACE_ITEMS, vec![int_pairs(&[(2, 1)])], &mut bin).unwrap_err(),
        ResultCode::ElementNotFound
    );
}

#[test]
fn write_flags_no_fail_and_partial() {
    // Go: "should support MapWriteFlagsPartial & MapWriteFlagsNoFail".
    let items = int_pairs(&[(0, 17), (4, 2), (5, 15), (9, 10)]);
    let (mut one, mut two) = (None, None);
    check(PUT_ITEMS, vec![items.clone()], &mut one, int(4));
    check(PUT_ITEMS, vec![items], &mut two, int(4));
    let more = int_pairs(&[(3, 3), (5, 15)]);
    let partial = CREATE_ONLY | DO_PARTIAL | NO_FAIL;
    check(
        PUT_ITEMS,
        vec![more.clone(), int(0), int(partial)],
        &mut one,
        int(5),
    );
    check(
        PUT_ITEMS,
        vec![more.clone(), int(0), int(CREATE_ONLY | NO_FAIL)],
        &mut two,
        int(4),
    );
    assert_eq!(
        op(PUT_ITEMS, vec![more, int(0), int(CREATE_ONLY)], &mut two).unwrap_err(),
        ResultCode::ElementExists
    );
    // Single PUT flags.
    check(
        PUT,
        vec![int(4), int(1), int(0), int(CREATE_ONLY | NO_FAIL)],
        &mut two,
        int(4),
    );
    check(
        PUT,
        vec![int(7), int(1), int(0), int(UPDATE_ONLY | NO_FAIL)],
        &mut two,
        int(4),
    );
    assert_eq!(
        op(
            PUT,
            vec![int(7), int(1), int(0), int(UPDATE_ONLY)],
            &mut two
        )
        .unwrap_err(),
        ResultCode::ElementNotFound
    );
    assert_eq!(
        op(ADD, vec![int(4), int(1)], &mut two).unwrap_err(),
        ResultCode::ElementExists
    );
    check(REPLACE, vec![int(4), int(8)], &mut two, int(4));
    check(GET_BY_KEY, vec![int(RT_VALUE), int(4)], &mut two, int(8));
}

#[test]
fn increments_and_rank_reads() {
    // Go: "... apply Inc/Dec operations and Get Correct Values".
    let mut bin = names();
    check(INCREMENT, vec![s("John"), int(5)], &mut bin, int(81));
    check(DECREMENT, vec![s("Jim"), int(4)], &mut bin, int(94));
    let rank_range = |rank, count, rt| vec![int(rt), int(rank), int(count)];
    check(
        GET_BY_RANK_RANGE,
        rank_range(-2, 2, RT_KEY),
        &mut bin,
        strs(&["Harry", "Jim"]),
    );
    check(
        GET_BY_RANK_RANGE,
        rank_range(0, 2, RT_KEY_VALUE),
        &mut bin,
        kv(str_pairs(&[("Charlie", 55), ("John", 81)])),
    );
    check(GET_BY_RANK, vec![int(RT_VALUE), int(0)], &mut bin, int(55));
    check(GET_BY_RANK, vec![int(RT_KEY), int(2)], &mut bin, s("Harry"));
    let interval = |rt| vec![int(rt), int(90), int(95)];
    check(
        GET_BY_VALUE_INTERVAL,
        interval(RT_RANK),
        &mut bin,
        ints(&[3]),
    );
    check(GET_BY_VALUE_INTERVAL, interval(RT_COUNT), &mut bin, int(1));
    check(
        GET_BY_VALUE_INTERVAL,
        interval(RT_KEY_VALUE),
        &mut bin,
        kv(str_pairs(&[("Jim", 94)])),
    );
    check(
        GET_BY_VALUE_INTERVAL,
        vec![int(RT_KEY), int(81), int(82)],
        &mut bin,
        strs(&["John"]),
    );
    check(
        GET_ALL_BY_VALUE,
        vec![int(RT_KEY), int(77)],
        &mut bin,
        strs(&[]),
    );
    check(
        GET_ALL_BY_VALUE,
        vec![int(RT_RANK), int(81)],
        &mut bin,
        ints(&[1]),
    );
    check(
        GET_BY_KEY,
        vec![int(RT_RANK), s("Charlie")],
        &mut bin,
        int(0),
    );
    check(
        GET_BY_KEY,
        vec![int(RT_REVERSE_RANK), s("Charlie")],
        &mut bin,
        int(3),
    );
    let wanted = list(vec![s("Charlie"), s("Jim")]);
    check(
        GET_BY_KEY_LIST,
        vec![int(RT_KEY), wanted],
        &mut bin,
        strs(&["Charlie", "Jim"]),
    );
    check(
        GET_BY_VALUE_LIST,
        vec![int(RT_KEY), ints(&[55, 94])],
        &mut bin,
        strs(&["Charlie", "Jim"]),
    );
    // Numbers: missing key, nil delta, float rules, non-numbers.
    check(INCREMENT, vec![s("New")], &mut bin, int(1));
    check(INCREMENT, vec![s("New"), Value::Nil], &mut bin, int(2));
    check(
        INCREMENT,
        vec![s("New"), Value::Float(2.7)],
        &mut bin,
        int(4),
    );
    check(
        INCREMENT,
        vec![s("F"), Value::Float(1.5)],
        &mut bin,
        Value::Float(1.5),
    );
    check(
        DECREMENT,
        vec![s("F"), int(2)],
        &mut bin,
        Value::Float(-0.5),
    );
    check(PUT, vec![s("S"), s("x")], &mut bin, int(7));
    assert_eq!(
        op(INCREMENT, vec![s("S"), int(1)], &mut bin).unwrap_err(),
        ResultCode::Parameter
    );
    assert_eq!(
        op(INCREMENT, vec![s("New"), s("1")], &mut bin).unwrap_err(),
        ResultCode::Parameter
    );
    check(
        INCREMENT,
        vec![s("Max"), int(i64::MAX)],
        &mut bin,
        int(i64::MAX),
    );
    check(INCREMENT, vec![s("Max"), int(1)], &mut bin, int(i64::MIN));
}

#[test]
fn inverted_selections() {
    // Go: "... Get via MapReturnType.INVERTED".
    let mut bin = names();
    let rank_range = |rank, count, rt| vec![int(rt | INVERTED), int(rank), int(count)];
    check(
        GET_BY_RANK_RANGE,
        rank_range(-2, 2, RT_KEY),
        &mut bin,
        strs(&["Charlie", "John"]),
    );
    check(
        GET_BY_RANK_RANGE,
        rank_range(0, 2, RT_KEY_VALUE),
        &mut bin,
        kv(str_pairs(&[("Harry", 82), ("Jim", 98)])),
    );
    let interval = |rt| vec![int(rt | INVERTED), int(90), int(95)];
    check(
        GET_BY_VALUE_INTERVAL,
        interval(RT_RANK),
        &mut bin,
        ints(&[0, 1, 2, 3]),
    );
    check(GET_BY_VALUE_INTERVAL, interval(RT_COUNT), &mut bin, int(4));
    let all = str_pairs(&[("Charlie", 55), ("Harry", 82), ("Jim", 98), ("John", 76)]);
    check(
        GET_BY_VALUE_INTERVAL,
        interval(RT_KEY_VALUE),
        &mut bin,
        kv(all),
    );
    let keys = strs(&["Charlie", "Harry", "Jim", "John"]);
    let inverted = |rt, v| vec![int(rt | INVERTED), int(v)];
    check(GET_ALL_BY_VALUE, inverted(RT_KEY, 77), &mut bin, keys);
    check(
        GET_ALL_BY_VALUE,
        inverted(RT_RANK, 81),
        &mut bin,
        ints(&[0, 1, 2, 3]),
    );
    // Single-element ops refuse INVERTED.
    assert_eq!(
        op(GET_BY_KEY, inverted(RT_KEY, 1), &mut bin).unwrap_err(),
        ResultCode::OpNotApplicable
    );
}

/// The Go client's seven-name map.
fn seven() -> Option<Value> {
    let mut bin = None;
    let items = str_pairs(&[
        ("Charlie", 55),
        ("Jim", 98),
        ("John", 76),
        ("Harry", 82),
        ("Sally", 79),
        ("Lenny", 84),
        ("Abe", 88),
    ]);
    check(PUT_ITEMS, vec![items], &mut bin, int(7));
    bin
}

#[test]
fn removes() {
    // Go: "... execute Remove operations" and "... RemoveRange operations".
    let mut bin = seven();
    check(
        REMOVE_BY_KEY,
        vec![int(RT_VALUE), s("NOTFOUND")],
        &mut bin,
        Value::Nil,
    );
    check(
        REMOVE_BY_KEY,
        vec![int(RT_VALUE), s("Jim")],
        &mut bin,
        int(98),
    );
    let doomed = list(vec![s("Sally"), s("UNKNOWN"), s("Lenny")]);
    check(
        REMOVE_BY_KEY_LIST,
        vec![int(RT_VALUE), doomed],
        &mut bin,
        ints(&[84, 79]),
    );
    check(
        REMOVE_ALL_BY_VALUE,
        vec![int(RT_KEY), int(55)],
        &mut bin,
        strs(&["Charlie"]),
    );
    check(SIZE, vec![], &mut bin, int(3));

    let mut bin = seven();
    let count = |a: Value, b: Value| vec![int(RT_COUNT), a, b];
    check(
        REMOVE_BY_KEY_INTERVAL,
        count(s("J"), s("K")),
        &mut bin,
        int(2),
    );
    check(
        REMOVE_BY_VALUE_INTERVAL,
        count(int(80), int(85)),
        &mut bin,
        int(2),
    );
    check(
        REMOVE_BY_INDEX_RANGE,
        count(int(0), int(2)),
        &mut bin,
        int(2),
    );
    check(
        REMOVE_BY_RANK_RANGE,
        count(int(0), int(2)),
        &mut bin,
        int(1),
    );
    check(SIZE, vec![], &mut bin, int(0));

    let mut bin = seven();
    check(CLEAR, vec![], &mut bin, Value::Nil);
    check(SIZE, vec![], &mut bin, int(0));

    // Single-element removes: by index, rank, value.
    let mut bin = seven();
    check(
        REMOVE_BY_INDEX,
        vec![int(RT_KEY), int(0)],
        &mut bin,
        s("Abe"),
    );
    check(
        REMOVE_BY_RANK,
        vec![int(RT_VALUE), int(-1)],
        &mut bin,
        int(98),
    );
    check(
        REMOVE_BY_VALUE,
        vec![int(RT_KEY), int(76)],
        &mut bin,
        s("John"),
    );
    check(
        REMOVE_BY_VALUE,
        vec![int(RT_INDEX), int(1000)],
        &mut bin,
        int(-1),
    );
    assert_eq!(
        op(REMOVE_BY_INDEX, vec![int(RT_KEY), int(4)], &mut bin).unwrap_err(),
        ResultCode::OpNotApplicable
    );
    check(SIZE, vec![], &mut bin, int(4));
}

#[test]
fn rank_ties_break_by_key() {
    // Go: "... execute RANK operations" (key-value ordered).
    let mut bin = None;
    let items = str_pairs(&[("p1", 0), ("p2", 0), ("p3", 0), ("p4", 0)]);
    check(PUT_ITEMS, vec![items, int(3)], &mut bin, int(4));
    for (key, delta) in [("p1", 10), ("p2", 20), ("p3", 1), ("p4", 20)] {
        op(INCREMENT, vec![s(key), int(delta), int(3)], &mut bin).unwrap();
    }
    let top3 = vec![int(RT_KEY), int(-3), int(3)];
    check(
        GET_BY_RANK_RANGE,
        top3.clone(),
        &mut bin,
        strs(&["p1", "p2", "p4"]),
    );
    check(
        REMOVE_ALL_BY_VALUE,
        vec![int(RT_KEY), int(10)],
        &mut bin,
        strs(&["p1"]),
    );
    check(GET_BY_RANK_RANGE, top3, &mut bin, strs(&["p3", "p2", "p4"]));
}

#[test]
fn infinity_wildcard_and_relative_ranges() {
    // Go: "Map Infinity ops", "Map WildCard ops", "Relative MapGet/MapRemove ops".
    let items = int_pairs(&[(0, 17), (4, 2), (5, 15), (9, 10)]);
    let mut bin = None;
    check(PUT_ITEMS, vec![items.clone()], &mut bin, int(4));
    let to_infinity = vec![int(RT_KEY), int(5), Value::Infinity];
    check(GET_BY_KEY_INTERVAL, to_infinity, &mut bin, ints(&[5, 9]));
    check(
        GET_BY_KEY_INTERVAL,
        vec![int(RT_KEY), int(5)],
        &mut bin,
        ints(&[5, 9]),
    );

    let rel = |key, index| vec![int(RT_KEY), int(key), int(index)];
    let rel_n = |key, index, count| vec![int(RT_KEY), int(key), int(index), int(count)];
    let expect = [
        (rel(5, 0), ints(&[5, 9])),
        (rel(5, 1), ints(&[9])),
        (rel(5, -1), ints(&[4, 5, 9])),
        (rel(3, 2), ints(&[9])),
        (rel(3, -2), ints(&[0, 4, 5, 9])),
        (rel_n(5, 0, 1), ints(&[5])),
        (rel_n(5, 1, 2), ints(&[9])),
        (rel_n(5, -1, 1), ints(&[4])),
        (rel_n(3, 2, 1), ints(&[9])),
        (rel_n(3, -2, 2), ints(&[0])),
    ];
    for (args, expected) in expect {
        check(GET_BY_KEY_REL_INDEX_RANGE, args, &mut bin, expected);
    }
    let vrel = |rank| vec![int(RT_VALUE), int(11), int(rank)];
    let vrel_n = |rank, count| vec![int(RT_VALUE), int(11), int(rank), int(count)];
    check(GET_BY_VALUE_REL_RANK_RANGE, vrel(1), &mut bin, ints(&[17]));
    check(
        GET_BY_VALUE_REL_RANK_RANGE,
        vrel(-1),
        &mut bin,
        ints(&[10, 15, 17]),
    );
    check(
        GET_BY_VALUE_REL_RANK_RANGE,
        vrel_n(1, 1),
        &mut bin,
        ints(&[17]),
    );
    check(
        GET_BY_VALUE_REL_RANK_RANGE,
        vrel_n(-1, 1),
        &mut bin,
        ints(&[10]),
    );

    let value_rel = |key, index| vec![int(RT_VALUE), int(key), int(index)];
    check(
        REMOVE_BY_KEY_REL_INDEX_RANGE,
        value_rel(5, 0),
        &mut bin,
        ints(&[15, 10]),
    );
    check(
        REMOVE_BY_KEY_REL_INDEX_RANGE,
        value_rel(5, 1),
        &mut bin,
        ints(&[]),
    );
    let one = vec![int(RT_VALUE), int(5), int(-1), int(1)];
    check(REMOVE_BY_KEY_REL_INDEX_RANGE, one, &mut bin, ints(&[2]));

    let mut bin = None;
    check(PUT_ITEMS, vec![items], &mut bin, int(4));
    check(
        REMOVE_BY_VALUE_REL_RANK_RANGE,
        vrel(1),
        &mut bin,
        ints(&[17]),
    );
    check(
        REMOVE_BY_VALUE_REL_RANK_RANGE,
        vrel_n(-1, 1),
        &mut bin,
        ints(&[10]),
    );

    let mut bin = None;
    let people = pairs(vec![
        (int(4), list(vec![s("John"), int(55)])),
        (int(5), list(vec![s("Jim"), int(95)])),
        (int(9), list(vec![s("Joe"), int(80)])),
    ]);
    check(PUT_ITEMS, vec![people], &mut bin, int(3));
    let joe = list(vec![s("Joe"), Value::Wildcard]);
    check(
        GET_ALL_BY_VALUE,
        vec![int(RT_KEY), joe],
        &mut bin,
        ints(&[9]),
    );
}

#[test]
fn key_value_results_carry_the_preserve_order_header() {
    // Aerospike builds every map result with `cdt_map_builder_start` and the flags
    // `result_map_type_to_map_flags` gives (`particle_map.c`, `cdt.h`): KEY_VALUE is
    // PRESERVE_ORDER (0x08), so the map starts with the pair `c7 00 08` + nil, from a
    // key-ordered or unordered map alike, for an index, key, rank or value selection,
    // and when nothing is found (`result_data_set_not_found`). Clients read such a map
    // as a list of pairs in result order (Go: []MapPair), not as a hash map. The
    // 8.0 UNORDERED_MAP (16) has no header; ORDERED_MAP (17) is sorted, flags 0x01.
    // Go: "... Switch Policy For Order", "... using MapPutItemsOp", "... Inc/Dec ...".
    let header = [0xc7, 0x00, 0x08, 0xc0];
    for attr in [0, 1] {
        let mut bin = None;
        let items = int_pairs(&[(4, 1), (3, 2), (2, 3), (1, 4)]);
        check(PUT_ITEMS, vec![items, int(attr)], &mut bin, int(4));
        let got = op(GET_BY_INDEX, vec![int(RT_KEY_VALUE), int(2)], &mut bin).unwrap();
        assert_eq!(value::pack(&got), [&[0x82][..], &header, &[3, 2]].concat());
        // Rank order (4 has the smallest value), kept as selected.
        let args = vec![int(RT_KEY_VALUE), int(0), int(2)];
        let got = op(GET_BY_RANK_RANGE, args, &mut bin).unwrap();
        assert_eq!(
            value::pack(&got),
            [&[0x83][..], &header, &[4, 1, 3, 2]].concat()
        );
        let args = vec![int(RT_KEY_VALUE), int(2), int(4)];
        let got = op(GET_BY_KEY_INTERVAL, args, &mut bin).unwrap();
        assert_eq!(
            value::pack(&got),
            [&[0x83][..], &header, &[2, 3, 3, 2]].concat()
        );
        let got = op(GET_BY_KEY, vec![int(RT_KEY_VALUE), int(9)], &mut bin).unwrap();
        assert_eq!(value::pack(&got), [&[0x81][..], &header].concat());
        let args = vec![int(16), int(0), int(2)];
        let got = op(GET_BY_RANK_RANGE, args, &mut bin).unwrap();
        assert_eq!(value::pack(&got), [0x82, 4, 1, 3, 2]);
        let args = vec![int(RT_ORDERED_MAP), int(0), int(2)];
        let got = op(GET_BY_RANK_RANGE, args, &mut bin).unwrap();
        assert_eq!(
            value::pack(&got),
            [0x83, 0xc7, 0x00, 0x01, 0xc0, 3, 2, 4, 1]
        );
        // A removal answers the same way.
        let args = vec![int(RT_KEY_VALUE), int(1)];
        let got = op(REMOVE_BY_KEY, args, &mut bin).unwrap();
        assert_eq!(value::pack(&got), [&[0x82][..], &header, &[1, 4]].concat());
    }
    // Read back (as an expression's next op would), such a map is an unordered one
    // (Aerospike's `map_is_k_ordered` looks at flag 0x01 only): not searched as if sorted.
    let mut bin = Some(kv(int_pairs(&[(5, 0), (1, 0)])));
    check(GET_BY_KEY, vec![int(RT_VALUE), int(1)], &mut bin, int(0));
    check(GET_BY_INDEX, vec![int(RT_KEY), int(0)], &mut bin, int(1));
    let decoded = value::decode(&[0x82, 0xc7, 0x00, 0x08, 0xc0, 5, 0]).unwrap();
    assert!(matches!(decoded, Value::Map(m) if m.order == MapOrder::Unordered));
}

#[test]
fn return_types_of_a_key_ordered_map() {
    let mut bin = None;
    let items = int_pairs(&[(1, 30), (2, 10), (3, 20), (4, 40)]);
    check(PUT_ITEMS, vec![items, int(1)], &mut bin, int(4));
    let range = |rt| vec![int(rt), int(1), int(2)];
    check(GET_BY_INDEX_RANGE, range(RT_NONE), &mut bin, Value::Nil);
    check(GET_BY_INDEX_RANGE, range(RT_INDEX), &mut bin, ints(&[1, 2]));
    check(
        GET_BY_INDEX_RANGE,
        range(RT_REVERSE_INDEX),
        &mut bin,
        ints(&[2, 1]),
    );
    check(GET_BY_INDEX_RANGE, range(RT_RANK), &mut bin, ints(&[0, 1]));
    check(
        GET_BY_INDEX_RANGE,
        range(RT_REVERSE_RANK),
        &mut bin,
        ints(&[3, 2]),
    );
    check(
        GET_BY_INDEX_RANGE,
        range(RT_EXISTS),
        &mut bin,
        Value::Bool(true),
    );
    check(GET_BY_INDEX_RANGE, range(RT_KEY), &mut bin, ints(&[2, 3]));
    check(
        GET_BY_INDEX_RANGE,
        range(RT_VALUE),
        &mut bin,
        ints(&[10, 20]),
    );
    let ordered = Value::Map(Map {
        order: MapOrder::KeyOrdered,
        entries: vec![(int(2), int(10)), (int(3), int(20))],
    });
    check(GET_BY_INDEX_RANGE, range(RT_ORDERED_MAP), &mut bin, ordered);
    check(GET_BY_RANK_RANGE, range(RT_INDEX), &mut bin, ints(&[2, 0]));
    check(GET_BY_KEY, vec![int(RT_INDEX), int(7)], &mut bin, int(-1));
    check(
        GET_BY_KEY,
        vec![int(RT_EXISTS), int(7)],
        &mut bin,
        Value::Bool(false),
    );
    check(
        GET_BY_KEY,
        vec![int(RT_KEY_VALUE), int(7)],
        &mut bin,
        kv(int_pairs(&[])),
    );
    check(
        GET_BY_KEY,
        vec![int(RT_REVERSE_INDEX), int(1)],
        &mut bin,
        int(3),
    );
    // A huge count reserves nothing; a huge negative index keeps what overlaps.
    let huge = vec![int(RT_KEY), int(i64::MIN + 4), int(i64::MAX)];
    check(GET_BY_INDEX_RANGE, huge, &mut bin, ints(&[1, 2, 3, 4]));
    let huge = vec![int(RT_KEY), int(i64::MIN), int(i64::MAX)];
    check(GET_BY_INDEX_RANGE, huge, &mut bin, ints(&[1, 2, 3]));
    let huge = vec![int(RT_KEY), int(i64::MIN), int(1 << 62)];
    check(GET_BY_INDEX_RANGE, huge, &mut bin, ints(&[]));
    let all = vec![int(RT_COUNT), int(-2), int(1 << 62)];
    check(GET_BY_RANK_RANGE, all, &mut bin, int(2));
    assert_eq!(
        op(
            GET_BY_INDEX_RANGE,
            vec![int(RT_KEY), int(0), int(-1)],
            &mut bin
        )
        .unwrap_err(),
        ResultCode::Parameter
    );
    assert_eq!(
        op(GET_BY_INDEX, vec![int(RT_KEY), int(i64::MIN)], &mut bin).unwrap_err(),
        ResultCode::OpNotApplicable
    );
}

// ---- randomized model test -----------------------------------------------------------

/// A tiny xorshift generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> i64 {
        (self.next() % n) as i64
    }

    fn between(&mut self, low: i64, high: i64) -> i64 {
        low + self.below((high - low + 1) as u64)
    }
}

/// The positions `[index, index + count)` (negative index from the end) of `len`.
fn model_range(index: i64, count: i64, len: usize) -> Vec<usize> {
    let len = len as i64;
    let start = if index < 0 { index + len } else { index };
    (start..start + count)
        .filter(|&p| (0..len).contains(&p))
        .map(|p| p as usize)
        .collect()
}

/// The model's keys by rank: by value, then key.
fn model_by_rank(model: &BTreeMap<i64, i64>) -> Vec<i64> {
    let mut keys: Vec<(i64, i64)> = model.iter().map(|(&k, &v)| (v, k)).collect();
    keys.sort();
    keys.into_iter().map(|(_, k)| k).collect()
}

/// One random op on `bin` and on `model`; panics on a mismatch.
fn step(rng: &mut Rng, bin: &mut Option<Value>, model: &mut BTreeMap<i64, i64>) {
    let key = rng.below(10);
    let (a, b) = (rng.between(-3, 12), rng.between(0, 12));
    let keys: Vec<i64> = model.keys().copied().collect();
    let (code, args, expected): (u8, Vec<Value>, Result<Value, ResultCode>) = match rng.below(9) {
        0 => {
            let flags = [0, CREATE_ONLY, UPDATE_ONLY][rng.below(3) as usize]
                | if rng.below(2) == 0 { NO_FAIL } else { 0 };
            let exists = model.contains_key(&key);
            let refused =
                (exists && flags & CREATE_ONLY != 0) || (!exists && flags & UPDATE_ONLY != 0);
            let expected = match (refused, flags & NO_FAIL != 0) {
                (true, false) if exists => Err(ResultCode::ElementExists),
                (true, false) => Err(ResultCode::ElementNotFound),
                (true, true) => Ok(int(model.len() as i64)),
                (false, _) => {
                    model.insert(key, a);
                    Ok(int(model.len() as i64))
                }
            };
            (PUT, vec![int(key), int(a), int(0), int(flags)], expected)
        }
        1 => {
            let sum = model.get(&key).copied().unwrap_or(0) + a;
            model.insert(key, sum);
            (INCREMENT, vec![int(key), int(a)], Ok(int(sum)))
        }
        2 => {
            let removed = model.remove(&key).map_or(Value::Nil, int);
            (REMOVE_BY_KEY, vec![int(RT_VALUE), int(key)], Ok(removed))
        }
        3 => {
            let hit: Vec<i64> = keys
                .iter()
                .copied()
                .filter(|k| (a..b).contains(k))
                .collect();
            hit.iter().for_each(|k| {
                model.remove(k);
            });
            let args = vec![int(RT_KEY), int(a), int(b)];
            (REMOVE_BY_KEY_INTERVAL, args, Ok(ints(&hit)))
        }
        4 => {
            let hit: Vec<i64> = model_range(a - 6, b, keys.len())
                .into_iter()
                .map(|p| keys[p])
                .collect();
            hit.iter().for_each(|k| {
                model.remove(k);
            });
            let args = vec![int(RT_KEY), int(a - 6), int(b)];
            (REMOVE_BY_INDEX_RANGE, args, Ok(ints(&hit)))
        }
        5 => {
            let by_rank = model_by_rank(model);
            let hit: Vec<i64> = model_range(a - 6, b, by_rank.len())
                .into_iter()
                .map(|p| by_rank[p])
                .collect();
            hit.iter().for_each(|k| {
                model.remove(k);
            });
            let args = vec![int(RT_KEY), int(a - 6), int(b)];
            (REMOVE_BY_RANK_RANGE, args, Ok(ints(&hit)))
        }
        6 => {
            let hit: Vec<i64> = model
                .iter()
                .filter(|(_, v)| (a..b).contains(*v))
                .map(|(&k, _)| k)
                .collect();
            let args = vec![int(RT_KEY), int(a), int(b)];
            (GET_BY_VALUE_INTERVAL, args, Ok(ints(&hit)))
        }
        7 => {
            let by_rank = model_by_rank(model);
            let kept = model_range(a - 6, b, by_rank.len()).len();
            let args = vec![int(RT_COUNT | INVERTED), int(a - 6), int(b)];
            (
                GET_BY_RANK_RANGE,
                args,
                Ok(int((by_rank.len() - kept) as i64)),
            )
        }
        _ => {
            let index = a - 6;
            let expected = match model_range(index, 1, keys.len()).first() {
                Some(&p) => Ok(int(model[&keys[p]])),
                None => Err(ResultCode::OpNotApplicable),
            };
            (GET_BY_INDEX, vec![int(RT_VALUE), int(index)], expected)
        }
    };
    // A PUT also runs on the packed map, and must answer and pack as the decoded one does.
    let packed_before = bin.as_ref().filter(|_| code == PUT).map(value::pack);
    let got = op(code, args.clone(), bin);
    if let Some(bytes) = packed_before {
        check_packed_put(&args, &bytes, &got, bin);
    }
    let got = got.map(|value| sorted_if_list(value, bin));
    let expected = expected.map(|value| sorted_if_list(value, bin));
    match (&got, &expected) {
        (Ok(g), Ok(e)) => assert!(value::equal(g, e), "op {code} {args:?}: {g:?} != {e:?}"),
        _ => assert_eq!(
            got.as_ref().err(),
            expected.as_ref().err(),
            "op {code} {args:?}"
        ),
    }
    let stored: Vec<(i64, i64)> = match bin {
        Some(_) => entries_of(bin)
            .iter()
            .map(|(k, v)| (k.as_int().unwrap(), v.as_int().unwrap()))
            .collect(),
        None => Vec::new(),
    };
    let mut sorted = stored.clone();
    sorted.sort();
    let wanted: Vec<(i64, i64)> = model.iter().map(|(&k, &v)| (k, v)).collect();
    assert_eq!(sorted, wanted, "contents after op {code} {args:?}");
    if matches!(bin, Some(Value::Map(m)) if m.order != MapOrder::Unordered) {
        assert_eq!(stored, sorted, "an ordered map stays sorted");
    }
}

/// Runs PUT `args` on the packed map `bytes` and checks it against `general`, the decoded
/// map's answer, and `bin`, the map that left.
fn check_packed_put(
    args: &[Value],
    bytes: &[u8],
    general: &Result<Value, ResultCode>,
    bin: &Option<Value>,
) {
    let written = packed::put_one(PUT, args, bytes).expect("a canonical sorted map");
    match (written, general) {
        (Ok(written), Ok(size)) => {
            assert_eq!(Some(written.size), size.as_int(), "put {args:?}");
            let after = written.bytes.unwrap_or_else(|| bytes.to_vec());
            let want = value::pack(bin.as_ref().expect("a map"));
            assert_eq!(after, want, "put {args:?}");
        }
        (written, general) => assert_eq!(written.err(), general.clone().err(), "put {args:?}"),
    }
}

/// A list result sorted, when the map is unordered (its result order is storage order).
fn sorted_if_list(value: Value, bin: &Option<Value>) -> Value {
    let unordered = !matches!(bin, Some(Value::Map(m)) if m.order != MapOrder::Unordered);
    match value {
        Value::List(mut items) if unordered => {
            items.items.sort_by(value::compare);
            Value::List(items)
        }
        other => other,
    }
}

#[test]
fn random_ops_match_a_simple_model() {
    let mut rng = Rng(crate::cdt::test_support::seed("map model"));
    for order in [1, 0] {
        for _ in 0..20 {
            let mut bin = None;
            op(SET_TYPE, vec![int(order)], &mut bin).unwrap();
            let mut model = BTreeMap::new();
            for _ in 0..200 {
                step(&mut rng, &mut bin, &mut model);
            }
        }
    }
}
