//! What each op does to a working record, and which ops a command may carry.
//!
//! Semantics follow the Aerospike server (`as/src/transaction/write.c`, the particle vtables):
//! any type mismatch between an op and a bin is INCOMPATIBLE_TYPE (12); a malformed value is
//! PARAMETER (4); a bad bin name is BIN_NAME (21); collection, bit, HyperLogLog and expression
//! ops are UNSUPPORTED_FEATURE (16) until Osprey implements them.

use model::{BIN_NAME_BYTES_MAX, Op, OpCode, ParticleType, ResultCode};

use crate::msgpack::{Container, is_valid_container};
use crate::working_record::{WorkingRecord, WorkingValue};

/// A family of ops Osprey does not implement yet: a command carrying one answers
/// UNSUPPORTED_FEATURE (16) before its record is touched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnsupportedOp {
    /// List and map (CDT) reads and modifies.
    Collection,
    /// Bitwise reads and modifies of blob bins.
    Bitwise,
    /// HyperLogLog reads and modifies.
    HyperLogLog,
    /// Expression reads and writes.
    Expression,
}

impl UnsupportedOp {
    /// The family of `code` when Osprey does not implement it; `None` for the ops it runs.
    /// Exhaustive on purpose: a new op code must be decided here.
    pub fn of(code: OpCode) -> Option<UnsupportedOp> {
        match code {
            OpCode::Read
            | OpCode::Write
            | OpCode::Incr
            | OpCode::Append
            | OpCode::Prepend
            | OpCode::Touch
            | OpCode::Delete => None,
            OpCode::CdtRead | OpCode::CdtModify => Some(UnsupportedOp::Collection),
            OpCode::BitRead | OpCode::BitModify => Some(UnsupportedOp::Bitwise),
            OpCode::HllRead | OpCode::HllModify => Some(UnsupportedOp::HyperLogLog),
            OpCode::ExpRead | OpCode::ExpModify => Some(UnsupportedOp::Expression),
        }
    }
}

/// What a pre-pass over a command's ops found.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct OpsSummary {
    pub(crate) has_write: bool,
    pub(crate) has_touch: bool,
    pub(crate) has_read_all: bool,
    /// An op a replace-policy write may not carry: anything but a plain bin write or a read
    /// (incr, append, prepend, touch, delete, or a write of NULL that deletes a bin).
    pub(crate) has_non_replace_op: bool,
}

/// Validates every op before the record is touched and summarizes them.
///
/// # Errors
/// UNSUPPORTED_FEATURE for an op of an [`UnsupportedOp`] family; BIN_NAME or PARAMETER for a
/// bad bin name or value.
pub(crate) fn summarize<'a>(ops: impl Iterator<Item = Op<'a>>) -> Result<OpsSummary, ResultCode> {
    let mut summary = OpsSummary::default();
    for op in ops {
        match op.code {
            OpCode::Read if op.bin_name.is_empty() => summary.has_read_all = true,
            OpCode::Read => {}
            OpCode::Touch => summary.has_touch = true,
            OpCode::Delete => {}
            OpCode::Write if op.particle_type == ParticleType::Null as u8 => {
                check_bin_name(op.bin_name)?;
                check_value(op.particle_type, op.value)?;
                summary.has_non_replace_op = true;
            }
            OpCode::Write | OpCode::Incr | OpCode::Append | OpCode::Prepend => {
                check_bin_name(op.bin_name)?;
                check_value(op.particle_type, op.value)?;
            }
            OpCode::CdtRead
            | OpCode::CdtModify
            | OpCode::ExpRead
            | OpCode::ExpModify
            | OpCode::BitRead
            | OpCode::BitModify
            | OpCode::HllRead
            | OpCode::HllModify => return Err(ResultCode::UnsupportedFeature),
        }
        summary.has_write |= op.code.is_write();
        summary.has_non_replace_op |= !matches!(op.code, OpCode::Read | OpCode::Write);
    }
    Ok(summary)
}

/// Applies one modifying op (write, incr, append, prepend, delete) to the working record.
pub(crate) fn apply_modify<'w, 'a: 'w>(
    working: &mut WorkingRecord<'w>,
    op: &Op<'a>,
) -> Result<(), ResultCode> {
    match op.code {
        OpCode::Write if op.particle_type == ParticleType::Null as u8 => {
            working.remove(op.bin_name);
        }
        OpCode::Write if op.particle_type == ParticleType::Integer as u8 => {
            let value = integer_from_wire(op.value).ok_or(ResultCode::Parameter)?;
            let widened = WorkingValue::Inline(value.to_be_bytes());
            working.set(op.bin_name, op.particle_type, widened);
        }
        OpCode::Write => {
            let value = WorkingValue::Borrowed(op.value);
            working.set(op.bin_name, op.particle_type, value);
        }
        OpCode::Incr => apply_incr(working, op)?,
        OpCode::Append | OpCode::Prepend => apply_concat(working, op)?,
        OpCode::Delete => working.clear(),
        _ => unreachable!("apply_modify called with {:?}", op.code),
    }
    Ok(())
}

fn apply_incr<'w, 'a: 'w>(working: &mut WorkingRecord<'w>, op: &Op<'a>) -> Result<(), ResultCode> {
    let operand: [u8; 8] = match ParticleType::from_u8(op.particle_type) {
        Some(ParticleType::Integer) => integer_from_wire(op.value)
            .ok_or(ResultCode::Parameter)?
            .to_be_bytes(),
        _ => op.value.try_into().map_err(|_| ResultCode::Parameter)?,
    };
    let sum = match (
        ParticleType::from_u8(op.particle_type),
        working.get(op.bin_name),
    ) {
        (Some(ParticleType::Integer | ParticleType::Float), None) => operand,
        (Some(ParticleType::Integer), Some(bin)) if bin.particle_type == op.particle_type => {
            let current = i64::from_be_bytes(bin.value.try_into().map_err(|_| corrupt())?);
            current
                .wrapping_add(i64::from_be_bytes(operand))
                .to_be_bytes()
        }
        (Some(ParticleType::Float), Some(bin)) if bin.particle_type == op.particle_type => {
            let current = f64::from_be_bytes(bin.value.try_into().map_err(|_| corrupt())?);
            (current + f64::from_be_bytes(operand)).to_be_bytes()
        }
        _ => return Err(ResultCode::IncompatibleType),
    };
    working.set(op.bin_name, op.particle_type, WorkingValue::Inline(sum));
    Ok(())
}

fn apply_concat<'w, 'a: 'w>(
    working: &mut WorkingRecord<'w>,
    op: &Op<'a>,
) -> Result<(), ResultCode> {
    let concat_type = matches!(
        ParticleType::from_u8(op.particle_type),
        Some(ParticleType::String | ParticleType::Blob)
    );
    if !concat_type {
        return Err(ResultCode::IncompatibleType);
    }
    // In place: an operate of many appends (or prepends) to one bin costs what it adds, not a
    // copy of the whole value per op.
    match working.value_mut(op.bin_name) {
        None => working.set(
            op.bin_name,
            op.particle_type,
            WorkingValue::Borrowed(op.value),
        ),
        Some((particle_type, _)) if particle_type != op.particle_type => {
            return Err(ResultCode::IncompatibleType);
        }
        Some((_, value)) => value.concat(op.value, op.code == OpCode::Prepend),
    }
    Ok(())
}

/// Aerospike's `as_bin_name_check`: 1..=15 bytes and no NUL (names are C strings there).
fn check_bin_name(name: &[u8]) -> Result<(), ResultCode> {
    if name.is_empty() || name.len() > BIN_NAME_BYTES_MAX || name.contains(&0) {
        return Err(ResultCode::BinName);
    }
    Ok(())
}

/// An integer particle as Aerospike's `integer_from_wire` reads it: 1, 2, 4 or 8 bytes,
/// big-endian, zero-extended. The official clients always send 8.
fn integer_from_wire(value: &[u8]) -> Option<i64> {
    if !matches!(value.len(), 1 | 2 | 4 | 8) {
        return None;
    }
    let mut buffer = [0u8; 8];
    buffer[8 - value.len()..].copy_from_slice(value);
    Some(i64::from_be_bytes(buffer))
}

fn check_value(particle_type: u8, value: &[u8]) -> Result<(), ResultCode> {
    let particle_type = ParticleType::from_u8(particle_type).ok_or(ResultCode::Parameter)?;
    let size_ok = match particle_type {
        ParticleType::Integer => integer_from_wire(value).is_some(),
        other => other
            .fixed_size_bytes()
            .is_none_or(|size| value.len() == size),
    };
    if !size_ok {
        return Err(ResultCode::Parameter);
    }
    let container = match particle_type {
        ParticleType::List => Some(Container::Array),
        ParticleType::Map => Some(Container::Map),
        _ => None,
    };
    if container.is_some_and(|container| !is_valid_container(value, container)) {
        return Err(ResultCode::Parameter);
    }
    if particle_type == ParticleType::Bool && value[0] > 1 {
        return Err(ResultCode::Parameter);
    }
    if particle_type == ParticleType::Null && !value.is_empty() {
        return Err(ResultCode::Parameter);
    }
    Ok(())
}

/// A stored integer or float that is not 8 bytes: impossible unless memory is corrupt, since
/// every write checks fixed sizes first.
fn corrupt() -> ResultCode {
    ResultCode::Unknown
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op<'a>(
        code: OpCode,
        particle_type: ParticleType,
        name: &'a [u8],
        value: &'a [u8],
    ) -> Op<'a> {
        Op {
            code,
            particle_type: particle_type as u8,
            bin_name: name,
            value,
        }
    }

    #[test]
    fn incr_adds_integers_and_creates_missing_bins() {
        let five = 5i64.to_be_bytes();
        let mut working = WorkingRecord::default();
        let incr = op(OpCode::Incr, ParticleType::Integer, b"n", &five);
        apply_modify(&mut working, &incr).unwrap();
        apply_modify(&mut working, &incr).unwrap();
        assert_eq!(working.get(b"n").unwrap().value, 10i64.to_be_bytes());
    }

    #[test]
    fn incr_of_a_string_bin_is_incompatible_type() {
        let one = 1i64.to_be_bytes();
        let mut working = WorkingRecord::default();
        working.set(
            b"s",
            ParticleType::String as u8,
            WorkingValue::Borrowed(b"x"),
        );
        let incr = op(OpCode::Incr, ParticleType::Integer, b"s", &one);
        assert_eq!(
            apply_modify(&mut working, &incr),
            Err(ResultCode::IncompatibleType)
        );
        let float_on_int = op(OpCode::Incr, ParticleType::Float, b"s", &one);
        assert_eq!(
            apply_modify(&mut working, &float_on_int),
            Err(ResultCode::IncompatibleType)
        );
    }

    #[test]
    fn short_integers_are_widened_to_eight_bytes_zero_extended() {
        let mut working = WorkingRecord::default();
        let write = op(OpCode::Write, ParticleType::Integer, b"n", &[0xff, 0xfe]);
        apply_modify(&mut working, &write).unwrap();
        assert_eq!(working.get(b"n").unwrap().value, 0xfffei64.to_be_bytes());
        let bad_list = [op(OpCode::Write, ParticleType::List, b"l", &[0x92, 0x01])];
        assert_eq!(
            summarize(bad_list.into_iter()).unwrap_err(),
            ResultCode::Parameter
        );
        let nul_name = [op(OpCode::Write, ParticleType::Integer, b"a\0b", &[1])];
        assert_eq!(
            summarize(nul_name.into_iter()).unwrap_err(),
            ResultCode::BinName
        );
    }

    #[test]
    fn append_and_prepend_join_in_the_right_order() {
        let mut working = WorkingRecord::default();
        apply_modify(
            &mut working,
            &op(OpCode::Append, ParticleType::String, b"s", b"mid"),
        )
        .unwrap();
        apply_modify(
            &mut working,
            &op(OpCode::Append, ParticleType::String, b"s", b"-end"),
        )
        .unwrap();
        apply_modify(
            &mut working,
            &op(OpCode::Prepend, ParticleType::String, b"s", b"go-"),
        )
        .unwrap();
        assert_eq!(working.get(b"s").unwrap().value, b"go-mid-end");
        let blob = op(OpCode::Append, ParticleType::Blob, b"s", b"x");
        assert_eq!(
            apply_modify(&mut working, &blob),
            Err(ResultCode::IncompatibleType)
        );
    }

    /// The bug: each append or prepend copied the whole value into a new one, so an operate of
    /// 32,768 appends to one bin copied O(n^2) bytes (with 4 KiB ops, petabytes: the request
    /// never ended). The value now grows in place at either end, amortized O(bytes added);
    /// the old way, this test would copy about 3 × 10^11 bytes.
    #[test]
    fn many_appends_and_prepends_to_one_bin_cost_what_they_add() {
        const LETTERS: &[u8] = b"abcdefghijklmnopqrstuvwxyz";
        let chunk = [b'x'; 100];
        let mut working = WorkingRecord::default();
        let mut expected: std::collections::VecDeque<u8> = std::collections::VecDeque::new();
        for round in 0..100_000u32 {
            let letter = (round % 26) as usize;
            let (code, bytes): (OpCode, &[u8]) = if round % 3 == 0 {
                (OpCode::Prepend, &LETTERS[letter..=letter])
            } else {
                (OpCode::Append, &chunk)
            };
            apply_modify(&mut working, &op(code, ParticleType::Blob, b"s", bytes)).unwrap();
            if code == OpCode::Prepend {
                expected.push_front(bytes[0]);
            } else {
                expected.extend(bytes);
            }
        }
        let value = working.get(b"s").unwrap().value.to_vec();
        assert_eq!(value.len(), expected.len());
        assert!(value.iter().eq(expected.iter()));
    }

    /// The server counts each UNSUPPORTED_FEATURE answer under the family `UnsupportedOp::of`
    /// names, so that function and `summarize` must agree on every op code.
    #[test]
    fn summarize_refuses_exactly_the_ops_of_an_unsupported_family() {
        for byte in 0..=u8::MAX {
            let Some(code) = OpCode::from_u8(byte) else {
                continue;
            };
            let ops = [op(code, ParticleType::Integer, b"a", &[0; 8])];
            let refused = summarize(ops.into_iter()).err() == Some(ResultCode::UnsupportedFeature);
            assert_eq!(refused, UnsupportedOp::of(code).is_some(), "{code:?}");
        }
        assert_eq!(
            UnsupportedOp::of(OpCode::CdtModify),
            Some(UnsupportedOp::Collection)
        );
        assert_eq!(
            UnsupportedOp::of(OpCode::HllRead),
            Some(UnsupportedOp::HyperLogLog)
        );
    }

    #[test]
    fn summarize_rejects_bad_names_values_and_unsupported_ops() {
        let long_name = [b'a'; 16];
        let bad = [op(
            OpCode::Write,
            ParticleType::Integer,
            &long_name,
            &[0; 8],
        )];
        assert_eq!(summarize(bad.into_iter()).unwrap_err(), ResultCode::BinName);
        let short_int = [op(OpCode::Write, ParticleType::Integer, b"a", &[0; 3])];
        assert_eq!(
            summarize(short_int.into_iter()).unwrap_err(),
            ResultCode::Parameter
        );
        let cdt = [op(OpCode::CdtModify, ParticleType::Blob, b"a", b"\x91\x01")];
        assert_eq!(
            summarize(cdt.into_iter()).unwrap_err(),
            ResultCode::UnsupportedFeature
        );
        let bad_bool = [op(OpCode::Write, ParticleType::Bool, b"a", &[2])];
        assert_eq!(
            summarize(bad_bool.into_iter()).unwrap_err(),
            ResultCode::Parameter
        );
    }
}
