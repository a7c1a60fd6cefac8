//! The target over the list, map (CDT), bitwise and HyperLogLog ops: a record with
//! fuzz-chosen starting bins, then one request of 1 to 4 such ops, through the public
//! `Namespace` API only.
//!
//! The input chooses the starting bins (a list, a map, a blob, an integer and an HLL bin, each
//! present or not; the collections built by [`crate::generate`] as valid msgpack; plus the
//! input's own bytes as a LIST bin when the engine's write check takes them), then each op's
//! family, code, bin and payload: raw fuzz bytes, or a generated `[code, args...]` (for CDT
//! ops optionally `[0xff, [ctx...], [code, args...]]`) whose arguments may hold wildcards,
//! infinity, HyperLogLog sketches, a declared count of 2^32 - 1 and deep nesting. A request
//! of read ops only is a read, otherwise a write (operate).
//!
//! Invariants the target asserts, beyond "no panic":
//! - A request that fails leaves the record exactly as it was (every bin and the generation);
//!   so does a read, whatever its result.
//! - A write that succeeds bumps the generation once (or deletes the record, having removed
//!   every bin), and leaves a record whose every LIST (MAP) bin is one complete msgpack array
//!   (map) by the reference decoder, and whose changed LIST and MAP bins hold no wildcard or
//!   infinity.
//! - The record stays within the namespace's record size limit.

use engine::{Acks, Namespace, NamespaceConfig, ReadRequest, WriteRequest};
use model::{Digest, Generation, Op, OpCode, ParticleType, ResultCode};

use crate::fixture::{self, Collect, OwnedBin};
use crate::generate::{self, Style};
use crate::input::Input;
use crate::msgpack;

/// Most ops one request carries.
const OPS_MAX: usize = 4;

/// Bin names ops use: the starting bins' (list, map, blob, integer, HLL, raw list) and one
/// that never exists.
const BIN_NAMES: [&[u8]; 7] = [b"l", b"m", b"b", b"i", b"h", b"r", b"x"];

/// Most bits of a context step list (type, value pairs).
const CONTEXT_STEPS_MAX: usize = 3;

/// Context step types (list index, rank, value; map index, rank, key, value) and the create
/// flags of the two that take them.
const CONTEXT_TYPES: [i64; 11] = [
    0x10, 0x11, 0x13, 0x20, 0x21, 0x22, 0x23, 0x50, 0xd0, 0xa2, 0xe2,
];

/// The op families and the op codes each knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Family {
    List,
    Map,
    Bits,
    Hll,
}

const FAMILIES: [Family; 4] = [Family::List, Family::Map, Family::Bits, Family::Hll];

impl Family {
    /// Every op code of the family (for maps, and one past the last).
    fn codes(self) -> &'static [u8] {
        const LIST: [u8; 35] = [
            0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25,
            26, 27, 32, 33, 34, 35, 36, 37, 38, 39, 40,
        ];
        const MAP: [u8; 38] = [
            64, 65, 66, 67, 68, 69, 70, 73, 74, 75, 76, 77, 78, 79, 81, 82, 83, 84, 85, 86, 87, 88,
            89, 96, 97, 98, 99, 100, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111,
        ];
        const BITS: [u8; 18] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 50, 51, 52, 53, 54];
        const HLL: [u8; 12] = [0, 1, 2, 3, 4, 50, 51, 52, 53, 54, 55, 56];
        match self {
            Family::List => &LIST,
            Family::Map => &MAP,
            Family::Bits => &BITS,
            Family::Hll => &HLL,
        }
    }

    /// Whether `code` modifies, by Aerospike's numbering (an unknown code counts as a read).
    fn modifies(self, code: u8) -> bool {
        match self {
            Family::List => code <= 13 || (32..=40).contains(&code),
            Family::Map => matches!(code, 64..=70 | 73..=79 | 81..=89),
            Family::Bits | Family::Hll => code < 50,
        }
    }

    /// The op code of a request op of this family.
    fn op_code(self, modifies: bool) -> OpCode {
        match (self, modifies) {
            (Family::List | Family::Map, false) => OpCode::CdtRead,
            (Family::List | Family::Map, true) => OpCode::CdtModify,
            (Family::Bits, false) => OpCode::BitRead,
            (Family::Bits, true) => OpCode::BitModify,
            (Family::Hll, false) => OpCode::HllRead,
            (Family::Hll, true) => OpCode::HllModify,
        }
    }
}

/// One op of the request, its payload owned.
#[derive(Debug)]
struct OwnedOp {
    code: OpCode,
    bin_name: &'static [u8],
    payload: Vec<u8>,
}

impl OwnedOp {
    fn as_op(&self) -> Op<'_> {
        Op {
            code: self.code,
            particle_type: ParticleType::Blob as u8,
            bin_name: self.bin_name,
            value: &self.payload,
        }
    }
}

/// What a read of the whole record gives: its metadata and bins, or the error.
pub(crate) type Snapshot = Result<(engine::RecordMeta, Vec<OwnedBin>), ResultCode>;

/// Target `collection_ops`: starting bins, then one request of 1 to [`OPS_MAX`] ops.
pub fn collection_ops(data: &[u8]) {
    let mut input = Input::new(data);
    let (namespace, _clock) = fixture::namespace();
    let digest = fixture::digest(0);
    write_starting_bins(&namespace, digest, &mut input);
    let respond_all_ops = input.byte() % 2 == 1;
    let op_count = 1 + input.below(OPS_MAX);
    let ops: Vec<OwnedOp> = (0..op_count).map(|_| read_op(&mut input)).collect();
    let before = fixture::read_all(&namespace, digest);
    let is_write = ops.iter().any(|op| op.code.is_write());
    let mut sink = Collect::default();
    let result = match is_write {
        true => write(&namespace, digest, &ops, respond_all_ops, &mut sink),
        false => read(&namespace, digest, &ops, respond_all_ops, &mut sink),
    };
    let after = fixture::read_all(&namespace, digest);
    let context = format!("{ops:02x?}: {result:?}");
    match result {
        Ok(meta) if is_write => check_written(&before, meta, &after, &context, false),
        _ => assert_eq!(after, before, "{context}: the record changed"),
    }
}

/// Writes the starting bins the input chooses (none: no record), then the input's own bytes
/// as a LIST bin `r` when the engine takes them.
fn write_starting_bins(namespace: &Namespace, digest: Digest, input: &mut Input<'_>) {
    let present = input.byte();
    let mut list = Vec::new();
    generate::list(input, &mut list, 0, Style::Stored);
    let mut map = Vec::new();
    generate::map_value(input, &mut map, 0, Style::Stored);
    let blob = input.short_bytes();
    let integer = generate::choose_int(input).to_be_bytes();
    let hll_init = [0x93, 0x00, 4 + input.byte() % 7, input.pick(&[0u8, 4, 8])];
    let candidates = [
        bin_op(OpCode::Write, ParticleType::List, b"l", &list),
        bin_op(OpCode::Write, ParticleType::Map, b"m", &map),
        bin_op(OpCode::Write, ParticleType::Blob, b"b", blob),
        bin_op(OpCode::Write, ParticleType::Integer, b"i", &integer),
        bin_op(OpCode::HllModify, ParticleType::Blob, b"h", &hll_init),
    ];
    let ops: Vec<Op<'_>> = candidates
        .iter()
        .enumerate()
        .filter(|(bit, _)| present & (1 << bit) != 0)
        .map(|(_, op)| *op)
        .collect();
    if !ops.is_empty() {
        let written = fixture::write(namespace, digest, &ops);
        assert!(written.is_ok(), "starting bins {ops:02x?}: {written:?}");
    }
    if present & 0x20 != 0 {
        let raw = input.short_bytes();
        let before = fixture::read_all(namespace, digest);
        let op = bin_op(OpCode::Write, ParticleType::List, b"r", raw);
        if fixture::write(namespace, digest, &[op]).is_err() {
            let after = fixture::read_all(namespace, digest);
            assert_eq!(after, before, "a refused LIST write changed the record");
        }
    }
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

/// One op: a family, a code of it (rarely any byte), the matching op code (rarely the other
/// one), a bin, and a payload (rarely raw bytes).
fn read_op(input: &mut Input<'_>) -> OwnedOp {
    let family = input.pick(&FAMILIES);
    let choice = input.byte();
    let code = match choice % 16 {
        0 => input.byte(),
        _ => input.pick(family.codes()),
    };
    let modifies = family.modifies(code) != (choice % 16 == 1);
    let bin_name = input.pick(&BIN_NAMES);
    let payload = match choice % 16 {
        2 => input.short_bytes().to_vec(),
        _ => payload(input, family, code),
    };
    OwnedOp {
        code: family.op_code(modifies),
        bin_name,
        payload,
    }
}

/// A well-formed payload `[code, args...]` of up to 4 generated arguments; for CDT ops
/// sometimes wrapped in a context.
fn payload(input: &mut Input<'_>, family: Family, code: u8) -> Vec<u8> {
    let mut out = Vec::new();
    let with_context =
        matches!(family, Family::List | Family::Map) && input.byte().is_multiple_of(4);
    if with_context {
        generate::array(&mut out, 3);
        generate::int(&mut out, 0xff);
        context(input, &mut out);
    }
    let arg_count = input.below(5);
    generate::array(&mut out, 1 + arg_count);
    generate::int(&mut out, i64::from(code));
    for _ in 0..arg_count {
        argument(input, &mut out, family);
    }
    out
}

/// A context: up to [`CONTEXT_STEPS_MAX`] (type, value) steps, flattened.
fn context(input: &mut Input<'_>, out: &mut Vec<u8>) {
    let steps = input.below(CONTEXT_STEPS_MAX + 1);
    generate::array(out, 2 * steps);
    for _ in 0..steps {
        generate::int(out, input.pick(&CONTEXT_TYPES));
        match input.byte() % 3 {
            0 => generate::int(out, i64::from(input.byte() as i8 % 4)),
            1 => generate::map_key(input, out),
            _ => generate::value(input, out, 2, Style::Argument),
        }
    }
}

/// One argument: mostly a small integer (indexes, counts, flags, bit offsets), else any value.
fn argument(input: &mut Input<'_>, out: &mut Vec<u8>, family: Family) {
    match input.byte() % 4 {
        0 => generate::int(out, i64::from(input.byte() as i8 % 9)),
        1 if family == Family::Hll => hll_argument(input, out),
        1 => generate::int(out, generate::choose_int(input)),
        _ => generate::value(input, out, 1, Style::Argument),
    }
}

/// A HyperLogLog argument: a list of elements to add, or of sketches.
fn hll_argument(input: &mut Input<'_>, out: &mut Vec<u8>) {
    let count = 1 + input.below(3);
    generate::array(out, count);
    let sketches = input.byte().is_multiple_of(2);
    for _ in 0..count {
        match sketches {
            true => generate::hll(input, out),
            false => generate::map_key(input, out),
        }
    }
}

fn write(
    namespace: &Namespace,
    digest: Digest,
    ops: &[OwnedOp],
    respond_all_ops: bool,
    sink: &mut Collect,
) -> Result<engine::RecordMeta, ResultCode> {
    let request = WriteRequest {
        digest,
        set_name: fixture::SET_NAME,
        key: None,
        exists: engine::ExistsPolicy::Update,
        generation: engine::GenerationPolicy::None,
        ttl: model::TtlRequest::NamespaceDefault,
        respond_all_ops,
        deadline: engine::Deadline::NONE,
        filter: None,
        read_all_bins: false,
    };
    let ops = ops.iter().map(OwnedOp::as_op);
    namespace.write(&request, ops, sink, &mut Acks::default())
}

fn read(
    namespace: &Namespace,
    digest: Digest,
    ops: &[OwnedOp],
    respond_all_ops: bool,
    sink: &mut Collect,
) -> Result<engine::RecordMeta, ResultCode> {
    let request = ReadRequest {
        digest,
        set_name: b"",
        key: None,
        respond_all_ops,
        read_all_bins: false,
        header_only: false,
        deadline: engine::Deadline::NONE,
        filter: None,
    };
    namespace.read(&request, ops.iter().map(OwnedOp::as_op), sink)
}

/// After a successful write: the generation moved on once (or the record is gone, deleted by
/// the write), and the bins hold up (see [`check_bins`]; `specials_allowed` skips its
/// wildcard check, for an open finding only).
pub(crate) fn check_written(
    before: &Snapshot,
    meta: engine::RecordMeta,
    after: &Snapshot,
    context: &str,
    specials_allowed: bool,
) {
    let expected_generation = match before {
        Ok((before_meta, _)) => before_meta.generation.next(),
        Err(_) => Generation::FIRST,
    };
    match after {
        Ok((after_meta, bins)) => {
            assert_eq!(after_meta.generation, expected_generation, "{context}");
            assert_eq!(meta.generation, expected_generation, "{context}");
            let old_bins = before.as_ref().map(|(_, bins)| bins.as_slice());
            check_bins(
                old_bins.unwrap_or_default(),
                bins,
                context,
                specials_allowed,
            );
        }
        Err(code) => {
            assert_eq!(*code, ResultCode::NotFound, "{context}");
            assert_eq!(meta.generation, Generation(0), "{context}: deleted");
        }
    }
}

/// Every LIST (MAP) bin is one complete msgpack array (map); those that changed hold no
/// wildcard or infinity (unless `specials_allowed`); the bins fit the record size limit.
pub(crate) fn check_bins(
    before: &[OwnedBin],
    after: &[OwnedBin],
    context: &str,
    specials_allowed: bool,
) {
    let mut size_bytes = 0;
    for bin in after {
        let (name, particle_type, value) = bin;
        size_bytes += name.len() + value.len();
        let container = match ParticleType::from_u8(*particle_type) {
            Some(ParticleType::List) => (true, false),
            Some(ParticleType::Map) => (false, true),
            _ => continue,
        };
        if let Some(found) = msgpack::reference_container(value) {
            assert_eq!(found, container, "{context}: bin {name:?} = {value:02x?}");
        }
        if !specials_allowed && !before.contains(bin) {
            let special = msgpack::reference_has_special(value);
            assert_ne!(
                special,
                Some(true),
                "{context}: bin {name:?} stores a wildcard or infinity: {value:02x?}"
            );
        }
    }
    let limit = NamespaceConfig::with_defaults("fuzz").max_record_size_bytes as usize;
    assert!(size_bytes <= limit, "{context}: {size_bytes} bytes stored");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_input_reads_a_missing_record() {
        collection_ops(&[]);
    }

    #[test]
    fn every_starting_bin_then_list_appends_pass_every_check() {
        let mut data = vec![0x3f];
        data.extend_from_slice(&[0; 40]);
        data.extend_from_slice(&[1, 3, 0, 1, 1, 0, 0]);
        collection_ops(&data);
    }
}
