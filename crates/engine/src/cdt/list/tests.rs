use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::*;
use crate::cdt::value::pack;

const VALUE: i64 = 7;
const INDEX: i64 = 1;
const REVERSE_INDEX: i64 = 2;
const RANK: i64 = 3;
const REVERSE_RANK: i64 = 4;
const COUNT: i64 = 5;
const EXISTS: i64 = 13;
const INVERTED: i64 = 0x10000;

fn i(n: i64) -> Value {
    Value::Int(n)
}

fn list_of(items: Vec<Value>) -> Value {
    Value::List(List {
        ordered: false,
        items,
    })
}

fn ints(numbers: &[i64]) -> Value {
    list_of(numbers.iter().map(|&n| i(n)).collect())
}

fn ordered(numbers: &[i64]) -> Value {
    Value::List(List {
        ordered: true,
        items: numbers.iter().map(|&n| i(n)).collect(),
    })
}

fn same(actual: &Value, expected: &Value) {
    assert_eq!(pack(actual), pack(expected), "{actual:?} != {expected:?}");
}

fn get(code: u8, args: &[Value], target: &Value) -> Value {
    read(code, args, Some(target)).expect("read succeeds")
}

fn change(code: u8, args: &[Value], target: &mut Option<Value>) -> Value {
    modify(code, args, target).expect("modify succeeds")
}

fn one_to_ten() -> Option<Value> {
    Some(ints(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]))
}

fn items(target: &Option<Value>) -> Value {
    target.clone().expect("a list")
}

#[test]
fn op_codes_split_into_reads_and_modifies() {
    assert_eq!(is_modify(code::SET_TYPE), Some(true));
    assert_eq!(is_modify(code::SORT), Some(true));
    assert_eq!(is_modify(14), None);
    assert_eq!(is_modify(code::SIZE), Some(false));
    assert_eq!(is_modify(code::GET_BY_VALUE_REL_RANK_RANGE), Some(false));
    assert_eq!(is_modify(28), None);
    assert_eq!(is_modify(code::REMOVE_BY_INDEX), Some(true));
    assert_eq!(is_modify(code::REMOVE_BY_VALUE_REL_RANK_RANGE), Some(true));
    assert_eq!(is_modify(41), None);
    assert_eq!(
        read(code::APPEND, &[i(1)], None).err(),
        Some(ResultCode::Parameter)
    );
}

/// The Go client's `cdt_list_test.go` "Get" cases on [1..10].
#[test]
fn gets_match_the_go_client_expectations() {
    let list = one_to_ten().expect("list");
    same(&get(code::GET, &[i(-1)], &list), &i(10));
    same(
        &get(code::GET_RANGE, &[i(-3), i(3)], &list),
        &ints(&[8, 9, 10]),
    );
    same(&get(code::GET_RANGE, &[i(7)], &list), &ints(&[8, 9, 10]));
    same(&get(code::GET_RANGE, &[i(0), i(-1)], &list), &list);
    same(
        &get(code::GET_ALL_BY_VALUE, &[i(VALUE), i(7)], &list),
        &ints(&[7]),
    );
    let wanted = ints(&[7, 9]);
    same(
        &get(code::GET_ALL_BY_VALUE_LIST, &[i(INDEX), wanted], &list),
        &ints(&[6, 8]),
    );
    let interval = |rt| get(code::GET_BY_VALUE_INTERVAL, &[i(rt), i(5), i(9)], &list);
    same(&interval(VALUE), &ints(&[5, 6, 7, 8]));
    same(&interval(INDEX), &ints(&[4, 5, 6, 7]));
    same(&interval(EXISTS), &Value::Bool(true));
    same(&get(code::GET_BY_INDEX, &[i(VALUE), i(7)], &list), &i(8));
    for selector in [code::GET_BY_INDEX_RANGE, code::GET_BY_RANK_RANGE] {
        same(&get(selector, &[i(INDEX), i(7)], &list), &ints(&[7, 8, 9]));
        same(&get(selector, &[i(VALUE), i(7)], &list), &ints(&[8, 9, 10]));
        same(&get(selector, &[i(VALUE), i(8)], &list), &ints(&[9, 10]));
        same(
            &get(selector, &[i(VALUE), i(5), i(2)], &list),
            &ints(&[6, 7]),
        );
    }
    same(&get(code::GET_BY_RANK, &[i(VALUE), i(7)], &list), &i(8));
    same(&get(code::SIZE, &[], &list), &i(10));
}

/// The Go client's remove cases on [1..10].
#[test]
fn removes_match_the_go_client_expectations() {
    let mut list = one_to_ten();
    let values = ints(&[1, 2, 3, 4, 5, 6, 7]);
    let removed = change(
        code::REMOVE_BY_VALUE_REL_RANK_RANGE - 4,
        &[i(VALUE), values.clone()],
        &mut list,
    );
    same(&removed, &values);
    same(&items(&list), &ints(&[8, 9, 10]));
    same(
        &change(
            code::REMOVE_BY_VALUE_REL_RANK_RANGE - 5,
            &[i(COUNT), i(9)],
            &mut list,
        ),
        &i(1),
    );
    same(&items(&list), &ints(&[8, 10]));

    let mut list = one_to_ten();
    let removed = change(38, &[i(VALUE), i(1), i(5)], &mut list);
    same(&removed, &ints(&[1, 2, 3, 4]));
    same(&change(38, &[i(COUNT), i(6), i(9)], &mut list), &i(3));
    same(&items(&list), &ints(&[5, 9, 10]));

    for (single, range) in [(code::REMOVE_BY_INDEX, 37), (34, 39)] {
        let mut list = one_to_ten();
        same(&change(single, &[i(VALUE), i(0)], &mut list), &i(1));
        same(&change(range, &[i(COUNT), i(5)], &mut list), &i(4));
        same(&items(&list), &ints(&[2, 3, 4, 5, 6]));
        same(&change(range, &[i(COUNT), i(2), i(3)], &mut list), &i(3));
        same(&items(&list), &ints(&[2, 3]));
    }

    let mut list = one_to_ten();
    for count in 1..=4 {
        same(
            &change(code::REMOVE_RANGE, &[i(0), i(count)], &mut list),
            &i(count),
        );
    }
    same(&items(&list), &ints(&[]));
    let mut list = one_to_ten();
    same(&change(code::POP, &[i(0)], &mut list), &i(1));
    same(
        &change(code::POP_RANGE, &[i(6)], &mut list),
        &ints(&[8, 9, 10]),
    );
    same(&change(code::REMOVE, &[i(-1)], &mut list), &i(1));
    same(&items(&list), &ints(&[2, 3, 4, 5, 6]));
}

#[test]
fn writes_match_the_go_client_expectations() {
    let mut list = one_to_ten();
    same(&change(code::INCREMENT, &[i(0), i(10)], &mut list), &i(11));
    same(&change(code::INCREMENT, &[i(0)], &mut list), &i(12));
    same(
        &change(code::INCREMENT, &[i(0), i(1), i(0), i(0)], &mut list),
        &i(13),
    );
    same(
        &change(code::INCREMENT, &[i(1), Value::Float(0.5)], &mut list),
        &i(2),
    );
    same(
        &change(code::SET, &[i(-1), i(i64::MAX)], &mut list),
        &Value::Nil,
    );
    same(&get(code::GET, &[i(-1)], &items(&list)), &i(i64::MAX));
    same(&change(code::SORT, &[i(0)], &mut list), &Value::Nil);
    same(&get(code::GET, &[i(0)], &items(&list)), &i(2));

    let mut list = one_to_ten();
    same(&change(code::TRIM, &[i(2), i(3)], &mut list), &i(7));
    same(&items(&list), &ints(&[3, 4, 5]));
    same(&change(code::CLEAR, &[], &mut list), &Value::Nil);
    same(&items(&list), &ints(&[]));

    let mut list = one_to_ten();
    same(&change(code::APPEND, &[i(i64::MAX)], &mut list), &i(11));
    same(&change(code::INSERT, &[i(0), i(0)], &mut list), &i(12));
    same(
        &change(code::INSERT_ITEMS, &[i(1), ints(&[-1, -2])], &mut list),
        &i(14),
    );
    same(&change(code::APPEND_ITEMS, &[ints(&[])], &mut list), &i(14));
    same(
        &get(code::GET_RANGE, &[i(0), i(3)], &items(&list)),
        &ints(&[0, -1, -2]),
    );
}

/// "should support ListWriteFlagsPartial & ListWriteFlagsNoFail".
#[test]
fn unique_partial_and_no_fail_adds_match_the_go_client() {
    let payload = ints(&[0, 4, 5, 9, 9, 11, 15, 0]);
    let partial = i(FLAG_ADD_UNIQUE as i64 | FLAG_DO_PARTIAL as i64 | FLAG_NO_FAIL as i64);
    let no_fail = i(FLAG_ADD_UNIQUE as i64 | FLAG_NO_FAIL as i64);
    let (mut first, mut second) = (None, None);
    let add = |payload: &Value, flags: &Value, target: &mut Option<Value>| {
        change(
            code::APPEND_ITEMS,
            &[payload.clone(), i(1), flags.clone()],
            target,
        )
    };
    same(&add(&payload, &partial, &mut first), &i(6));
    same(&add(&payload, &no_fail, &mut second), &i(0));
    let payload = ints(&[11, 3]);
    same(&add(&payload, &partial, &mut first), &i(7));
    same(&add(&payload, &no_fail, &mut second), &i(2));
    same(&items(&first), &ordered(&[0, 3, 4, 5, 9, 11, 15]));
    same(&items(&second), &ordered(&[3, 11]));
    let unique = i(FLAG_ADD_UNIQUE as i64);
    let refused = modify(
        code::APPEND_ITEMS,
        &[ints(&[3]), i(1), unique.clone()],
        &mut second,
    );
    assert_eq!(refused.err(), Some(ResultCode::ElementExists));
    let refused = modify(
        code::APPEND_ITEMS,
        &[ints(&[4, 4]), i(1), unique],
        &mut second,
    );
    assert_eq!(refused.err(), Some(ResultCode::OpNotApplicable));
}

#[test]
fn unique_inserts_into_unordered_lists_follow_aerospike() {
    let unique = i(FLAG_ADD_UNIQUE as i64);
    let mut list = Some(ints(&[1, 2]));
    let refused = modify(code::APPEND, &[i(2), i(0), unique.clone()], &mut list);
    assert_eq!(refused.err(), Some(ResultCode::ElementExists));
    let quiet = i((FLAG_ADD_UNIQUE | FLAG_NO_FAIL) as i64);
    same(
        &change(code::INSERT, &[i(0), i(2), quiet.clone()], &mut list),
        &i(2),
    );
    let partial = i((FLAG_ADD_UNIQUE | FLAG_NO_FAIL | FLAG_DO_PARTIAL) as i64);
    let payload = ints(&[2, 3, 3, 4]);
    same(
        &change(code::INSERT_ITEMS, &[i(0), payload, partial], &mut list),
        &i(4),
    );
    same(&items(&list), &ints(&[3, 4, 1, 2]));
    let refused = modify(code::SET, &[i(0), i(4), unique.clone()], &mut list);
    assert_eq!(refused.err(), Some(ResultCode::ElementExists));
    same(
        &change(code::SET, &[i(0), i(3), unique], &mut list),
        &Value::Nil,
    );
}

/// "should support Relative GetList Ops" and "Relative RemoveList Ops".
#[test]
fn relative_rank_ranges_match_the_go_client() {
    let mut list = None;
    let payload = ints(&[0, 4, 5, 9, 11, 15]);
    same(
        &change(code::APPEND_ITEMS, &[payload, i(1)], &mut list),
        &i(6),
    );
    let target = items(&list);
    let rel = |args: &[i64]| {
        let mut full = vec![i(VALUE)];
        full.extend(args.iter().map(|&n| i(n)));
        get(code::GET_BY_VALUE_REL_RANK_RANGE, &full, &target)
    };
    same(&rel(&[5, 0]), &ints(&[5, 9, 11, 15]));
    same(&rel(&[5, 1]), &ints(&[9, 11, 15]));
    same(&rel(&[5, -1]), &ints(&[4, 5, 9, 11, 15]));
    same(&rel(&[3, 0]), &ints(&[4, 5, 9, 11, 15]));
    same(&rel(&[3, 3]), &ints(&[11, 15]));
    same(&rel(&[3, -3]), &ints(&[0, 4, 5, 9, 11, 15]));
    same(&rel(&[5, 0, 2]), &ints(&[5, 9]));
    same(&rel(&[5, 1, 1]), &ints(&[9]));
    same(&rel(&[5, -1, 2]), &ints(&[4, 5]));
    same(&rel(&[3, 0, 1]), &ints(&[4]));
    same(&rel(&[3, 3, 7]), &ints(&[11, 15]));
    same(&rel(&[3, -3, 2]), &ints(&[]));

    let code = code::REMOVE_BY_VALUE_REL_RANK_RANGE;
    let mut remove = |args: &[i64]| {
        let mut full = vec![i(VALUE)];
        full.extend(args.iter().map(|&n| i(n)));
        change(code, &full, &mut list)
    };
    same(&remove(&[5, 0]), &ints(&[5, 9, 11, 15]));
    same(&remove(&[5, 1]), &ints(&[]));
    same(&remove(&[5, -1]), &ints(&[4]));
    same(&remove(&[3, -3, 1]), &ints(&[]));
    same(&remove(&[3, -3, 2]), &ints(&[]));
    same(&remove(&[3, -3, 3]), &ints(&[0]));
}

/// "should support List Infinity Ops" and "List WildCard Ops".
#[test]
fn infinity_and_wildcard_select_as_in_the_go_client() {
    let list = ordered(&[0, 4, 5, 9, 11, 15]);
    let args = [i(VALUE), i(10), Value::Infinity];
    same(
        &get(code::GET_BY_VALUE_INTERVAL, &args, &list),
        &ints(&[11, 15]),
    );
    let args = [i(VALUE), i(10)];
    same(
        &get(code::GET_BY_VALUE_INTERVAL, &args, &list),
        &ints(&[11, 15]),
    );

    let person = |name: &[u8], age| list_of(vec![Value::string(name), i(age)]);
    let mut people = None;
    let payload = list_of(vec![
        person(b"John", 55),
        person(b"Jim", 95),
        person(b"Joe", 80),
    ]);
    change(code::APPEND_ITEMS, &[payload, i(1)], &mut people);
    let pattern = list_of(vec![Value::string(b"Jim"), Value::Wildcard]);
    let found = get(
        code::GET_ALL_BY_VALUE,
        &[i(VALUE), pattern],
        &items(&people),
    );
    same(&found, &list_of(vec![person(b"Jim", 95)]));
}

#[test]
fn return_types_shape_single_and_multi_results() {
    let list = ints(&[30, 10, 20, 10]);
    let by_index = |rt, index| get(code::GET_BY_INDEX, &[i(rt), i(index)], &list);
    same(&by_index(INDEX, 2), &i(2));
    same(&by_index(REVERSE_INDEX, 0), &i(3));
    // The rank of an element chosen by index: how many are smaller.
    same(&by_index(RANK, 3), &i(0));
    same(&by_index(REVERSE_RANK, 0), &i(0));
    same(&by_index(COUNT, 0), &i(1));
    let by_value = |rt, wanted| get(code::GET_BY_VALUE, &[i(rt), i(wanted)], &list);
    same(&by_value(INDEX, 10), &i(1));
    same(&by_value(INDEX, 99), &i(-1));
    same(&by_value(RANK, 20), &i(2));
    same(&by_value(VALUE, 99), &Value::Nil);
    same(&by_value(EXISTS, 99), &Value::Bool(false));
    let rank_range = |rt| get(code::GET_BY_RANK_RANGE, &[i(rt), i(1), i(2)], &list);
    same(&rank_range(VALUE), &ints(&[10, 20]));
    same(&rank_range(INDEX), &ints(&[2, 3]));
    same(&rank_range(RANK), &ints(&[1, 2]));
    same(&rank_range(VALUE | INVERTED), &ints(&[30, 10]));
    same(&rank_range(RANK | INVERTED), &ints(&[0, 3]));
    same(
        &get(code::GET_BY_RANK_RANGE, &[i(VALUE), i(-2)], &list),
        &ints(&[20, 30]),
    );
    let all = get(code::GET_ALL_BY_VALUE, &[i(RANK), i(10)], &list);
    same(&all, &ints(&[0, 1]));
    let index_range = |rt| get(code::GET_BY_INDEX_RANGE, &[i(rt), i(1), i(2)], &list);
    same(&index_range(RANK), &ints(&[0, 2]));
    same(&index_range(VALUE | INVERTED), &ints(&[30, 10]));
    same(&index_range(0), &Value::Nil);
    let empty = get(code::GET_BY_INDEX_RANGE, &[i(VALUE), i(9)], &list);
    same(&empty, &ints(&[]));
    let not_found = get(code::GET_ALL_BY_VALUE_LIST, &[i(INDEX), ints(&[])], &list);
    same(&not_found, &ints(&[]));
    let everything = get(
        code::GET_ALL_BY_VALUE_LIST,
        &[i(COUNT | INVERTED), ints(&[])],
        &list,
    );
    same(&everything, &i(4));
}

#[test]
fn refusals_carry_aerospike_result_codes() {
    let list = ints(&[1, 2, 3]);
    let fails = |code, args: &[Value]| read(code, args, Some(&list)).unwrap_err();
    assert_eq!(fails(code::GET, &[i(3)]), ResultCode::OpNotApplicable);
    assert_eq!(fails(code::GET, &[i(-4)]), ResultCode::OpNotApplicable);
    assert_eq!(
        fails(code::GET_BY_RANK, &[i(VALUE), i(5)]),
        ResultCode::OpNotApplicable
    );
    let inverted_single = [i(VALUE | INVERTED), i(0)];
    assert_eq!(
        fails(code::GET_BY_INDEX, &inverted_single),
        ResultCode::OpNotApplicable
    );
    assert_eq!(
        fails(code::GET_BY_INDEX, &[i(6), i(0)]),
        ResultCode::OpNotApplicable
    );
    assert_eq!(
        fails(code::GET_BY_INDEX, &[i(99), i(0)]),
        ResultCode::Parameter
    );
    assert_eq!(fails(code::GET, &[]), ResultCode::Parameter);
    assert_eq!(fails(code::GET, &[i(0), i(1)]), ResultCode::Parameter);
    assert_eq!(fails(code::GET, &[Value::Nil]), ResultCode::Parameter);
    let refused = read(code::SIZE, &[], Some(&i(5)));
    assert_eq!(refused.err(), Some(ResultCode::IncompatibleType));

    let mut sorted = Some(ordered(&[1, 2]));
    let refused = modify(code::INSERT, &[i(0), i(5)], &mut sorted);
    assert_eq!(refused.err(), Some(ResultCode::OpNotApplicable));
    let refused = modify(code::SET, &[i(0), i(5)], &mut sorted);
    assert_eq!(refused.err(), Some(ResultCode::OpNotApplicable));
    let mut scalar = Some(i(1));
    let refused = modify(code::APPEND, &[i(5)], &mut scalar);
    assert_eq!(refused.err(), Some(ResultCode::IncompatibleType));
    let mut strings = Some(list_of(vec![Value::string(b"x")]));
    let refused = modify(code::INCREMENT, &[i(0)], &mut strings);
    assert_eq!(refused.err(), Some(ResultCode::Parameter));
    let mut list = Some(ints(&[1]));
    let refused = modify(code::SET_TYPE, &[i(4)], &mut list);
    assert_eq!(refused.err(), Some(ResultCode::OpNotApplicable));
    let refused = modify(code::APPEND_ITEMS, &[i(4)], &mut list);
    assert_eq!(refused.err(), Some(ResultCode::Parameter));
}

#[test]
fn missing_lists_read_as_nil_and_are_created_by_adds_only() {
    assert!(matches!(read(code::SIZE, &[], None), Ok(Value::Nil)));
    assert!(matches!(
        read(code::GET_BY_INDEX, &[i(VALUE), i(0)], None),
        Ok(Value::Nil)
    ));
    let mut missing = None;
    same(
        &change(code::REMOVE_BY_INDEX, &[i(VALUE), i(0)], &mut missing),
        &Value::Nil,
    );
    same(&change(code::POP, &[i(0)], &mut missing), &Value::Nil);
    same(&change(code::CLEAR, &[], &mut missing), &Value::Nil);
    assert!(missing.is_none());
    let refused = modify(code::SORT, &[], &mut missing);
    assert_eq!(refused.err(), Some(ResultCode::IncompatibleType));
    same(
        &change(
            code::INCREMENT,
            &[i(0), Value::Float(1.5), i(1)],
            &mut missing,
        ),
        &Value::Float(1.5),
    );
    same(
        &items(&missing),
        &Value::List(List {
            ordered: true,
            items: vec![Value::Float(1.5)],
        }),
    );
    let mut missing = None;
    same(&change(code::SET_TYPE, &[i(1)], &mut missing), &Value::Nil);
    same(&items(&missing), &ordered(&[]));
    let mut missing = None;
    same(&change(code::INSERT, &[i(2), i(7)], &mut missing), &i(3));
    same(
        &items(&missing),
        &list_of(vec![Value::Nil, Value::Nil, i(7)]),
    );
}

#[test]
fn inserts_past_the_end_pad_unless_bounded_and_within_the_cap() {
    let mut list = Some(ints(&[1]));
    let bounded = i(FLAG_INSERT_BOUNDED as i64);
    let refused = modify(code::INSERT, &[i(3), i(9), bounded], &mut list);
    assert_eq!(refused.err(), Some(ResultCode::OpNotApplicable));
    let quiet = i((FLAG_INSERT_BOUNDED | FLAG_NO_FAIL) as i64);
    same(
        &change(code::INSERT, &[i(3), i(9), quiet], &mut list),
        &i(1),
    );
    same(&change(code::SET, &[i(2), i(9)], &mut list), &Value::Nil);
    same(&items(&list), &list_of(vec![i(1), Value::Nil, i(9)]));
    same(&change(code::INSERT, &[i(-3), i(0)], &mut list), &i(4));
    let refused = modify(code::INSERT, &[i(-6), i(0)], &mut list);
    assert_eq!(refused.err(), Some(ResultCode::OpNotApplicable));
    let refused = modify(code::INSERT, &[i(i64::MAX), i(0)], &mut list);
    assert_eq!(refused.err(), Some(ResultCode::OpNotApplicable));
    let refused = modify(code::INSERT, &[i(i32::MAX as i64), i(0)], &mut list);
    assert_eq!(refused.err(), Some(ResultCode::Parameter));
    let refused = modify(code::INCREMENT, &[i(i64::MIN)], &mut list);
    assert_eq!(refused.err(), Some(ResultCode::OpNotApplicable));
}

#[test]
fn declared_counts_never_size_anything() {
    let list = ints(&[1, 2, 3]);
    let huge = i(1 << 62);
    same(&get(code::GET_RANGE, &[i(0), huge.clone()], &list), &list);
    // A start before the beginning eats the count first (`calc_index_count`).
    let far = get(code::GET_RANGE, &[i(i64::MIN), huge.clone()], &list);
    same(&far, &ints(&[]));
    same(&get(code::GET_RANGE, &[i(-5), i(3)], &list), &ints(&[1]));
    same(&get(code::GET_RANGE, &[i(-5), i(-1)], &list), &list);
    let far = get(
        code::GET_BY_RANK_RANGE,
        &[i(VALUE), i(i64::MIN), huge],
        &list,
    );
    same(&far, &ints(&[]));
    let extreme = [i(VALUE), i(2), i(i64::MAX), i(i64::MAX)];
    same(
        &get(code::GET_BY_VALUE_REL_RANK_RANGE, &extreme, &list),
        &ints(&[]),
    );
    // A count of -1 reads as 2^64 - 1: it outlasts any start.
    let extreme = [i(VALUE), i(2), i(i64::MIN), i(-1)];
    same(
        &get(code::GET_BY_VALUE_REL_RANK_RANGE, &extreme, &list),
        &list,
    );
}

#[test]
fn ordering_ops_sort_dedupe_and_keep_adds_sorted() {
    let mut list = Some(ints(&[3, 1, 2, 3, 1]));
    same(
        &change(
            code::SORT,
            &[i((SORT_DESCENDING | SORT_DROP_DUPLICATES) as i64)],
            &mut list,
        ),
        &Value::Nil,
    );
    same(&items(&list), &ints(&[3, 2, 1]));
    same(&change(code::SET_TYPE, &[i(1)], &mut list), &Value::Nil);
    same(&items(&list), &ordered(&[1, 2, 3]));
    same(&change(code::APPEND, &[i(2)], &mut list), &i(4));
    same(
        &change(code::APPEND_ITEMS, &[ints(&[0, 5, 2])], &mut list),
        &i(7),
    );
    same(&items(&list), &ordered(&[0, 1, 2, 2, 2, 3, 5]));
    same(&change(code::INCREMENT, &[i(0), i(10)], &mut list), &i(10));
    same(&items(&list), &ordered(&[1, 2, 2, 2, 3, 5, 10]));
    same(&change(code::SET_TYPE, &[i(0)], &mut list), &Value::Nil);
    same(&items(&list), &ints(&[1, 2, 2, 2, 3, 5, 10]));
    let nan = list_of(vec![
        Value::Float(f64::NAN),
        Value::Float(1.0),
        Value::Float(0.0),
    ]);
    let mut floats = Some(nan);
    change(code::SORT, &[], &mut floats);
}

// ---- randomized model test ----------------------------------------------------------

/// `[start, end)` of an index range over `len`, computed the obvious way.
fn model_span(len: usize, index: i64, count: i64) -> (usize, usize) {
    let len = len as i64;
    let start = if index < 0 { len + index } else { index };
    let end = start.saturating_add(count);
    (
        start.clamp(0, len) as usize,
        end.clamp(0, len).max(start.clamp(0, len)) as usize,
    )
}

/// Indexes of `model` in stable sorted order.
fn model_sorted(model: &[i64]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..model.len()).collect();
    order.sort_by_key(|&k| (model[k], k));
    order
}

fn take(model: &mut Vec<i64>, picked: &[usize]) -> Vec<i64> {
    let taken = picked.iter().map(|&k| model[k]).collect();
    let mut k = 0;
    model.retain(|_| {
        k += 1;
        !picked.contains(&(k - 1))
    });
    taken
}

/// One random op on both the list and the model; panics on a difference.
fn random_step(rng: &mut SmallRng, target: &mut Option<Value>, model: &mut Vec<i64>) {
    let len = model.len() as i64;
    let v = rng.random_range(0..10);
    let w = rng.random_range(0..10);
    let index = rng.random_range(-len - 2..=len + 2);
    let count = rng.random_range(0..5);
    let op = rng.random_range(0..10);
    let before = model.clone();
    let (expected, actual) = match op {
        0 => {
            model.push(v);
            (i(len + 1), change(code::APPEND, &[i(v)], target))
        }
        1 => {
            let at = rng.random_range(-len..=len);
            let position = if at < 0 { len + at } else { at };
            model.insert(position as usize, v);
            (i(len + 1), change(code::INSERT, &[i(at), i(v)], target))
        }
        2 => {
            let (start, end) = model_span(model.len(), index, count);
            let picked: Vec<usize> = (start..end).collect();
            let expected = ints(&take(model, &picked));
            let args = [i(VALUE), i(index), i(count)];
            (expected, change(37, &args, target))
        }
        3 => {
            let picked: Vec<usize> = (0..model.len())
                .filter(|&k| model[k] >= v && model[k] < w)
                .collect();
            let expected = ints(&take(model, &picked));
            (expected, change(38, &[i(VALUE), i(v), i(w)], target))
        }
        4 => {
            let (start, end) = model_span(model.len(), index, count);
            let picked = model_sorted(model)[start..end].to_vec();
            let values: Vec<i64> = picked.iter().map(|&k| model[k]).collect();
            let mut ascending = picked.clone();
            ascending.sort_unstable();
            take(model, &ascending);
            (
                ints(&values),
                change(39, &[i(VALUE), i(index), i(count)], target),
            )
        }
        5 => {
            let picked: Vec<i64> = (0..len)
                .filter(|&k| model[k as usize] >= v && model[k as usize] < w)
                .collect();
            let list = items(target);
            let counted = get(code::GET_BY_VALUE_INTERVAL, &[i(COUNT), i(v), i(w)], &list);
            same(&counted, &i(picked.len() as i64));
            (
                ints(&picked),
                get(code::GET_BY_VALUE_INTERVAL, &[i(INDEX), i(v), i(w)], &list),
            )
        }
        6 => {
            let (start, end) = model_span(model.len(), index, count);
            let ranks: Vec<i64> = (start as i64..end as i64).collect();
            let args = [i(RANK), i(index), i(count)];
            (
                ints(&ranks),
                get(code::GET_BY_RANK_RANGE, &args, &items(target)),
            )
        }
        7 => {
            let picked: Vec<usize> = (0..model.len()).filter(|&k| model[k] == v).collect();
            let expected = ints(&picked.iter().map(|&k| k as i64).collect::<Vec<_>>());
            take(model, &picked);
            (expected, change(35, &[i(INDEX), i(v)], target))
        }
        8 => {
            let anchor = model.iter().filter(|&&x| x < v).count() as i64;
            let start = anchor + index;
            let (start, length) = if start < 0 {
                (0, (count + start).max(0))
            } else {
                (start, count)
            };
            let (start, end) = model_span(model.len(), start, length);
            let sorted = model_sorted(model);
            let values: Vec<i64> = sorted[start..end].iter().map(|&k| model[k]).collect();
            let args = [i(VALUE), i(v), i(index), i(count)];
            (
                ints(&values),
                get(code::GET_BY_VALUE_REL_RANK_RANGE, &args, &items(target)),
            )
        }
        _ => {
            let (start, end) = model_span(model.len(), index, count);
            let rest: Vec<i64> = (0..model.len())
                .filter(|k| !(start..end).contains(k))
                .map(|k| model[k])
                .collect();
            let args = [i(VALUE | INVERTED), i(index), i(count)];
            (
                ints(&rest),
                get(code::GET_BY_INDEX_RANGE, &args, &items(target)),
            )
        }
    };
    let context = format!("op {op} v {v} w {w} index {index} count {count} on {before:?}");
    assert_eq!(
        pack(&actual),
        pack(&expected),
        "{context}: {actual:?} != {expected:?}"
    );
    same(&items(target), &ints(model));
}

#[test]
fn random_ops_agree_with_a_plain_vector_model() {
    let seed = crate::cdt::test_support::seed("list model");
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut target = Some(ints(&[]));
    let mut model = Vec::new();
    for _ in 0..4000 {
        random_step(&mut rng, &mut target, &mut model);
    }
}
