//! The target over expressions (`engine::Expression`): one expression, raw bytes or a
//! generated tree, used as the filter of a read and of a write of an existing record, and as
//! the expression of an EXP_READ op and of an EXP_MODIFY op, through the public API only.
//!
//! The generated trees are typed (an integer node gets integer arguments, a comparison two of
//! one type, a call a bin of its module's type) so that most of them compile and evaluate;
//! the input then mutates some of them: an op code replaced by any byte, an argument added or
//! dropped. Literals come from [`crate::generate`], wildcards and infinity included; bins are
//! read by the names and types the record has (and others).
//!
//! Invariants the target asserts, beyond "no panic":
//! - `Expression::parse_filter` gives an expression, PARAMETER or UNSUPPORTED_FEATURE; a read
//!   filtered by it gives Ok, FILTERED_OUT, PARAMETER or UNSUPPORTED_FEATURE, and a write
//!   filtered by it the same result as the read (same record, same instant).
//! - A read (with the filter, or with the EXP_READ op) leaves the record as it was, as does a
//!   write that fails (EXP_MODIFY or filtered).
//! - A successful EXP_MODIFY write bumps the generation once (or deletes the record) and
//!   leaves valid LIST and MAP bins, none of the changed ones holding a wildcard or infinity,
//!   within the record size limit (`collection_ops::check_written`).

use engine::{Acks, Expression, Namespace, ReadRequest, WriteRequest};
use model::{Digest, Op, OpCode, ParticleType, ResultCode};

use crate::collection_ops::{Snapshot, check_written};
use crate::fixture::{self, Collect};
use crate::generate::{self, Style};
use crate::input::Input;

/// How deep generated expression trees nest.
const EXPRESSION_DEPTH_MAX: usize = 6;

/// The user key the record is stored with (an integer key, 8 bytes).
const KEY_FIELD: [u8; 9] = [1, 0, 0, 0, 0, 0, 0, 0, 0];

/// The bins the record starts with, by name: integer, float, string, list, map, blob, HLL,
/// boolean. Bin reads use these and `x`, which never exists.
const BIN_NAMES: [&[u8]; 9] = [b"i", b"f", b"s", b"l", b"m", b"b", b"h", b"t", b"x"];

/// The expression types, as the wire codes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ty {
    Nil = 0,
    Bool = 1,
    Int = 2,
    Str = 3,
    List = 4,
    Map = 5,
    Blob = 6,
    Float = 7,
    Geo = 8,
    Hll = 9,
}

const TYPES: [Ty; 10] = [
    Ty::Nil,
    Ty::Bool,
    Ty::Int,
    Ty::Str,
    Ty::List,
    Ty::Map,
    Ty::Blob,
    Ty::Float,
    Ty::Geo,
    Ty::Hll,
];

/// The types two sides of a comparison may share.
const COMPARABLE: [Ty; 6] = [Ty::Int, Ty::Float, Ty::Str, Ty::List, Ty::Map, Ty::Blob];

/// Target `expressions`: the first byte picks raw bytes or a generated tree; then the
/// expression runs as a filter, an EXP_READ op and an EXP_MODIFY op on one record.
pub fn expressions(data: &[u8]) {
    let mut input = Input::new(data);
    let (namespace, _clock) = fixture::namespace();
    let digest = fixture::digest(0);
    let mode = input.byte();
    write_record(&namespace, digest, &mut input);
    let modify_bin = input.pick(&BIN_NAMES);
    let flags = match input.byte() % 4 {
        0 => i64::from(input.byte()),
        _ => input.pick(&[0, 0, 1, 2, 4, 8, 16, 4 | 8 | 16]),
    };
    let expression = match mode % 4 {
        0 => input.take_rest().to_vec(),
        _ => {
            let want = match mode % 4 {
                1 | 2 => Ty::Bool,
                _ => input.pick(&TYPES),
            };
            let mut generator = Generator::default();
            generator.node(&mut input, want, 0)
        }
    };
    check_filter(&namespace, digest, &expression);
    check_exp_read(&namespace, digest, &expression, flags);
    check_exp_modify(&namespace, digest, &expression, flags, modify_bin);
}

/// The record every expression runs on: one bin of each type, values from the input.
fn write_record(namespace: &Namespace, digest: Digest, input: &mut Input<'_>) {
    let integer = generate::choose_int(input).to_be_bytes();
    let float = input.pick(&[0.0f64, 1.5, -2.0, f64::NAN]).to_be_bytes();
    let mut list = Vec::new();
    generate::list(input, &mut list, 0, Style::Stored);
    let mut map = Vec::new();
    generate::map_value(input, &mut map, 0, Style::Stored);
    let blob = input.short_bytes();
    let hll_init = [0x93, 0x00, 4 + input.byte() % 5, input.pick(&[0u8, 4])];
    let ops = [
        bin_op(OpCode::Write, ParticleType::Integer, b"i", &integer),
        bin_op(OpCode::Write, ParticleType::Float, b"f", &float),
        bin_op(OpCode::Write, ParticleType::String, b"s", b"text"),
        bin_op(OpCode::Write, ParticleType::List, b"l", &list),
        bin_op(OpCode::Write, ParticleType::Map, b"m", &map),
        bin_op(OpCode::Write, ParticleType::Blob, b"b", blob),
        bin_op(OpCode::HllModify, ParticleType::Blob, b"h", &hll_init),
        bin_op(OpCode::Write, ParticleType::Bool, b"t", &[1]),
    ];
    let written = write(namespace, digest, &ops, None);
    assert!(written.is_ok(), "the record {ops:02x?}: {written:?}");
}

fn bin_op<'a>(
    code: OpCode,
    particle_type: ParticleType,
    bin_name: &'a [u8],
    value: &'a [u8],
) -> Op<'a> {
    Op {
        code,
        particle_type: particle_type as u8,
        bin_name,
        value,
    }
}

/// An update of the record (with its key), filtered or not.
fn write(
    namespace: &Namespace,
    digest: Digest,
    ops: &[Op<'_>],
    filter: Option<&Expression>,
) -> Result<engine::RecordMeta, ResultCode> {
    let request = WriteRequest {
        digest,
        set_name: fixture::SET_NAME,
        key: Some(&KEY_FIELD),
        exists: engine::ExistsPolicy::Update,
        generation: engine::GenerationPolicy::None,
        ttl: model::TtlRequest::NamespaceDefault,
        respond_all_ops: false,
        deadline: engine::Deadline::NONE,
        filter,
        read_all_bins: false,
    };
    let ops = ops.iter().copied();
    namespace.write(&request, ops, &mut Collect::default(), &mut Acks::default())
}

/// A read of `ops` (none: every bin), filtered or not.
fn read(
    namespace: &Namespace,
    digest: Digest,
    ops: &[Op<'_>],
    filter: Option<&Expression>,
) -> Result<engine::RecordMeta, ResultCode> {
    let request = ReadRequest {
        digest,
        set_name: b"",
        key: None,
        respond_all_ops: false,
        read_all_bins: ops.is_empty(),
        header_only: false,
        deadline: engine::Deadline::NONE,
        filter,
    };
    namespace.read(&request, ops.iter().copied(), &mut Collect::default())
}

/// The filter properties: parse, filtered read, filtered write agree.
fn check_filter(namespace: &Namespace, digest: Digest, packed: &[u8]) {
    let filter = match Expression::parse_filter(packed) {
        Ok(filter) => filter,
        Err(code) => {
            let allowed = [ResultCode::Parameter, ResultCode::UnsupportedFeature];
            assert!(
                allowed.contains(&code),
                "parse_filter {packed:02x?}: {code:?}"
            );
            return;
        }
    };
    let before = fixture::read_all(namespace, digest);
    let read_result = read(namespace, digest, &[], Some(&filter)).map(|_| ());
    let allowed = [
        ResultCode::FilteredOut,
        ResultCode::Parameter,
        ResultCode::UnsupportedFeature,
    ];
    let context = format!("filter {packed:02x?} {filter:?}");
    if let Err(code) = read_result {
        assert!(allowed.contains(&code), "{context}: read {code:?}");
    }
    assert_eq!(fixture::read_all(namespace, digest), before, "{context}");
    let touch = bin_op(OpCode::Write, ParticleType::Integer, b"w", &[1]);
    let write_result = write(namespace, digest, &[touch], Some(&filter));
    let after = fixture::read_all(namespace, digest);
    assert_eq!(write_result.map(|_| ()), read_result, "{context}: write");
    if write_result.is_err() {
        assert_eq!(
            after, before,
            "{context}: a filtered-out write changed the record"
        );
    }
}

/// `[expression, flags]` as an expression op carries it.
fn op_payload(expression: &[u8], flags: i64) -> Vec<u8> {
    let mut payload = vec![0x92];
    payload.extend_from_slice(expression);
    generate::int(&mut payload, flags);
    payload
}

/// EXP_READ: whatever it answers, the record is unchanged.
fn check_exp_read(namespace: &Namespace, digest: Digest, expression: &[u8], flags: i64) {
    let payload = op_payload(expression, flags);
    let op = bin_op(OpCode::ExpRead, ParticleType::Blob, b"r", &payload);
    let before = fixture::read_all(namespace, digest);
    let result = read(namespace, digest, &[op], None);
    let after = fixture::read_all(namespace, digest);
    assert_eq!(after, before, "EXP_READ {payload:02x?}: {result:?}");
}

/// EXP_MODIFY: a failure changes nothing; a success leaves a sound record.
fn check_exp_modify(
    namespace: &Namespace,
    digest: Digest,
    expression: &[u8],
    flags: i64,
    bin_name: &[u8],
) {
    let payload = op_payload(expression, flags);
    let op = bin_op(OpCode::ExpModify, ParticleType::Blob, bin_name, &payload);
    let before: Snapshot = fixture::read_all(namespace, digest);
    let result = write(namespace, digest, &[op], None);
    let after = fixture::read_all(namespace, digest);
    let context = format!("EXP_MODIFY {bin_name:?} {payload:02x?}: {result:?}");
    match result {
        Ok(meta) => check_written(&before, meta, &after, &context, false),
        Err(_) => assert_eq!(after, before, "{context}: the record changed"),
    }
}

/// Generates typed expression trees; remembers the variables in scope.
#[derive(Default)]
struct Generator {
    /// Variables a `let` defined and its body may read: name, type.
    scope: Vec<(Vec<u8>, Ty)>,
}

impl Generator {
    /// A packed expression of type `want` (mostly: the input may mutate it), `depth` deep.
    fn node(&mut self, input: &mut Input<'_>, want: Ty, depth: usize) -> Vec<u8> {
        let mut out = Vec::new();
        if depth >= EXPRESSION_DEPTH_MAX {
            literal(input, &mut out, want);
            return out;
        }
        match input.byte() % 8 {
            0 => literal(input, &mut out, want),
            1 => bin_read(input, &mut out, want),
            2 => self.generic(input, &mut out, want, depth),
            _ => self.typed(input, &mut out, want, depth),
        }
        out
    }

    /// An op array `[code, args...]`, which the input may mutate: any code instead, an
    /// argument more or less.
    fn op(&mut self, input: &mut Input<'_>, out: &mut Vec<u8>, code: i64, mut args: Vec<Vec<u8>>) {
        let mutation = input.byte();
        let code = match mutation % 32 {
            0 => i64::from(input.byte()),
            _ => code,
        };
        match mutation % 32 {
            1 => args.push(self.node(input, Ty::Int, EXPRESSION_DEPTH_MAX)),
            2 => {
                args.pop();
            }
            _ => {}
        }
        generate::array(out, 1 + args.len());
        generate::int(out, code);
        args.iter().for_each(|arg| out.extend_from_slice(arg));
    }

    /// The productions every type has: `cond`, `let`, a variable, `[0]` unknown.
    fn generic(&mut self, input: &mut Input<'_>, out: &mut Vec<u8>, want: Ty, depth: usize) {
        match input.byte() % 4 {
            0 => {
                let args = vec![
                    self.node(input, Ty::Bool, depth + 1),
                    self.node(input, want, depth + 1),
                    self.node(input, want, depth + 1),
                ];
                self.op(input, out, 123, args);
            }
            1 => self.let_(input, out, want, depth),
            2 => match self.scope.iter().rev().find(|(_, ty)| *ty == want) {
                Some((name, _)) => {
                    generate::array(out, 2);
                    generate::int(out, 124);
                    generate::raw_str(out, name);
                }
                None => literal(input, out, want),
            },
            _ => out.extend_from_slice(&[0x91, 0x00]),
        }
    }

    /// `[125, name, definition, body]`: the body may read the variable.
    fn let_(&mut self, input: &mut Input<'_>, out: &mut Vec<u8>, want: Ty, depth: usize) {
        let name = format!("v{}", self.scope.len()).into_bytes();
        let ty = input.pick(&TYPES);
        let definition = self.node(input, ty, depth + 1);
        self.scope.push((name.clone(), ty));
        let body = self.node(input, want, depth + 1);
        self.scope.pop();
        let mut name_packed = Vec::new();
        generate::raw_str(&mut name_packed, &name);
        self.op(input, out, 125, vec![name_packed, definition, body]);
    }

    /// The productions of type `want`.
    fn typed(&mut self, input: &mut Input<'_>, out: &mut Vec<u8>, want: Ty, depth: usize) {
        let choice = input.byte();
        match want {
            Ty::Bool => self.boolean(input, out, choice, depth),
            Ty::Int => self.integer(input, out, choice, depth),
            Ty::Float => self.float(input, out, choice, depth),
            Ty::Str if choice.is_multiple_of(2) => self.op(input, out, 70, Vec::new()),
            Ty::Str | Ty::Blob if choice % 3 == 1 => key_read(out, want),
            Ty::List | Ty::Map | Ty::Blob | Ty::Hll => self.call(input, out, want, depth),
            _ => literal(input, out, want),
        }
    }

    fn boolean(&mut self, input: &mut Input<'_>, out: &mut Vec<u8>, choice: u8, depth: usize) {
        match choice % 6 {
            0 => {
                let ty = input.pick(&COMPARABLE);
                let args = vec![
                    self.node(input, ty, depth + 1),
                    self.node(input, ty, depth + 1),
                ];
                let code = 1 + i64::from(input.byte() % 6);
                self.op(input, out, code, args);
            }
            1 => {
                let count = 2 + input.below(3);
                let args = (0..count)
                    .map(|_| self.node(input, Ty::Bool, depth + 1))
                    .collect();
                let code = input.pick(&[16, 17, 19]);
                self.op(input, out, code, args);
            }
            2 => {
                let args = vec![self.node(input, Ty::Bool, depth + 1)];
                self.op(input, out, 18, args);
            }
            3 => {
                let ty = input.pick(&TYPES);
                let args = vec![
                    self.node(input, ty, depth + 1),
                    self.node(input, Ty::List, depth + 1),
                ];
                self.op(input, out, 9, args);
            }
            4 => {
                let code = input.pick(&[71, 72]);
                self.op(input, out, code, Vec::new());
            }
            _ => {
                // REGEX and GEO compare: checked, then refused as unsupported.
                let mut flags = Vec::new();
                generate::int(&mut flags, 0);
                let mut regex = Vec::new();
                generate::raw_str(&mut regex, b"a.*");
                let text = self.node(input, Ty::Str, depth + 1);
                match input.byte() % 2 {
                    0 => self.op(input, out, 7, vec![flags, regex, text]),
                    _ => {
                        let args = vec![
                            self.node(input, Ty::Geo, depth + 1),
                            self.node(input, Ty::Geo, depth + 1),
                        ];
                        self.op(input, out, 8, args);
                    }
                }
            }
        }
    }

    fn integer(&mut self, input: &mut Input<'_>, out: &mut Vec<u8>, choice: u8, depth: usize) {
        match choice % 7 {
            0 => {
                let count = 1 + input.below(3);
                let args = (0..count)
                    .map(|_| self.node(input, Ty::Int, depth + 1))
                    .collect();
                let code = input.pick(&[20, 21, 22, 23, 50, 51, 32, 33, 34]);
                self.op(input, out, code, args);
            }
            1 => {
                let args = vec![
                    self.node(input, Ty::Int, depth + 1),
                    self.node(input, Ty::Int, depth + 1),
                ];
                let code = input.pick(&[26, 36, 37, 38]);
                self.op(input, out, code, args);
            }
            2 => {
                let args = vec![self.node(input, Ty::Int, depth + 1)];
                {
                    let code = input.pick(&[27, 35, 39]);
                    self.op(input, out, code, args);
                }
            }
            3 => {
                let args = vec![
                    self.node(input, Ty::Int, depth + 1),
                    self.node(input, Ty::Bool, depth + 1),
                ];
                {
                    let code = input.pick(&[40, 41]);
                    self.op(input, out, code, args);
                }
            }
            4 => {
                let args = vec![self.node(input, Ty::Float, depth + 1)];
                self.op(input, out, 30, args);
            }
            5 => match input.byte() % 4 {
                0 => {
                    let mut modulo = Vec::new();
                    generate::int(&mut modulo, generate::choose_int(input));
                    self.op(input, out, 64, vec![modulo]);
                }
                1 => key_read(out, Ty::Int),
                2 => {
                    let mut name = Vec::new();
                    generate::raw_str(&mut name, input.pick(&BIN_NAMES));
                    self.op(input, out, 82, vec![name]);
                }
                _ => {
                    let code = input.pick(&[65, 66, 67, 68, 69, 73, 74]);
                    self.op(input, out, code, Vec::new());
                }
            },
            _ => self.call(input, out, Ty::Int, depth),
        }
    }

    fn float(&mut self, input: &mut Input<'_>, out: &mut Vec<u8>, choice: u8, depth: usize) {
        match choice % 4 {
            0 => {
                let count = 1 + input.below(3);
                let args = (0..count)
                    .map(|_| self.node(input, Ty::Float, depth + 1))
                    .collect();
                {
                    let code = input.pick(&[20, 21, 22, 23, 50, 51]);
                    self.op(input, out, code, args);
                }
            }
            1 => {
                let args = vec![
                    self.node(input, Ty::Float, depth + 1),
                    self.node(input, Ty::Float, depth + 1),
                ];
                {
                    let code = input.pick(&[24, 25]);
                    self.op(input, out, code, args);
                }
            }
            2 => {
                let args = vec![self.node(input, Ty::Float, depth + 1)];
                {
                    let code = input.pick(&[27, 28, 29]);
                    self.op(input, out, code, args);
                }
            }
            _ => {
                let args = vec![self.node(input, Ty::Int, depth + 1)];
                self.op(input, out, 31, args);
            }
        }
    }

    /// A module call `[127, type, system, payload, bin]` returning `want`: a list or map op
    /// on a list or map, a bit op on a blob, an HLL op on an HLL, read or modify.
    fn call(&mut self, input: &mut Input<'_>, out: &mut Vec<u8>, want: Ty, depth: usize) {
        let (system, bin_type, codes): (i64, Ty, &[i64]) = match input.byte() % 4 {
            0 => (
                0,
                Ty::List,
                &[1, 2, 3, 5, 7, 9, 11, 13, 16, 17, 19, 20, 22, 24, 26, 27, 32],
            ),
            1 => (
                0,
                Ty::Map,
                &[67, 68, 73, 75, 76, 96, 97, 98, 99, 103, 104, 107, 109],
            ),
            2 => (1, Ty::Blob, &[0, 1, 2, 3, 4, 7, 8, 10, 12, 50, 51, 52, 54]),
            _ => (2, Ty::Hll, &[0, 1, 2, 3, 4, 50, 51, 52, 53, 54, 55, 56]),
        };
        let code = input.pick(codes);
        let modify = match system {
            0 => code <= 13 || (32..=89).contains(&code),
            _ => code < 50,
        };
        let flags = system | if modify { 0x40 } else { 0 };
        let mut payload = Vec::new();
        let arg_count = input.below(4);
        generate::array(&mut payload, 1 + arg_count);
        generate::int(&mut payload, code);
        for _ in 0..arg_count {
            match input.byte() % 3 {
                0 => generate::int(&mut payload, i64::from(input.byte() as i8 % 5)),
                1 => generate::value(
                    input,
                    &mut payload,
                    generate::NESTING_MAX - 1,
                    Style::Argument,
                ),
                _ => {
                    let ty = input.pick(&TYPES);
                    payload.extend(self.node(input, ty, depth + 1));
                }
            }
        }
        let mut result = Vec::new();
        generate::int(&mut result, want as i64);
        let mut system_packed = Vec::new();
        generate::int(&mut system_packed, flags);
        let bin = self.node(input, bin_type, depth + 1);
        self.op(input, out, 127, vec![result, system_packed, payload, bin]);
    }
}

/// `[80, type]`: the record's key.
fn key_read(out: &mut Vec<u8>, ty: Ty) {
    generate::array(out, 2);
    generate::int(out, 80);
    generate::int(out, ty as i64);
}

/// `[81, type, name]`: a bin read, mostly of the bin of that type.
fn bin_read(input: &mut Input<'_>, out: &mut Vec<u8>, want: Ty) {
    let typed_name: &[u8] = match want {
        Ty::Int => b"i",
        Ty::Float => b"f",
        Ty::Str => b"s",
        Ty::List => b"l",
        Ty::Map => b"m",
        Ty::Blob => b"b",
        Ty::Hll => b"h",
        Ty::Bool => b"t",
        Ty::Nil | Ty::Geo => b"x",
    };
    let name = match input.byte() % 4 {
        0 => input.pick(&BIN_NAMES),
        _ => typed_name,
    };
    generate::array(out, 3);
    generate::int(out, 81);
    generate::int(out, want as i64);
    generate::raw_str(out, name);
}

/// A literal of type `want`: lists are quoted (`[126, list]`), since an array is an op.
fn literal(input: &mut Input<'_>, out: &mut Vec<u8>, want: Ty) {
    match want {
        Ty::Nil => out.push(0xc0),
        Ty::Bool => out.push(input.pick(&[0xc2, 0xc3])),
        Ty::Int => generate::int(out, generate::choose_int(input)),
        Ty::Float => generate::float(out, input.pick(&[0.0, 2.5, -1.0, 1e10, f64::NAN])),
        Ty::Str => generate::bytes(
            out,
            generate::KIND_STRING,
            input.pick(&[&b""[..], b"a", b"text"]),
        ),
        Ty::Blob => generate::bytes(out, generate::KIND_BLOB, input.short_bytes()),
        Ty::Geo => generate::bytes(out, generate::KIND_GEOJSON, b"{\"type\":\"Point\"}"),
        Ty::Hll => generate::hll(input, out),
        Ty::Map => generate::map_value(input, out, 1, Style::Argument),
        Ty::List => {
            generate::array(out, 2);
            generate::int(out, 126);
            generate::list(input, out, 1, Style::Argument);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_and_generated_expressions_pass_every_check() {
        expressions(&[]);
        expressions(&[1; 64]);
        // Raw: [1, [81, 2, "i"], 7] (bin i == 7).
        let mut data = vec![0];
        data.extend_from_slice(&[0; 11]);
        data.extend_from_slice(&[0x93, 0x01, 0x93, 0x51, 0x02, 0xa1, b'i', 0x07]);
        expressions(&data);
    }

    /// Finding 5, fixed: an EXP_MODIFY of `[126, [wildcard]]` stored `[wildcard]` as a LIST
    /// bin (`ops::write_expression` lacked the check `cdt::modify` makes); it is now refused
    /// with PARAMETER and nothing is written.
    #[test]
    fn an_exp_modify_of_a_wildcard_is_refused_and_stores_nothing() {
        let (namespace, _clock) = fixture::namespace();
        let digest = fixture::digest(0);
        let payload = op_payload(&[0x92, 0x7e, 0x91, 0xd4, 0xff, 0x00], 0);
        let op = bin_op(OpCode::ExpModify, ParticleType::Blob, b"w", &payload);
        assert_eq!(
            write(&namespace, digest, &[op], None).map(|_| ()),
            Err(model::ResultCode::Parameter)
        );
        assert!(fixture::read_all(&namespace, digest).is_err());
    }
}
