//! Expression tests: packed expressions as the Go client (v8 `expression.go`) packs them,
//! evaluated on a fake record.

use rand::{Rng, SeedableRng, rngs::SmallRng};

use super::*;
use crate::cdt::value::{self, DEPTH_MAX, KIND_BLOB, List, Map, MapOrder};

// ---- a record ----------------------------------------------------------------------------

const DIGEST: [u8; 20] = [
    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0x10, 0x27, 0, 0,
];

struct Fake {
    bins: Vec<(Vec<u8>, u8, Vec<u8>)>,
    last_update_ms: u64,
    void_time_epoch_s: u64,
    now_ms: u64,
    key: Option<(u8, Vec<u8>)>,
}

impl RecordView for Fake {
    fn bin(&self, name: &[u8]) -> Option<(u8, &[u8])> {
        self.bins
            .iter()
            .find(|(n, _, _)| n == name)
            .map(|(_, t, b)| (*t, b.as_slice()))
    }

    fn meta(&self) -> RecordFacts<'_> {
        RecordFacts {
            last_update_ms: self.last_update_ms,
            void_time_epoch_s: self.void_time_epoch_s,
            now_ms: self.now_ms,
            set_name: b"demo",
            digest: &DIGEST,
            key: self.key.as_ref().map(|(t, b)| (*t, b.as_slice())),
            size_bytes: 123,
        }
    }
}

fn record() -> Fake {
    let ordered = Value::Map(Map {
        order: MapOrder::KeyOrdered,
        entries: vec![(s("k"), int(1)), (s("z"), int(2))],
    });
    let unordered = Value::Map(Map {
        order: MapOrder::Unordered,
        entries: vec![(s("k"), int(1))],
    });
    Fake {
        bins: vec![
            (b"a".to_vec(), 1, 5_i64.to_be_bytes().to_vec()),
            (b"f".to_vec(), 2, 2.5_f64.to_be_bytes().to_vec()),
            (b"s".to_vec(), 3, b"hello".to_vec()),
            (b"b".to_vec(), 17, vec![1]),
            (b"blob".to_vec(), 4, vec![0xff, 0x01]),
            (b"l".to_vec(), 20, value::pack(&list(vec![int(1), int(2)]))),
            (b"om".to_vec(), 19, value::pack(&ordered)),
            (b"um".to_vec(), 19, value::pack(&unordered)),
        ],
        last_update_ms: 1_700_000_000_000,
        void_time_epoch_s: 1_700_000_100,
        now_ms: 1_700_000_010_500,
        key: Some((3, b"key1".to_vec())),
    }
}

// ---- building expressions as the Go client packs them ------------------------------------

fn int(n: i64) -> Value {
    Value::Int(n)
}

fn s(text: &str) -> Value {
    Value::string(text.as_bytes())
}

fn list(items: Vec<Value>) -> Value {
    Value::List(List {
        ordered: false,
        items,
    })
}

/// A raw msgpack string (`packRawString`): no particle type byte.
fn raw(text: &str) -> Value {
    let bytes = text.as_bytes();
    Value::Bytes {
        kind: bytes[0],
        data: bytes[1..].to_vec(),
    }
}

/// `[code, args...]`.
fn op(code: i64, args: Vec<Value>) -> Value {
    let mut items = vec![int(code)];
    items.extend(args);
    list(items)
}

fn bin(ty: i64, name: &str) -> Value {
    op(81, vec![int(ty), raw(name)])
}

fn int_bin(name: &str) -> Value {
    bin(2, name)
}

fn unknown() -> Value {
    op(0, vec![])
}

fn eq(a: Value, b: Value) -> Value {
    op(1, vec![a, b])
}

fn parse(exp: &Value) -> Result<Expression, ResultCode> {
    Expression::parse(&value::pack(exp))
}

fn eval(exp: &Value) -> Option<Value> {
    parse(exp)
        .expect("parses")
        .eval(&record())
        .expect("evaluates")
}

fn eval_int(exp: &Value) -> Option<i64> {
    eval(exp).and_then(|v| v.as_int())
}

fn eval_bool(exp: &Value) -> Option<bool> {
    match eval(exp) {
        Some(Value::Bool(b)) => Some(b),
        None => None,
        other => panic!("not a boolean: {other:?}"),
    }
}

fn eval_float(exp: &Value) -> f64 {
    match eval(exp) {
        Some(Value::Float(x)) => x,
        other => panic!("not a float: {other:?}"),
    }
}

fn parse_err(exp: &Value) -> ResultCode {
    parse(exp).expect_err("refused")
}

// ---- the wire format ---------------------------------------------------------------------

#[test]
fn go_client_bytes_for_eq_int_bin_parse_and_filter() {
    // Eq(IntBin("a"), IntVal(5)), byte for byte as the Go client packs it.
    let packed = [0x93, 0x01, 0x93, 0x51, 0x02, 0xa1, b'a', 0x05];
    let exp = Expression::parse_filter(&packed).expect("parses");
    assert!(exp.matches(&record()).expect("evaluates"));
    let other = [0x93, 0x01, 0x93, 0x51, 0x02, 0xa1, b'a', 0x06];
    let exp = Expression::parse_filter(&other).expect("parses");
    assert!(!exp.matches(&record()).expect("evaluates"));
}

#[test]
fn a_filter_must_be_boolean() {
    let packed = value::pack(&int_bin("a"));
    assert!(Expression::parse(&packed).is_ok());
    assert_eq!(
        Expression::parse_filter(&packed).unwrap_err(),
        ResultCode::Parameter
    );
    // A non-boolean evaluated as a filter never passes.
    let exp = Expression::parse(&packed).expect("parses");
    assert!(!exp.matches(&record()).expect("evaluates"));
}

#[test]
fn literals_evaluate_to_themselves() {
    assert_eq!(eval_int(&int(-7)), Some(-7));
    assert_eq!(eval_float(&Value::Float(1.5)), 1.5);
    assert!(matches!(eval(&Value::Nil), Some(Value::Nil)));
    assert_eq!(eval_bool(&Value::Bool(true)), Some(true));
    assert!(value::equal(&eval(&s("x")).expect("known"), &s("x")));
    let quoted = op(126, vec![list(vec![int(1), int(2)])]);
    assert!(value::equal(
        &eval(&quoted).expect("known"),
        &list(vec![int(1), int(2)])
    ));
    // A list in expression position is an op, so a bare list literal is refused.
    assert_eq!(parse_err(&list(vec![s("x")])), ResultCode::Parameter);
    // A blob of an unknown particle type is refused.
    let odd = Value::Bytes {
        kind: 7,
        data: vec![1],
    };
    assert_eq!(parse_err(&odd), ResultCode::Parameter);
}

// ---- bins and comparisons ----------------------------------------------------------------

#[test]
fn typed_bin_reads_are_unknown_when_missing_or_of_another_type() {
    assert_eq!(eval_int(&int_bin("a")), Some(5));
    assert_eq!(eval(&int_bin("missing")).map(|_| ()), None);
    assert_eq!(eval(&int_bin("s")).map(|_| ()), None);
    assert_eq!(eval_bool(&eq(int_bin("missing"), int(5))), None);
    assert_eq!(eval_bool(&eq(bin(1, "b"), Value::Bool(true))), Some(true));
    assert_eq!(eval_bool(&eq(bin(3, "s"), s("hello"))), Some(true));
    assert_eq!(
        eval_bool(&op(3, vec![bin(3, "s"), s("hellp")])),
        Some(false)
    );
    assert_eq!(
        eval_bool(&op(5, vec![bin(7, "f"), Value::Float(3.0)])),
        Some(true)
    );
    let blob = Value::Bytes {
        kind: KIND_BLOB,
        data: vec![0xff, 0x01],
    };
    assert_eq!(eval_bool(&eq(bin(6, "blob"), blob)), Some(true));
}

#[test]
fn comparisons_follow_the_six_codes() {
    let cases = [
        (1, false),
        (2, true),
        (3, false),
        (4, false),
        (5, true),
        (6, true),
    ];
    for (code, expected) in cases {
        let exp = op(code, vec![int_bin("a"), int(6)]);
        assert_eq!(eval_bool(&exp), Some(expected), "op {code}");
    }
    // Nil equals nil.
    assert_eq!(eval_bool(&eq(Value::Nil, Value::Nil)), Some(true));
    assert_eq!(eval_bool(&op(3, vec![Value::Nil, Value::Nil])), Some(false));
    // NaN is unequal to itself.
    let nan = Value::Float(f64::NAN);
    assert_eq!(eval_bool(&eq(nan.clone(), nan.clone())), Some(false));
    assert_eq!(eval_bool(&op(2, vec![nan.clone(), nan])), Some(true));
}

#[test]
fn comparing_different_types_is_a_parameter_error() {
    assert_eq!(parse_err(&eq(int_bin("a"), s("5"))), ResultCode::Parameter);
    assert_eq!(
        parse_err(&eq(int(1), Value::Float(1.0))),
        ResultCode::Parameter
    );
    let hll = Value::Bytes {
        kind: 18,
        data: vec![1],
    };
    assert_eq!(parse_err(&eq(hll.clone(), hll)), ResultCode::Parameter);
}

#[test]
fn lists_compare_and_unordered_maps_are_unknown() {
    let quoted = op(126, vec![list(vec![int(1), int(2)])]);
    assert_eq!(eval_bool(&eq(bin(4, "l"), quoted.clone())), Some(true));
    assert_eq!(eval_bool(&op(3, vec![bin(4, "l"), quoted])), Some(false));
    let ordered = Value::Map(Map {
        order: MapOrder::KeyOrdered,
        entries: vec![(s("k"), int(1)), (s("z"), int(2))],
    });
    assert_eq!(eval_bool(&eq(bin(5, "om"), ordered)), Some(true));
    let unordered = Value::Map(Map {
        order: MapOrder::Unordered,
        entries: vec![(s("k"), int(1))],
    });
    assert_eq!(eval_bool(&eq(bin(5, "um"), unordered)), None);
}

#[test]
fn bin_type_and_bin_exists() {
    assert_eq!(eval_int(&op(82, vec![raw("s")])), Some(3));
    assert_eq!(eval_int(&op(82, vec![raw("nope")])), Some(0));
    // BinExists("l") is NotEq(BinType("l"), 0).
    let exists = op(2, vec![op(82, vec![raw("l")]), int(0)]);
    assert_eq!(eval_bool(&exists), Some(true));
}

// ---- logic -------------------------------------------------------------------------------

#[test]
fn logic_is_three_valued() {
    let t = || Value::Bool(true);
    let f = || Value::Bool(false);
    assert_eq!(eval_bool(&op(16, vec![f(), unknown()])), Some(false));
    assert_eq!(eval_bool(&op(16, vec![unknown(), f()])), Some(false));
    assert_eq!(eval_bool(&op(16, vec![t(), unknown()])), None);
    assert_eq!(eval_bool(&op(16, vec![t(), t()])), Some(true));
    assert_eq!(eval_bool(&op(17, vec![unknown(), t()])), Some(true));
    assert_eq!(eval_bool(&op(17, vec![f(), unknown()])), None);
    assert_eq!(eval_bool(&op(17, vec![f(), f()])), Some(false));
    assert_eq!(eval_bool(&op(18, vec![unknown()])), None);
    assert_eq!(eval_bool(&op(18, vec![f()])), Some(true));
    assert_eq!(eval_bool(&op(19, vec![t(), f(), f()])), Some(true));
    assert_eq!(eval_bool(&op(19, vec![t(), f(), t()])), Some(false));
    assert_eq!(eval_bool(&op(19, vec![f(), f()])), Some(false));
    assert_eq!(eval_bool(&op(19, vec![t(), unknown()])), None);
    // A filter with an unknown verdict filters the record out.
    let exp = parse(&op(16, vec![t(), eq(int_bin("missing"), int(1))])).expect("parses");
    assert!(!exp.matches(&record()).expect("evaluates"));
}

#[test]
fn logic_needs_booleans_and_enough_arguments() {
    let t = || Value::Bool(true);
    assert_eq!(parse_err(&op(16, vec![t()])), ResultCode::Parameter);
    assert_eq!(parse_err(&op(16, vec![t(), int(1)])), ResultCode::Parameter);
    assert_eq!(parse_err(&op(18, vec![int(1)])), ResultCode::Parameter);
    assert_eq!(parse_err(&op(18, vec![t(), t()])), ResultCode::Parameter);
}

// ---- arithmetic --------------------------------------------------------------------------

#[test]
fn integer_arithmetic_wraps_and_division_by_zero_is_unknown() {
    assert_eq!(
        eval_int(&op(20, vec![int_bin("a"), int(3), int(-1)])),
        Some(7)
    );
    assert_eq!(
        eval_int(&op(20, vec![int(i64::MAX), int(1)])),
        Some(i64::MIN)
    );
    assert_eq!(eval_int(&op(21, vec![int_bin("a")])), Some(-5));
    assert_eq!(eval_int(&op(21, vec![int(10), int(3), int(2)])), Some(5));
    assert_eq!(eval_int(&op(22, vec![int(4), int(-3)])), Some(-12));
    assert_eq!(eval_int(&op(23, vec![int(100), int(5), int(2)])), Some(10));
    assert_eq!(eval_int(&op(23, vec![int(7), int(-2)])), Some(-3));
    assert_eq!(eval_int(&op(23, vec![int(2)])), Some(0));
    assert_eq!(eval_int(&op(23, vec![int(7), int(0)])), None);
    assert_eq!(
        eval_int(&op(23, vec![int(i64::MIN), int(-1)])),
        Some(i64::MIN)
    );
    assert_eq!(eval_int(&op(26, vec![int(-7), int(3)])), Some(-1));
    assert_eq!(eval_int(&op(26, vec![int(7), int(0)])), None);
    assert_eq!(eval_int(&op(27, vec![int(-4)])), Some(4));
    assert_eq!(
        eval_int(&op(50, vec![int(3), int_bin("a"), int(-2)])),
        Some(-2)
    );
    assert_eq!(
        eval_int(&op(51, vec![int(3), int_bin("a"), int(-2)])),
        Some(5)
    );
    // An unknown argument makes the result unknown.
    assert_eq!(eval_int(&op(20, vec![int(1), int_bin("missing")])), None);
}

#[test]
fn float_arithmetic() {
    let f = Value::Float;
    assert_eq!(eval_float(&op(20, vec![bin(7, "f"), f(1.0)])), 3.5);
    assert_eq!(eval_float(&op(23, vec![f(1.0), f(0.0)])), f64::INFINITY);
    assert_eq!(eval_float(&op(23, vec![f(4.0)])), 0.25);
    assert_eq!(eval_float(&op(21, vec![f(4.0)])), -4.0);
    assert_eq!(eval_float(&op(24, vec![f(2.0), f(10.0)])), 1024.0);
    assert!((eval_float(&op(25, vec![f(1000.0), f(10.0)])) - 3.0).abs() < 1e-12);
    assert_eq!(eval_float(&op(27, vec![f(-2.5)])), 2.5);
    assert_eq!(eval_float(&op(28, vec![f(-2.5)])), -3.0);
    assert_eq!(eval_float(&op(29, vec![f(2.1)])), 3.0);
    assert_eq!(eval_int(&op(30, vec![f(-2.9)])), Some(-2));
    assert_eq!(eval_int(&op(30, vec![f(f64::NAN)])), Some(i64::MIN));
    assert_eq!(eval_float(&op(31, vec![int(3)])), 3.0);
    assert_eq!(eval_float(&op(51, vec![f(1.0), f(7.5), f(-1.0)])), 7.5);
}

#[test]
fn arithmetic_types_are_checked_when_parsing() {
    let f = Value::Float;
    assert_eq!(
        parse_err(&op(20, vec![int(1), f(1.0)])),
        ResultCode::Parameter
    );
    assert_eq!(parse_err(&op(20, vec![])), ResultCode::Parameter);
    assert_eq!(parse_err(&op(20, vec![s("x")])), ResultCode::Parameter);
    assert_eq!(
        parse_err(&op(24, vec![int(2), int(3)])),
        ResultCode::Parameter
    );
    assert_eq!(
        parse_err(&op(26, vec![f(2.0), f(3.0)])),
        ResultCode::Parameter
    );
    assert_eq!(parse_err(&op(28, vec![int(2)])), ResultCode::Parameter);
    assert_eq!(parse_err(&op(30, vec![int(2)])), ResultCode::Parameter);
    assert_eq!(parse_err(&op(31, vec![f(2.0)])), ResultCode::Parameter);
    assert_eq!(parse_err(&op(32, vec![f(2.0)])), ResultCode::Parameter);
    assert_eq!(
        parse_err(&op(40, vec![int(2), int(1)])),
        ResultCode::Parameter
    );
}

#[test]
fn integer_bit_ops() {
    assert_eq!(
        eval_int(&op(32, vec![int(0b1100), int(0b1010)])),
        Some(0b1000)
    );
    assert_eq!(
        eval_int(&op(33, vec![int(0b1100), int(0b1010)])),
        Some(0b1110)
    );
    assert_eq!(
        eval_int(&op(34, vec![int(0b1100), int(0b1010)])),
        Some(0b0110)
    );
    assert_eq!(eval_int(&op(35, vec![int(0)])), Some(-1));
    assert_eq!(eval_int(&op(36, vec![int(1), int(4)])), Some(16));
    assert_eq!(eval_int(&op(37, vec![int(-1), int(60)])), Some(15));
    assert_eq!(eval_int(&op(38, vec![int(-16), int(2)])), Some(-4));
    assert_eq!(eval_int(&op(39, vec![int(0xff)])), Some(8));
    assert_eq!(eval_int(&op(39, vec![int(-1)])), Some(64));
    let t = || Value::Bool(true);
    let f = || Value::Bool(false);
    // Bit indexes count from the most significant bit (0) to the least (63).
    assert_eq!(eval_int(&op(40, vec![int(1), t()])), Some(63));
    assert_eq!(eval_int(&op(40, vec![int(0), t()])), Some(-1));
    assert_eq!(eval_int(&op(40, vec![int(-1), f()])), Some(-1));
    assert_eq!(eval_int(&op(40, vec![int(i64::MAX), f()])), Some(0));
    assert_eq!(eval_int(&op(41, vec![int(0b110), t()])), Some(62));
    assert_eq!(eval_int(&op(41, vec![int(-1), f()])), Some(-1));
    assert_eq!(eval_int(&op(41, vec![int(-2), f()])), Some(63));
}

// ---- metadata ----------------------------------------------------------------------------

#[test]
fn metadata_reads_in_aerospike_units() {
    // LAST_UPDATE: nanoseconds since the Unix epoch.
    assert_eq!(
        eval_int(&op(66, vec![])),
        Some(1_700_000_000_000 * 1_000_000)
    );
    // SINCE_UPDATE: milliseconds.
    assert_eq!(eval_int(&op(67, vec![])), Some(10_500));
    // VOID_TIME: nanoseconds since the Unix epoch; TTL: seconds left.
    assert_eq!(
        eval_int(&op(68, vec![])),
        Some(1_700_000_100 * 1_000_000_000)
    );
    assert_eq!(eval_int(&op(69, vec![])), Some(90));
    assert!(value::equal(
        &eval(&op(70, vec![])).expect("known"),
        &s("demo")
    ));
    assert_eq!(eval_bool(&op(71, vec![])), Some(true));
    assert_eq!(eval_bool(&op(72, vec![])), Some(false));
    assert_eq!(eval_int(&op(74, vec![])), Some(123));
    assert_eq!(eval_int(&op(73, vec![])), Some(123));
    assert_eq!(eval_int(&op(65, vec![])), Some(0));
    // Digest bytes 16..20 little-endian: 0x2710 = 10000.
    assert_eq!(eval_int(&op(64, vec![int(3)])), Some(10_000 % 3));
    assert_eq!(parse_err(&op(64, vec![int(0)])), ResultCode::Parameter);
    assert_eq!(parse_err(&op(66, vec![int(0)])), ResultCode::Parameter);
}

#[test]
fn never_expiring_records_have_minus_one_void_time_and_ttl() {
    let mut rec = record();
    rec.void_time_epoch_s = 0;
    let run = |exp: &Value| parse(exp).expect("parses").eval(&rec).expect("evaluates");
    assert_eq!(run(&op(68, vec![])).and_then(|v| v.as_int()), Some(-1));
    assert_eq!(run(&op(69, vec![])).and_then(|v| v.as_int()), Some(-1));
    // A record past its void time (not yet swept) reports a TTL of 1.
    let mut late = record();
    late.void_time_epoch_s = 1_000;
    let exp = parse(&op(69, vec![])).expect("parses");
    let ttl = exp.eval(&late).expect("evaluates").and_then(|v| v.as_int());
    assert_eq!(ttl, Some(1));
}

#[test]
fn keys_are_typed() {
    assert!(value::equal(
        &eval(&op(80, vec![int(3)])).expect("known"),
        &s("key1")
    ));
    assert!(eval(&op(80, vec![int(2)])).is_none());
    assert_eq!(parse_err(&op(80, vec![int(4)])), ResultCode::Parameter);
    let mut rec = record();
    rec.key = Some((1, 42_i64.to_be_bytes().to_vec()));
    let exp = parse(&op(80, vec![int(2)])).expect("parses");
    let key = exp.eval(&rec).expect("evaluates").and_then(|v| v.as_int());
    assert_eq!(key, Some(42));
    rec.key = None;
    assert!(exp.eval(&rec).expect("evaluates").is_none());
    let exists = parse(&op(71, vec![])).expect("parses");
    assert!(!exists.matches(&rec).expect("evaluates"));
}

// ---- let, var, cond ----------------------------------------------------------------------

/// `Let(Def(name, exp)..., body)` as the Go client packs it: `[125, name, exp, ..., body]`.
fn let_(defs: Vec<(&str, Value)>, body: Value) -> Value {
    let mut args = Vec::new();
    for (name, exp) in defs {
        args.push(raw(name));
        args.push(exp);
    }
    args.push(body);
    op(125, args)
}

fn var(name: &str) -> Value {
    op(124, vec![raw(name)])
}

#[test]
fn let_defines_variables_in_order() {
    // Let(Def("x", IntBin("a")), Def("y", Add(Var("x"), 1)), Mul(Var("x"), Var("y")))
    let exp = let_(
        vec![("x", int_bin("a")), ("y", op(20, vec![var("x"), int(1)]))],
        op(22, vec![var("x"), var("y")]),
    );
    assert_eq!(eval_int(&exp), Some(30));
    // A nested let sees the outer variables.
    let nested = let_(
        vec![("x", int(2))],
        let_(vec![("z", int(3))], op(20, vec![var("x"), var("z")])),
    );
    assert_eq!(eval_int(&nested), Some(5));
    // An unknown definition makes its uses unknown.
    let exp = let_(vec![("m", int_bin("missing"))], eq(var("m"), int(1)));
    assert_eq!(eval_bool(&exp), None);
}

#[test]
fn let_scoping_errors_are_parameter_errors() {
    let undefined = let_(vec![("x", int(1))], var("y"));
    assert_eq!(parse_err(&undefined), ResultCode::Parameter);
    let itself = let_(vec![("x", op(20, vec![var("x"), int(1)]))], var("x"));
    assert_eq!(parse_err(&itself), ResultCode::Parameter);
    let twice = let_(vec![("x", int(1)), ("x", int(2))], var("x"));
    assert_eq!(parse_err(&twice), ResultCode::Parameter);
    let shadow = let_(vec![("x", int(1))], let_(vec![("x", int(2))], var("x")));
    assert_eq!(parse_err(&shadow), ResultCode::Parameter);
    let bad_name = let_(vec![("1x", int(1))], int(0));
    assert_eq!(parse_err(&bad_name), ResultCode::Parameter);
    let out_of_scope = op(20, vec![let_(vec![("x", int(1))], var("x")), var("x")]);
    assert_eq!(parse_err(&out_of_scope), ResultCode::Parameter);
    assert_eq!(
        parse_err(&op(125, vec![raw("x"), int(1)])),
        ResultCode::Parameter
    );
    // Variables typed by their definitions.
    let typed = let_(vec![("x", int(1))], eq(var("x"), s("1")));
    assert_eq!(parse_err(&typed), ResultCode::Parameter);
}

#[test]
fn cond_takes_the_first_true_branch() {
    // Cond(Eq(IntBin("a"), 1), 10, Eq(IntBin("a"), 5), 50, 0)
    let exp = op(
        123,
        vec![
            eq(int_bin("a"), int(1)),
            int(10),
            eq(int_bin("a"), int(5)),
            int(50),
            int(0),
        ],
    );
    assert_eq!(eval_int(&exp), Some(50));
    let fallthrough = op(123, vec![Value::Bool(false), int(1), int(2)]);
    assert_eq!(eval_int(&fallthrough), Some(2));
    // An unknown condition makes the whole unknown.
    let unknown_condition = op(123, vec![eq(int_bin("x"), int(1)), int(1), int(2)]);
    assert_eq!(eval_int(&unknown_condition), None);
    // Unknown() fits any branch type.
    let with_unknown = op(123, vec![Value::Bool(true), unknown(), int(2)]);
    assert_eq!(eval_int(&with_unknown), None);
    assert!(parse(&eq(with_unknown, int(2))).is_ok());
}

#[test]
fn cond_checks_its_shape_and_types() {
    let t = || Value::Bool(true);
    assert_eq!(
        parse_err(&op(123, vec![t(), int(1)])),
        ResultCode::Parameter
    );
    assert_eq!(
        parse_err(&op(123, vec![t(), int(1), s("x")])),
        ResultCode::Parameter
    );
    assert_eq!(
        parse_err(&op(123, vec![int(1), int(1), int(2)])),
        ResultCode::Parameter
    );
}

// ---- module calls ------------------------------------------------------------------------

/// `[127, type, system, payload, bin]`.
fn call(ty: i64, system: i64, payload: Value, bin: Value) -> Value {
    op(127, vec![int(ty), int(system), payload, bin])
}

#[test]
fn map_reads_run_through_the_cdt_module() {
    // MapSize(MapBin("om")): [127, INT, CDT, [96], bin]
    let size = call(2, 0, list(vec![int(96)]), bin(5, "om"));
    assert_eq!(eval_int(&size), Some(2));
    // MapGetByKey(VALUE, INT, "z", MapBin("om")): the key argument is an expression.
    let get = call(2, 0, list(vec![int(97), int(7), s("z")]), bin(5, "om"));
    assert_eq!(eval_int(&get), Some(2));
    // A result of another type than declared is unknown.
    let mistyped = call(3, 0, list(vec![int(96)]), bin(5, "om"));
    assert!(eval(&mistyped).is_none());
    // A missing bin is unknown; a CDT call on an integer is refused when parsing.
    let missing = call(2, 0, list(vec![int(96)]), bin(5, "nope"));
    assert!(eval(&missing).is_none());
    let on_int = call(2, 0, list(vec![int(96)]), int_bin("a"));
    assert_eq!(parse_err(&on_int), ResultCode::Parameter);
}

#[test]
fn call_arguments_that_are_expressions_are_evaluated() {
    // MapGetByKey(VALUE, INT, StringBin-derived key via Cond, bin).
    let key = op(123, vec![Value::Bool(true), s("k"), s("z")]);
    let get = call(2, 0, list(vec![int(97), int(7), key]), bin(5, "om"));
    assert_eq!(eval_int(&get), Some(1));
    // An unknown argument makes the call unknown.
    let get = call(
        2,
        0,
        list(vec![int(97), int(7), bin(3, "nope")]),
        bin(5, "om"),
    );
    assert!(eval(&get).is_none());
}

#[test]
fn bit_reads_run_through_the_bits_module() {
    // BitCount(0, 16, BlobBin("blob")): [127, INT, BITS, [51, 0, 16], bin]
    let count = call(2, 1, list(vec![int(51), int(0), int(16)]), bin(6, "blob"));
    assert_eq!(eval_int(&count), Some(9));
    let on_list = call(2, 1, list(vec![int(51), int(0), int(16)]), bin(4, "l"));
    assert_eq!(parse_err(&on_list), ResultCode::Parameter);
}

#[test]
fn modify_calls_return_the_modified_copy() {
    // MapPut(policy, "n", IntBin("a"), MapBin("om")): system CDT | MODIFY_LOCAL (0x40).
    let put = call(
        5,
        0x40,
        list(vec![int(67), s("n"), int_bin("a"), int(1)]),
        bin(5, "om"),
    );
    let size = call(2, 0, list(vec![int(96)]), put);
    assert_eq!(eval_int(&size), Some(3));
    // The record's bin is untouched.
    assert_eq!(
        eval_int(&call(2, 0, list(vec![int(96)]), bin(5, "om"))),
        Some(2)
    );
    // A modify on a nil bin argument starts from no bin (and the call is nil-typed).
    let fresh = call(
        5,
        0x40,
        list(vec![int(67), s("n"), int(1), int(1)]),
        Value::Nil,
    );
    let packed = value::pack(&fresh);
    let exp = Expression::parse(&packed).expect("parses");
    let result = exp.eval(&record()).expect("evaluates").expect("known");
    assert!(matches!(result, Value::Map(ref map) if map.entries.len() == 1));
}

#[test]
fn call_shapes_are_checked() {
    let size = || list(vec![int(96)]);
    assert_eq!(
        parse_err(&call(2, 7, size(), bin(5, "om"))),
        ResultCode::Parameter
    );
    assert_eq!(
        parse_err(&call(12, 0, size(), bin(5, "om"))),
        ResultCode::Parameter
    );
    assert_eq!(
        parse_err(&call(2, 0, list(vec![]), bin(5, "om"))),
        ResultCode::Parameter
    );
    assert_eq!(
        parse_err(&call(2, 0, int(96), bin(5, "om"))),
        ResultCode::Parameter
    );
    let bad_context = list(vec![int(0xff), list(vec![int(0x22)])]);
    assert_eq!(
        parse_err(&call(2, 0, bad_context, bin(5, "om"))),
        ResultCode::Parameter
    );
    assert_eq!(
        parse_err(&op(127, vec![int(2), int(0), size()])),
        ResultCode::Parameter
    );
}

// ---- regular expressions ----------------------------------------------------------------

#[test]
fn regex_matches_strings_with_posix_flags() {
    let bad = op(7, vec![int(0), raw("("), bin(3, "s")]);
    assert_eq!(parse_err(&bad), ResultCode::Parameter);
    let regex_on_int = op(7, vec![int(0), raw("h.*o"), int_bin("a")]);
    assert_eq!(parse_err(&regex_on_int), ResultCode::Parameter);
    // Bin "s" holds "hello"; the match is unanchored, as POSIX regexec's.
    let regex = |flags: i64, pattern: &str| op(7, vec![int(flags), raw(pattern), bin(3, "s")]);
    assert_eq!(eval_bool(&regex(0, "h.*o")), Some(true));
    assert_eq!(eval_bool(&regex(0, "ell")), Some(true));
    assert_eq!(eval_bool(&regex(0, "^ell")), Some(false));
    assert_eq!(eval_bool(&regex(0, "HELLO")), Some(false));
    assert_eq!(eval_bool(&regex(2, "HELLO")), Some(true));
    assert_eq!(
        eval_bool(&op(7, vec![int(0), raw("x"), bin(3, "missing")])),
        None
    );
}

fn geo_literal(json: &str) -> Value {
    Value::Bytes {
        kind: 23,
        data: json.as_bytes().to_vec(),
    }
}

/// A record whose bin `g` holds `json` as a stored GeoJSON particle.
fn geo_record(json: &str) -> Fake {
    let mut wire = vec![0, 0, 0];
    wire.extend_from_slice(json.as_bytes());
    let (_, stored) = crate::geo::particle_from_wire(&wire).expect("valid GeoJSON");
    let mut record = record();
    record.bins.push((b"g".to_vec(), 23, stored));
    record
}

#[test]
fn geo_compare_matches_points_in_regions_and_regions_holding_points() {
    const SQUARE: &str = r#"{"type":"Polygon","coordinates":[[[0,0],[2,0],[2,2],[0,2],[0,0]]]}"#;
    const INSIDE: &str = r#"{"type":"Point","coordinates":[1,1]}"#;
    const OUTSIDE: &str = r#"{"type":"Point","coordinates":[3,1]}"#;
    let eval_on = |record: &Fake, exp: &Value| -> Option<bool> {
        match parse(exp).expect("parses").eval(record).expect("evaluates") {
            Some(Value::Bool(b)) => Some(b),
            None => None,
            other => panic!("not a boolean: {other:?}"),
        }
    };
    let cmp = |right: &str| op(8, vec![bin(8, "g"), geo_literal(right)]);
    let point_bin = geo_record(INSIDE);
    assert_eq!(eval_on(&point_bin, &cmp(SQUARE)), Some(true));
    let far_bin = geo_record(OUTSIDE);
    assert_eq!(eval_on(&far_bin, &cmp(SQUARE)), Some(false));
    let region_bin = geo_record(SQUARE);
    assert_eq!(eval_on(&region_bin, &cmp(INSIDE)), Some(true));
    assert_eq!(eval_on(&region_bin, &cmp(OUTSIDE)), Some(false));
    // Region against region and point against point never match.
    assert_eq!(eval_on(&region_bin, &cmp(SQUARE)), Some(false));
    assert_eq!(eval_on(&point_bin, &cmp(INSIDE)), Some(false));
    // A circle of 200 km around (1, 1) holds the point; one of 1 km around (3, 1) does not.
    let near = r#"{"type":"AeroCircle","coordinates":[[1,1],200000]}"#;
    let far = r#"{"type":"AeroCircle","coordinates":[[3,1],1000]}"#;
    assert_eq!(eval_on(&point_bin, &cmp(near)), Some(true));
    assert_eq!(eval_on(&point_bin, &cmp(far)), Some(false));
    // Two literals.
    let literals = op(8, vec![geo_literal(INSIDE), geo_literal(SQUARE)]);
    assert_eq!(eval_bool(&literals), Some(true));
    // A missing bin or invalid GeoJSON is unknown.
    assert_eq!(eval_bool(&cmp(SQUARE)), None);
    assert_eq!(eval_on(&point_bin, &cmp(r#"{"type":"Nope"}"#)), None);
    // Both arguments must be GeoJSON.
    assert_eq!(
        parse_err(&op(8, vec![bin(8, "g"), s("x")])),
        ResultCode::Parameter
    );
}

// ---- hostile input -----------------------------------------------------------------------

#[test]
fn malformed_expressions_are_parameter_errors() {
    let cases: Vec<Vec<u8>> = vec![
        vec![],
        vec![0x90],                               // []
        vec![0x91, 0x7f],                         // [127] unknown arity
        vec![0x91, 0x60],                         // [96] unknown op
        vec![0x92, 0xff, 0x01],                   // [-1, 1]
        vec![0x91, 0xa1, b'x'],                   // ["x"]
        vec![0x93, 0x01, 0x05],                   // truncated
        vec![0x93, 0x01, 0x05, 0x05, 0x05],       // trailing bytes
        vec![0xc1],                               // reserved marker
        vec![0xdd, 0xff, 0xff, 0xff, 0xff, 0x01], // a list declaring 4 billion elements
        vec![0x92, 0x51, 0x02],                   // BIN with one argument
        vec![0x93, 0x51, 0x0a, 0xa1, b'a'],       // BIN of an unknown type
        vec![0x93, 0x51, 0x02, 0x01],             // BIN name not a string
        vec![0x92, 0x12, 0xc3, 0xc3],             // truncated NOT
        vec![0x91, 0x01],                         // EQ without arguments
        vec![0xd4, 0xff, 0x00],                   // a wildcard alone has no type
    ];
    for packed in cases {
        assert_eq!(
            Expression::parse(&packed).unwrap_err(),
            ResultCode::Parameter,
            "{packed:02x?}"
        );
    }
    // A bin name longer than 15 bytes.
    assert_eq!(
        parse_err(&int_bin("abcdefghijklmnop")),
        ResultCode::Parameter
    );
}

#[test]
fn deep_nesting_is_refused_and_moderate_nesting_works() {
    let mut deep = Value::Bool(true);
    for _ in 0..(DEPTH_MAX + 5) {
        deep = op(18, vec![deep]);
    }
    assert_eq!(parse_err(&deep), ResultCode::Parameter);
    let mut fine = Value::Bool(true);
    for _ in 0..40 {
        fine = op(18, vec![fine]);
    }
    assert_eq!(eval_bool(&fine), Some(true));
}

#[test]
fn random_bytes_and_mutations_never_panic() {
    let seeds = [
        value::pack(&let_(
            vec![("x", int_bin("a"))],
            op(
                16,
                vec![
                    eq(var("x"), int(5)),
                    op(123, vec![Value::Bool(true), Value::Bool(true), unknown()]),
                ],
            ),
        )),
        value::pack(&call(
            2,
            0,
            list(vec![int(97), int(7), s("z")]),
            bin(5, "om"),
        )),
        value::pack(&op(20, vec![int(1), op(23, vec![int(3), int(0)])])),
    ];
    let mut rng = SmallRng::seed_from_u64(7);
    let rec = record();
    for round in 0..20_000 {
        let mut bytes = seeds[round % seeds.len()].clone();
        for _ in 0..rng.random_range(1..4) {
            let at = rng.random_range(0..bytes.len());
            match rng.random_range(0..3) {
                0 => bytes[at] = rng.random(),
                1 => {
                    bytes.remove(at);
                    if bytes.is_empty() {
                        bytes.push(0x90);
                    }
                }
                _ => bytes.insert(at, rng.random()),
            }
        }
        if let Ok(exp) = Expression::parse(&bytes) {
            let _ = exp.eval(&rec);
        }
    }
}
