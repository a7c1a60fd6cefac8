//! What each op does to a working record, and which ops a command may carry.
//!
//! Semantics follow the Aerospike server (`as/src/transaction/write.c`, the particle vtables):
//! any type mismatch between an op and a bin is INCOMPATIBLE_TYPE (12); a malformed value is
//! PARAMETER (4); a bad bin name is BIN_NAME (21). List and map (CDT) ops run in `cdt`, bit
//! ops in `bits`, HyperLogLog ops in `hll`, expression ops through `exp`.

use model::{BIN_NAME_BYTES_MAX, Op, OpCode, ParticleType, ResultCode};

use crate::cdt;
use crate::cdt::value::{self as cdt_value, Value};
use crate::exp::{Expression, RecordFacts, RecordView};
use crate::msgpack::{Container, is_valid_container};
use crate::working_record::{WorkingRecord, WorkingValue};
use crate::{bits, hll};

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
/// BIN_NAME or PARAMETER for a
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
                check_geojson(&op)?;
            }
            OpCode::CdtRead | OpCode::CdtModify => {
                check_bin_name(op.bin_name)?;
                let call = cdt::Call::parse(op.value)?;
                if call.is_modify()? != (op.code == OpCode::CdtModify) {
                    return Err(ResultCode::Parameter);
                }
            }
            OpCode::BitRead | OpCode::BitModify | OpCode::HllRead | OpCode::HllModify => {
                check_bin_name(op.bin_name)?;
                let code = payload_op_code(op.value)?;
                let modifies = match op.code {
                    OpCode::BitRead | OpCode::BitModify => bits::is_modify(code),
                    _ => hll::is_modify(code),
                };
                let writes = matches!(op.code, OpCode::BitModify | OpCode::HllModify);
                if modifies != Some(writes) {
                    return Err(ResultCode::Parameter);
                }
            }
            OpCode::ExpRead | OpCode::ExpModify => {
                check_bin_name(op.bin_name)?;
                ExpressionOp::parse(&op)?;
            }
        }
        summary.has_write |= op.code.is_write();
        summary.has_non_replace_op |= !matches!(op.code, OpCode::Read | OpCode::Write);
    }
    Ok(summary)
}

/// An expression op (EXP_READ / EXP_MODIFY): `[expression, flags]`.
pub(crate) struct ExpressionOp {
    expression: Expression,
    flags: i64,
}

/// EXP_MODIFY flags: the bin must not exist / must exist; a nil result deletes the bin; a
/// policy failure (the two before) is a no-op; an evaluation failure is a no-op.
const EXP_CREATE_ONLY: i64 = 1;
const EXP_UPDATE_ONLY: i64 = 2;
const EXP_ALLOW_DELETE: i64 = 4;
const EXP_POLICY_NO_FAIL: i64 = 8;
const EXP_EVAL_NO_FAIL: i64 = 16;

impl ExpressionOp {
    /// Parses an expression op's payload.
    ///
    /// # Errors
    /// PARAMETER for a malformed payload or expression; the expression's own error.
    pub(crate) fn parse(op: &Op<'_>) -> Result<ExpressionOp, ResultCode> {
        let Value::List(list) = cdt_value::decode(op.value)? else {
            return Err(ResultCode::Parameter);
        };
        let [expression, flags] = list.items.as_slice() else {
            return Err(ResultCode::Parameter);
        };
        let flags = flags.as_int().ok_or(ResultCode::Parameter)?;
        let write_flags = EXP_CREATE_ONLY | EXP_UPDATE_ONLY;
        if flags & write_flags == write_flags || flags & !0x1f != 0 {
            return Err(ResultCode::Parameter);
        }
        let expression = Expression::parse(&cdt_value::pack(expression))?;
        Ok(ExpressionOp { expression, flags })
    }

    /// The expression's value on `record`; `None` when it is unknown and EVAL_NO_FAIL
    /// allows that.
    ///
    /// # Errors
    /// OP_NOT_APPLICABLE when the value is unknown.
    fn value(&self, record: &dyn RecordView) -> Result<Option<Value>, ResultCode> {
        match self.expression.eval(record)? {
            Some(value) => Ok(Some(value)),
            None if self.flags & EXP_EVAL_NO_FAIL != 0 => Ok(None),
            None => Err(ResultCode::OpNotApplicable),
        }
    }
}

/// Runs an EXP_READ op on `record`; returns its result as a particle.
pub(crate) fn read_expression(
    op: &Op<'_>,
    record: &dyn RecordView,
) -> Result<(u8, Vec<u8>), ResultCode> {
    let expression = ExpressionOp::parse(op)?;
    let value = expression.value(record)?.unwrap_or(Value::Nil);
    Ok(cdt_value::to_particle(&value))
}

/// Runs an EXP_MODIFY op: writes the expression's value (evaluated on the working record
/// and `facts`) to the op's bin, as Aerospike's `expop.c` does.
pub(crate) fn write_expression<'w, 'a: 'w>(
    working: &mut WorkingRecord<'w>,
    op: &Op<'a>,
    facts: RecordFacts<'_>,
) -> Result<(), ResultCode> {
    let expression = ExpressionOp::parse(op)?;
    let view = WorkingView { working, facts };
    let Some(value) = expression.value(&view)? else {
        return Ok(());
    };
    // A wildcard or infinity may select, never be stored (fuzz finding: a quoted list literal
    // holding one was written into the bin).
    if value.has_special() {
        return Err(ResultCode::Parameter);
    }
    let exists = working.get(op.bin_name).is_some();
    let flags = expression.flags;
    let is_nil = matches!(value, Value::Nil);
    let refused = if flags & EXP_CREATE_ONLY != 0 && exists {
        Some(ResultCode::BinExists)
    } else if flags & EXP_UPDATE_ONLY != 0 && !exists {
        Some(ResultCode::BinNotFound)
    } else if is_nil && flags & EXP_ALLOW_DELETE == 0 {
        Some(ResultCode::OpNotApplicable)
    } else {
        None
    };
    if let Some(code) = refused {
        return match flags & EXP_POLICY_NO_FAIL {
            0 => Err(code),
            _ => Ok(()),
        };
    }
    if is_nil {
        working.remove(op.bin_name);
        return Ok(());
    }
    let (particle_type, mut bytes) = cdt_value::to_particle(&value);
    if particle_type == ParticleType::GeoJson as u8 {
        bytes = crate::geo::stored_form(&bytes)?;
    }
    let owned = WorkingValue::Owned {
        buffer: bytes,
        start: 0,
    };
    working.set(op.bin_name, particle_type, owned);
    Ok(())
}

/// The working record of a command, as an expression reads it.
pub(crate) struct WorkingView<'v, 'w> {
    pub(crate) working: &'v WorkingRecord<'w>,
    pub(crate) facts: RecordFacts<'v>,
}

impl RecordView for WorkingView<'_, '_> {
    fn bin(&self, name: &[u8]) -> Option<(u8, &[u8])> {
        self.working
            .iter()
            .find(|bin| bin.name == name)
            .map(|bin| (bin.particle_type, bin.value))
    }

    fn meta(&self) -> RecordFacts<'_> {
        self.facts
    }
}

/// The op code at the head of a CDT, bit or HLL payload (`[code, args...]`).
fn payload_op_code(payload: &[u8]) -> Result<u8, ResultCode> {
    let Value::List(list) = cdt_value::decode(payload)? else {
        return Err(ResultCode::Parameter);
    };
    let code = list.items.first().and_then(Value::as_int);
    code.and_then(|code| u8::try_from(code).ok())
        .ok_or(ResultCode::Parameter)
}

/// Runs a list, map, bit or HyperLogLog op on its bin in the working record (a modify stores
/// the bin it leaves); returns the op's result as a particle (type, bytes).
pub(crate) fn apply_module<'w, 'a: 'w>(
    working: &mut WorkingRecord<'w>,
    op: &Op<'a>,
) -> Result<(u8, Vec<u8>), ResultCode> {
    match op.code {
        OpCode::CdtRead | OpCode::CdtModify => apply_collection(working, op),
        OpCode::BitRead | OpCode::HllRead => {
            let bin = working.get(op.bin_name);
            read_module(op, bin.map(|bin| (bin.particle_type, bin.value)))
        }
        _ => {
            let mut bin = working
                .get(op.bin_name)
                .map(|bin| (bin.particle_type, bin.value.to_vec()));
            let result = match op.code {
                OpCode::BitModify => bits::modify(op.value, &mut bin)?,
                _ => hll::modify(op.value, &mut bin)?,
            };
            if let Some((particle_type, bytes)) = bin {
                let owned = WorkingValue::Owned {
                    buffer: bytes,
                    start: 0,
                };
                working.set(op.bin_name, particle_type, owned);
            }
            Ok(cdt_value::to_particle(&result))
        }
    }
}

/// A modified list or map as its bin's particle, packed into a buffer sized for what it held.
fn collection_particle(value: &Value, size_before: usize) -> (u8, Vec<u8>) {
    match value {
        Value::List(_) => (
            ParticleType::List as u8,
            cdt_value::pack_with_capacity(value, size_before + 16),
        ),
        Value::Map(_) => (
            ParticleType::Map as u8,
            cdt_value::pack_with_capacity(value, size_before + 16),
        ),
        other => cdt_value::to_particle(other),
    }
}

/// A read-only list, map, bit or HyperLogLog op on a stored bin (`None`: missing); returns
/// the result as a particle.
pub(crate) fn read_module(
    op: &Op<'_>,
    bin: Option<(u8, &[u8])>,
) -> Result<(u8, Vec<u8>), ResultCode> {
    let result = match op.code {
        OpCode::CdtRead => return read_collection(op, bin),
        OpCode::BitRead => bits::read(op.value, bin)?,
        _ => hll::read(op.value, bin)?,
    };
    Ok(cdt_value::to_particle(&result))
}

/// Runs a list or map op on its bin in the working record (a modify stores the bin it
/// leaves); returns the op's result as a particle (type, bytes).
fn apply_collection<'w, 'a: 'w>(
    working: &mut WorkingRecord<'w>,
    op: &Op<'a>,
) -> Result<(u8, Vec<u8>), ResultCode> {
    let call = cdt::Call::parse(op.value)?;
    if op.code == OpCode::CdtModify
        && let Some(outcome) = modify_collection_packed(working, op, &call)
    {
        return outcome;
    }
    let stored = working.get(op.bin_name);
    let size_before = stored.map_or(0, |bin| bin.value.len());
    let bin = match stored {
        Some(bin) => Some(cdt_value::from_particle(bin.particle_type, bin.value)?),
        None => None,
    };
    if op.code == OpCode::CdtRead {
        return Ok(cdt_value::to_particle(&cdt::read(&call, bin.as_ref())?));
    }
    let mut bin = bin;
    let result = cdt::modify(&call, &mut bin)?;
    if let Some(value) = bin {
        let (particle_type, bytes) = collection_particle(&value, size_before);
        let owned = WorkingValue::Owned {
            buffer: bytes,
            start: 0,
        };
        working.set(op.bin_name, particle_type, owned);
    }
    Ok(cdt_value::to_particle(&result))
}

/// Runs a modifying list or map op on the packed bin, where [`cdt::modify_packed`] takes it;
/// `None`: run it on the decoded bin.
fn modify_collection_packed<'w, 'a: 'w>(
    working: &mut WorkingRecord<'w>,
    op: &Op<'a>,
    call: &cdt::Call,
) -> Option<Result<(u8, Vec<u8>), ResultCode>> {
    let stored = working.get(op.bin_name)?;
    let written = match cdt::modify_packed(call, stored.particle_type, stored.value)? {
        Ok(written) => written,
        Err(code) => return Some(Err(code)),
    };
    if let Some(buffer) = written.bytes {
        let owned = WorkingValue::Owned { buffer, start: 0 };
        working.set(op.bin_name, ParticleType::Map as u8, owned);
    }
    Some(Ok(cdt_value::to_particle(&Value::Int(written.size))))
}

/// A read-only list or map op on a stored bin (`None`: missing); returns the result as a
/// particle.
fn read_collection(op: &Op<'_>, bin: Option<(u8, &[u8])>) -> Result<(u8, Vec<u8>), ResultCode> {
    let call = cdt::Call::parse(op.value)?;
    let value: Option<Value> = match bin {
        Some((particle_type, bytes)) => Some(cdt_value::from_particle(particle_type, bytes)?),
        None => None,
    };
    Ok(cdt_value::to_particle(&cdt::read(&call, value.as_ref())?))
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
        OpCode::Write if op.particle_type == ParticleType::GeoJson as u8 => {
            // Stored as the server stores it: flags, the S2 cells, then the JSON text.
            let (_, stored) = crate::geo::particle_from_wire(op.value)
                .map_err(|_| ResultCode::GeoInvalidGeojson)?;
            let value = WorkingValue::Owned {
                buffer: stored,
                start: 0,
            };
            working.set(op.bin_name, op.particle_type, value);
        }
        OpCode::Write => {
            let value = WorkingValue::Borrowed(op.value);
            working.set(op.bin_name, op.particle_type, value);
        }
        // Aerospike's `as_bin_particle_alloc_modify_from_client`: "all operations become
        // creates if there's no existing particle", of whatever type the op carries (an
        // increment by a string creates a string bin).
        OpCode::Incr | OpCode::Append | OpCode::Prepend
            if working.get(op.bin_name).is_none()
                && op.particle_type != ParticleType::Null as u8 =>
        {
            let create = Op {
                code: OpCode::Write,
                ..*op
            };
            apply_modify(working, &create)?;
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
        Some(ParticleType::Float) => op.value.try_into().map_err(|_| ResultCode::Parameter)?,
        // Only numbers add up (a missing bin was created above, whatever the type).
        _ => return Err(ResultCode::IncompatibleType),
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

/// A GeoJSON value a write stores: the server's `geojson_from_wire` refuses one it cannot
/// parse with AS_ERR_GEO_INVALID_GEOJSON. (An increment or append of a GeoJSON value is
/// INCOMPATIBLE_TYPE, as for any other type those ops do not take.)
fn check_geojson(op: &Op<'_>) -> Result<(), ResultCode> {
    let is_geojson = op.particle_type == ParticleType::GeoJson as u8;
    if op.code == OpCode::Write && is_geojson && crate::geo::particle_from_wire(op.value).is_err() {
        return Err(ResultCode::GeoInvalidGeojson);
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

    /// The Go client's "Add must work": `AddBins` of a string to a missing bin writes it.
    #[test]
    fn incr_append_and_prepend_of_a_missing_bin_create_it_whatever_its_type() {
        let one = 1i64.to_be_bytes();
        let mut working = WorkingRecord::default();
        apply_modify(
            &mut working,
            &op(OpCode::Incr, ParticleType::String, b"s", b"test"),
        )
        .unwrap();
        apply_modify(
            &mut working,
            &op(OpCode::Append, ParticleType::Integer, b"n", &one),
        )
        .unwrap();
        apply_modify(
            &mut working,
            &op(OpCode::Prepend, ParticleType::Blob, b"b", b"\x01"),
        )
        .unwrap();
        let mut bin = |name: &[u8]| {
            let found = working.get(name).unwrap();
            (found.particle_type, found.value.to_vec())
        };
        assert_eq!(bin(b"s"), (ParticleType::String as u8, b"test".to_vec()));
        assert_eq!(bin(b"n"), (ParticleType::Integer as u8, one.to_vec()));
        assert_eq!(bin(b"b"), (ParticleType::Blob as u8, vec![1]));
        // Once the bin exists, only numbers add up.
        assert_eq!(
            apply_modify(
                &mut working,
                &op(OpCode::Incr, ParticleType::String, b"s", b"x")
            ),
            Err(ResultCode::IncompatibleType)
        );
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

    /// Every op code Osprey knows now runs: none is refused as UNSUPPORTED_FEATURE, whatever
    /// its payload (a bad one is PARAMETER).
    #[test]
    fn no_op_code_is_refused_as_unsupported() {
        for byte in 0..=u8::MAX {
            let Some(code) = OpCode::from_u8(byte) else {
                continue;
            };
            let ops = [op(code, ParticleType::Integer, b"a", &[0; 8])];
            let refused = summarize(ops.into_iter()).err() == Some(ResultCode::UnsupportedFeature);
            assert!(!refused, "{code:?}");
        }
    }

    #[test]
    fn summarize_rejects_bad_names_and_values() {
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
        // A list append ([1, 5]) sent as a read, and a payload that is no op at all.
        let append_as_read = [op(
            OpCode::CdtRead,
            ParticleType::Blob,
            b"a",
            b"\x92\x01\x05",
        )];
        assert_eq!(
            summarize(append_as_read.into_iter()).unwrap_err(),
            ResultCode::Parameter
        );
        let not_an_op = [op(OpCode::CdtModify, ParticleType::Blob, b"a", b"\x91\xc0")];
        assert_eq!(
            summarize(not_an_op.into_iter()).unwrap_err(),
            ResultCode::Parameter
        );
        // An expression op with an unknown flag.
        let expression = [op(
            OpCode::ExpRead,
            ParticleType::Blob,
            b"a",
            b"\x92\x01\xcc\x80",
        )];
        assert_eq!(
            summarize(expression.into_iter()).unwrap_err(),
            ResultCode::Parameter
        );
        // A bit GET (50) sent as a modify.
        let get_as_modify = [op(
            OpCode::BitModify,
            ParticleType::Blob,
            b"a",
            b"\x93\x32\x00\x08",
        )];
        assert_eq!(
            summarize(get_as_modify.into_iter()).unwrap_err(),
            ResultCode::Parameter
        );
        let bad_bool = [op(OpCode::Write, ParticleType::Bool, b"a", &[2])];
        assert_eq!(
            summarize(bad_bool.into_iter()).unwrap_err(),
            ResultCode::Parameter
        );
    }
}
