//! Bitwise ops on blob bins (`BITS_READ` / `BITS_MODIFY`), as the Aerospike server runs them
//! (`as/src/base/particle_blob.c`).
//!
//! An op's payload is the msgpack array `[code, args...]`; the server's op table fixes, per
//! code, how many args it takes and how each is read ([`Def`]). Bits are numbered from the most
//! significant bit of byte 0; a negative offset counts back from the blob's end.
//!
//! Invariants:
//! - Nothing is allocated on a size the client merely declares: every offset and size is
//!   checked against Aerospike's cap ([`PROTO_SIZE_MAX`], 128 MiB, the server's limit for a
//!   blob op) while parsing, and a result blob's size is checked against it before the blob is
//!   built, so a RESIZE to 2^40 bytes is PARAMETER, as in Aerospike. (The record size limit is
//!   enforced later, by the caller, on the record the op leaves.)
//! - All arithmetic on client integers is checked or done on values already bounded by the
//!   cap; bit and byte accesses go through `get`/`get_mut`, so no input can panic.
//! - Errors are the server's: a malformed payload is PARAMETER (4); a blob-shaped op on a bin
//!   of another type INCOMPATIBLE_TYPE (12); a modify of a missing bin other than RESIZE and
//!   INSERT BIN_NOT_FOUND (17); CREATE_ONLY on an existing bin BIN_EXISTS (6); a region past
//!   the blob's end OP_NOT_APPLICABLE (26) (PARAMETER for RESIZE and REMOVE); an integer
//!   overflow with the FAIL action OP_NOT_APPLICABLE. NO_FAIL turns the failures after parsing
//!   into a silent no-op.
//! - A failing op never changes the bin except where [`modify`] says its bin is unspecified
//!   (an error result, which the caller drops); a NO_FAIL no-op leaves it exactly as it was.
//! - Modify ops return nothing ([`Value::Nil`]); a read of a missing bin returns nothing.

use model::{ParticleType, ResultCode};

use crate::cdt::value::{self, Value};

/// Aerospike's cap on a blob op's offsets, sizes and result (`PROTO_SIZE_MAX`, in bytes).
const PROTO_SIZE_MAX: u64 = 128 * 1024 * 1024;
/// ... in bits.
const PROTO_BITS_MAX: u64 = PROTO_SIZE_MAX * 8;

/// The blob particle type.
const BLOB: u8 = ParticleType::Blob as u8;

/// Modify op codes.
const RESIZE: u8 = 0;
const INSERT: u8 = 1;
const REMOVE: u8 = 2;
const SET: u8 = 3;
const OR: u8 = 4;
const XOR: u8 = 5;
const AND: u8 = 6;
const NOT: u8 = 7;
const LSHIFT: u8 = 8;
const RSHIFT: u8 = 9;
const ADD: u8 = 10;
const SUBTRACT: u8 = 11;
const SET_INT: u8 = 12;
/// Read op codes.
const GET: u8 = 50;
const COUNT: u8 = 51;
const LSCAN: u8 = 52;
const RSCAN: u8 = 53;
const GET_INT: u8 = 54;

/// The first element of a payload that addresses a blob nested in a list or map (the
/// client's `[0xff, [ctx...], [code, args...]]` form).
const CTX_MARKER: i64 = 0xff;

/// Policy flags.
const FLAG_CREATE_ONLY: u64 = 1;
const FLAG_UPDATE_ONLY: u64 = 2;
const FLAG_NO_FAIL: u64 = 4;
const FLAG_PARTIAL: u64 = 8;

/// RESIZE flags.
const RESIZE_FROM_FRONT: u64 = 1;
const RESIZE_GROW_ONLY: u64 = 2;
const RESIZE_SHRINK_ONLY: u64 = 4;

/// Integer op flags (the overflow action, with the signed bit).
const INT_SIGNED: u64 = 1;
const INT_SATURATE: u64 = 2;
const INT_WRAP: u64 = 4;

/// How one argument is read (the server's `bits_parse_*`).
#[derive(Clone, Copy, Debug)]
enum Arg {
    /// A byte offset, |offset| <= cap; kept in bits.
    ByteOffset,
    /// A bit offset, |offset| <= cap in bits.
    Offset,
    /// A byte size, 1 to cap; kept in bits.
    ByteSize,
    /// A byte size, 0 to cap; kept in bits.
    ByteSizeAllowZero,
    /// A bit size for an integer op, 1 to 64.
    IntegerSize,
    /// A bit size, 1 to cap in bits.
    Size,
    /// A msgpack boolean.
    Bool,
    /// A shift, 0 to cap in bits.
    NBits,
    /// Any integer, kept as its 64 bits.
    Integer,
    /// A blob (str or bin with its kind byte) of at least `size` bits; sets `size` when 0.
    Buf,
    /// Policy flags, of those the op allows, not both CREATE_ONLY and UPDATE_ONLY.
    Flags,
    /// RESIZE flags, not both GROW_ONLY and SHRINK_ONLY.
    ResizeFlags,
    /// Overflow action and signed bit, not both SATURATE and WRAP.
    ArithmeticFlags,
    /// GET_INT's signed bit.
    GetIntFlags,
}

/// One row of the server's op table.
struct Def {
    /// The policy flags the op accepts.
    flags: u64,
    min_args: usize,
    max_args: usize,
    args: &'static [Arg],
}

/// The op table row for `code`, `None` for an unknown code.
fn def(code: u8) -> Option<Def> {
    use Arg::*;
    let common = FLAG_UPDATE_ONLY | FLAG_NO_FAIL;
    let create = FLAG_CREATE_ONLY | common;
    let row = |flags, min_args, max_args, args| Def {
        flags,
        min_args,
        max_args,
        args,
    };
    Some(match code {
        RESIZE => row(create, 1, 3, &[ByteSizeAllowZero, Flags, ResizeFlags]),
        INSERT => row(create, 2, 3, &[ByteOffset, Buf, Flags]),
        REMOVE => row(common | FLAG_PARTIAL, 2, 3, &[ByteOffset, ByteSize, Flags]),
        SET | OR | XOR | AND => row(common | FLAG_PARTIAL, 3, 4, &[Offset, Size, Buf, Flags]),
        NOT => row(common | FLAG_PARTIAL, 2, 3, &[Offset, Size, Flags]),
        LSHIFT | RSHIFT => row(common | FLAG_PARTIAL, 3, 4, &[Offset, Size, NBits, Flags]),
        ADD | SUBTRACT => row(
            common,
            3,
            5,
            &[Offset, IntegerSize, Integer, Flags, ArithmeticFlags],
        ),
        SET_INT => row(common, 3, 4, &[Offset, IntegerSize, Integer, Flags]),
        GET | COUNT => row(0, 2, 2, &[Offset, Size]),
        LSCAN | RSCAN => row(0, 3, 3, &[Offset, Size, Bool]),
        GET_INT => row(0, 2, 3, &[Offset, IntegerSize, GetIntFlags]),
        _ => return None,
    })
}

/// Whether op `code` modifies its bin (`Some(true)`) or only reads it (`Some(false)`);
/// `None` for an unknown code.
pub(crate) fn is_modify(code: u8) -> Option<bool> {
    match code {
        RESIZE..=SET_INT => Some(true),
        GET..=GET_INT => Some(false),
        _ => None,
    }
}

/// A parsed op: its code and arguments, in the server's units (bits for offsets and sizes).
#[derive(Debug, Default)]
struct Op {
    code: u8,
    /// Bits from the blob's start; negative: from its end.
    offset: i64,
    /// Bits (bytes times 8 for the byte ops); 0 until set.
    size: u64,
    /// The integer, shift or boolean argument.
    value: u64,
    buf: Vec<u8>,
    flags: u64,
    subflags: u64,
}

impl Op {
    fn flag(&self, flag: u64) -> bool {
        self.flags & flag != 0
    }

    fn subflag(&self, flag: u64) -> bool {
        self.subflags & flag != 0
    }

    /// `Ok(Nil)` (a silent no-op) under NO_FAIL, else `code`.
    fn fail(&self, code: ResultCode) -> Result<Value, ResultCode> {
        match self.flag(FLAG_NO_FAIL) {
            true => Ok(Value::Nil),
            false => Err(code),
        }
    }
}

/// Parses a payload into an op whose code `is_modify` says is a modify (or a read).
fn parse(payload: &[u8], modify: bool) -> Result<Op, ResultCode> {
    let Value::List(list) = value::decode(payload)? else {
        return Err(ResultCode::Parameter);
    };
    let (first, args) = list.items.split_first().ok_or(ResultCode::Parameter)?;
    if list.ordered {
        return Err(ResultCode::Parameter);
    }
    let code = first.as_int().ok_or(ResultCode::Parameter)?;
    if code == CTX_MARKER && args.len() == 2 {
        // Bit ops on a blob inside a list or map: not implemented.
        return Err(ResultCode::UnsupportedFeature);
    }
    let code = u8::try_from(code).map_err(|_| ResultCode::Parameter)?;
    if is_modify(code) != Some(modify) {
        return Err(ResultCode::Parameter);
    }
    let def = def(code).ok_or(ResultCode::Parameter)?;
    if args.len() < def.min_args || args.len() > def.max_args {
        return Err(ResultCode::Parameter);
    }
    let mut op = Op {
        code,
        ..Op::default()
    };
    for (kind, arg) in def.args.iter().zip(args) {
        parse_arg(&mut op, &def, *kind, arg)?;
    }
    Ok(op)
}

/// An integer argument's 64 bits (Aerospike reads negative numbers as their u64 bits).
fn uint(arg: &Value) -> Result<u64, ResultCode> {
    arg.as_int()
        .map(|value| value as u64)
        .ok_or(ResultCode::Parameter)
}

/// Reads one argument into `op`, refusing what the server refuses.
fn parse_arg(op: &mut Op, def: &Def, kind: Arg, arg: &Value) -> Result<(), ResultCode> {
    let bad = Err(ResultCode::Parameter);
    match kind {
        Arg::ByteOffset | Arg::Offset => {
            let offset = arg.as_int().ok_or(ResultCode::Parameter)?;
            let (max, scale) = match kind {
                Arg::ByteOffset => (PROTO_SIZE_MAX, 8),
                _ => (PROTO_BITS_MAX, 1),
            };
            if offset.unsigned_abs() > max {
                return bad;
            }
            op.offset = offset * scale;
        }
        Arg::ByteSize | Arg::ByteSizeAllowZero => {
            let size = uint(arg)?;
            if (size == 0 && matches!(kind, Arg::ByteSize)) || size > PROTO_SIZE_MAX {
                return bad;
            }
            op.size = size * 8;
        }
        Arg::IntegerSize | Arg::Size => {
            let size = uint(arg)?;
            let max = match kind {
                Arg::IntegerSize => 64,
                _ => PROTO_BITS_MAX,
            };
            if size == 0 || size > max {
                return bad;
            }
            op.size = size;
        }
        Arg::Bool => match arg {
            Value::Bool(value) => op.value = u64::from(*value),
            _ => return bad,
        },
        Arg::NBits | Arg::Integer => {
            op.value = uint(arg)?;
            if matches!(kind, Arg::NBits) && op.value > PROTO_BITS_MAX {
                return bad;
            }
        }
        Arg::Buf => parse_buf(op, arg)?,
        Arg::Flags => {
            op.flags = uint(arg)?;
            let both = FLAG_CREATE_ONLY | FLAG_UPDATE_ONLY;
            if op.flags & !def.flags != 0 || op.flags & both == both {
                return bad;
            }
        }
        Arg::ResizeFlags | Arg::ArithmeticFlags | Arg::GetIntFlags => {
            op.subflags = uint(arg)?;
            let (allowed, exclusive) = match kind {
                Arg::ResizeFlags => (
                    RESIZE_FROM_FRONT | RESIZE_GROW_ONLY | RESIZE_SHRINK_ONLY,
                    RESIZE_GROW_ONLY | RESIZE_SHRINK_ONLY,
                ),
                Arg::ArithmeticFlags => (
                    INT_SIGNED | INT_SATURATE | INT_WRAP,
                    INT_SATURATE | INT_WRAP,
                ),
                _ => (INT_SIGNED, 0),
            };
            if op.subflags & !allowed != 0
                || (exclusive != 0 && op.subflags & exclusive == exclusive)
            {
                return bad;
            }
        }
    }
    Ok(())
}

/// Reads a blob argument: not empty, and at least `op.size` bits when a size came first.
fn parse_buf(op: &mut Op, arg: &Value) -> Result<(), ResultCode> {
    let Value::Bytes { data, .. } = arg else {
        return Err(ResultCode::Parameter);
    };
    if data.is_empty() {
        return Err(ResultCode::Parameter);
    }
    let bits = (data.len() as u64)
        .checked_mul(8)
        .ok_or(ResultCode::Parameter)?;
    if op.size == 0 {
        op.size = bits;
    } else if bits < op.size {
        return Err(ResultCode::Parameter);
    }
    op.buf.clone_from(data);
    Ok(())
}

/// Runs a reading op (`payload`: the op's msgpack `[code, args...]`) on a bin (`None`:
/// missing; else its particle type and bytes). Returns the op's result.
///
/// As in Aerospike, a read of a missing bin returns nothing without looking at the op.
///
/// # Errors
/// The op's result code.
pub(crate) fn read(payload: &[u8], bin: Option<(u8, &[u8])>) -> Result<Value, ResultCode> {
    let Some((particle_type, blob)) = bin else {
        return Ok(Value::Nil);
    };
    let op = parse(payload, false)?;
    if particle_type != BLOB {
        return Err(ResultCode::IncompatibleType);
    }
    let Some((offset, size)) = region(&op, blob.len(), true, false)? else {
        return Ok(Value::Nil);
    };
    Ok(match op.code {
        GET => Value::Bytes {
            kind: value::KIND_BLOB,
            data: get_bits(blob, offset, size),
        },
        COUNT => Value::Int(count(blob, offset, size)),
        LSCAN => Value::Int(lscan(blob, offset, size, op.value == 1)),
        RSCAN => Value::Int(rscan(blob, offset, size, op.value == 1)),
        _ => Value::Int(get_int(&op, blob, offset, size)),
    })
}

/// Runs a modifying op on a bin (`None`: missing), leaving in `bin` its new particle type
/// and bytes. Returns the op's result (always nothing: bit modify ops return no value).
///
/// # Errors
/// The op's result code; `bin` is then unspecified (the caller drops it).
pub(crate) fn modify(payload: &[u8], bin: &mut Option<(u8, Vec<u8>)>) -> Result<Value, ResultCode> {
    let op = parse(payload, true)?;
    match bin {
        Some((particle_type, _)) => {
            if op.flag(FLAG_CREATE_ONLY) {
                return op.fail(ResultCode::BinExists);
            }
            if *particle_type != BLOB {
                return Err(ResultCode::IncompatibleType);
            }
        }
        None => {
            if !matches!(op.code, RESIZE | INSERT) || op.flag(FLAG_UPDATE_ONLY) {
                return op.fail(ResultCode::BinNotFound);
            }
        }
    }
    match op.code {
        RESIZE => resize(&op, bin),
        INSERT => insert(&op, bin),
        REMOVE => remove(&op, bin),
        _ => match bin {
            Some((_, blob)) => overwrite(&op, blob),
            None => Err(ResultCode::BinNotFound),
        },
    }
}

/// The op's offset from the blob's start, in bits: a negative one counts back from the end
/// of a blob of `len` bytes (`exists`: the bin exists).
fn resolve_offset(offset: i64, len: usize, exists: bool) -> Result<usize, ResultCode> {
    let bits = (len as u64).checked_mul(8).ok_or(ResultCode::Parameter)?;
    let from_start = if offset >= 0 {
        offset.unsigned_abs()
    } else {
        if !exists {
            return Err(ResultCode::Parameter);
        }
        bits.checked_sub(offset.unsigned_abs())
            .ok_or(ResultCode::Parameter)?
    };
    usize::try_from(from_start).map_err(|_| ResultCode::Parameter)
}

/// The bits (offset from the start, size) an op on an existing blob of `len` bytes covers,
/// `None` for a NO_FAIL no-op. A region starting past the end, or running past it without
/// PARTIAL (`partial`: the op honors it), is OP_NOT_APPLICABLE; PARTIAL cuts it at the end.
fn region(
    op: &Op,
    len: usize,
    exists: bool,
    partial: bool,
) -> Result<Option<(usize, usize)>, ResultCode> {
    let offset = resolve_offset(op.offset, len, exists)?;
    let size = usize::try_from(op.size).map_err(|_| ResultCode::Parameter)?;
    let bits = len.checked_mul(8).ok_or(ResultCode::Parameter)?;
    let end = offset.checked_add(size).ok_or(ResultCode::Parameter)?;
    if offset / 8 >= len || (end > bits && !(partial && op.flag(FLAG_PARTIAL))) {
        return op.fail(ResultCode::OpNotApplicable).map(|_| None);
    }
    Ok(Some((offset, size.min(bits - offset))))
}

/// The blob size an op would leave, checked against Aerospike's cap before anything of that
/// size is allocated.
fn checked_new_len(len: u64) -> Result<usize, ResultCode> {
    if len >= PROTO_SIZE_MAX {
        return Err(ResultCode::Parameter);
    }
    usize::try_from(len).map_err(|_| ResultCode::Parameter)
}

/// RESIZE: grows with zero bytes or shrinks, at the end or (FROM_FRONT) at the front.
fn resize(op: &Op, bin: &mut Option<(u8, Vec<u8>)>) -> Result<Value, ResultCode> {
    let old_len = bin.as_ref().map_or(0, |(_, blob)| blob.len());
    let new_len = op.size / 8;
    let from_front = op.subflag(RESIZE_FROM_FRONT);
    if new_len == old_len as u64 {
        return Ok(Value::Nil);
    }
    if new_len < old_len as u64 && op.subflag(RESIZE_GROW_ONLY)
        || new_len > old_len as u64 && op.subflag(RESIZE_SHRINK_ONLY)
    {
        return op.fail(ResultCode::Parameter);
    }
    let new_len = checked_new_len(new_len)?;
    let mut blob = bin.take().map(|(_, blob)| blob).unwrap_or_default();
    match (new_len < old_len, from_front) {
        (true, true) => {
            blob.drain(..old_len - new_len);
        }
        (true, false) => blob.truncate(new_len),
        (false, true) => {
            let mut grown = vec![0; new_len - old_len];
            grown.append(&mut blob);
            blob = grown;
        }
        (false, false) => blob.resize(new_len, 0),
    }
    *bin = Some((BLOB, blob));
    Ok(Value::Nil)
}

/// INSERT: puts the bytes at a byte offset, zero-filling any gap past the end.
fn insert(op: &Op, bin: &mut Option<(u8, Vec<u8>)>) -> Result<Value, ResultCode> {
    let old_len = bin.as_ref().map_or(0, |(_, blob)| blob.len());
    let at = resolve_offset(op.offset, old_len, bin.is_some())? / 8;
    let new_len = (at.max(old_len) as u64)
        .checked_add(op.buf.len() as u64)
        .ok_or(ResultCode::Parameter)?;
    let new_len = checked_new_len(new_len)?;
    let mut blob = bin.take().map(|(_, blob)| blob).unwrap_or_default();
    blob.reserve(new_len.saturating_sub(blob.len()));
    if at >= old_len {
        blob.resize(at, 0);
        blob.extend_from_slice(&op.buf);
    } else {
        blob.splice(at..at, op.buf.iter().copied());
    }
    *bin = Some((BLOB, blob));
    Ok(Value::Nil)
}

/// REMOVE: takes bytes out at a byte offset (PARTIAL: up to the end at most).
fn remove(op: &Op, bin: &mut Option<(u8, Vec<u8>)>) -> Result<Value, ResultCode> {
    let Some((_, blob)) = bin else {
        return op.fail(ResultCode::BinNotFound);
    };
    let at = resolve_offset(op.offset, blob.len(), true)? / 8;
    let count = usize::try_from(op.size / 8).map_err(|_| ResultCode::Parameter)?;
    if at >= blob.len() {
        return op.fail(ResultCode::Parameter);
    }
    let end = match at.checked_add(count) {
        Some(end) if end <= blob.len() => end,
        _ if op.flag(FLAG_PARTIAL) => blob.len(),
        _ => return op.fail(ResultCode::Parameter),
    };
    blob.drain(at..end);
    Ok(Value::Nil)
}

/// The ops that rewrite a region of the blob in place (SET to SET_INT).
fn overwrite(op: &Op, blob: &mut [u8]) -> Result<Value, ResultCode> {
    let integer = matches!(op.code, ADD | SUBTRACT | SET_INT);
    let Some((offset, size)) = region(op, blob.len(), true, !integer)? else {
        return Ok(Value::Nil);
    };
    match op.code {
        SET => put_bits(blob, offset, size, &op.buf),
        OR | XOR | AND => combine(op, blob, offset, size),
        NOT => {
            let inverted: Vec<u8> = get_bits(blob, offset, size)
                .iter()
                .map(|byte| !byte)
                .collect();
            put_bits(blob, offset, size, &inverted);
        }
        LSHIFT => lshift(blob, offset, size, op.value),
        RSHIFT => rshift(blob, offset, size, op.value),
        _ => return arithmetic(op, blob, offset, size),
    }
    Ok(Value::Nil)
}

/// OR, XOR or AND of the region with the op's bytes.
fn combine(op: &Op, blob: &mut [u8], offset: usize, size: usize) {
    let mut region = get_bits(blob, offset, size);
    for (byte, arg) in region.iter_mut().zip(&op.buf) {
        match op.code {
            OR => *byte |= arg,
            XOR => *byte ^= arg,
            _ => *byte &= arg,
        }
    }
    put_bits(blob, offset, size, &region);
}

/// Shifts the region left by `shift` bits, filling with zeros.
fn lshift(blob: &mut [u8], offset: usize, size: usize, shift: u64) {
    let shift = usize::try_from(shift).unwrap_or(usize::MAX).min(size);
    let kept = get_bits(blob, offset + shift, size - shift);
    put_bits(blob, offset, size - shift, &kept);
    put_bits(
        blob,
        offset + size - shift,
        shift,
        &vec![0; shift.div_ceil(8)],
    );
}

/// Shifts the region right by `shift` bits, filling with zeros.
fn rshift(blob: &mut [u8], offset: usize, size: usize, shift: u64) {
    let shift = usize::try_from(shift).unwrap_or(usize::MAX).min(size);
    let kept = get_bits(blob, offset, size - shift);
    put_bits(blob, offset + shift, size - shift, &kept);
    put_bits(blob, offset, shift, &vec![0; shift.div_ceil(8)]);
}

/// ADD, SUBTRACT or SET_INT on the region read as a big-endian integer of `size` (<= 64)
/// bits; an overflow under the FAIL action is OP_NOT_APPLICABLE.
fn arithmetic(op: &Op, blob: &mut [u8], offset: usize, size: usize) -> Result<Value, ResultCode> {
    let mask = u64::MAX >> (64 - size);
    let value = op.value & mask;
    let result = match op.code {
        SET_INT => Some(value),
        code => add(
            op,
            load_int(blob, offset, size),
            value,
            size,
            code == SUBTRACT,
        ),
    };
    let Some(result) = result else {
        return op.fail(ResultCode::OpNotApplicable);
    };
    let stored = (result << (64 - size)).to_be_bytes();
    put_bits(blob, offset, size, &stored);
    Ok(Value::Nil)
}

/// `load` plus (or minus) `value`, both of `n_bits` bits, under the op's overflow action;
/// `None` on an overflow that the FAIL action refuses.
fn add(op: &Op, load: u64, value: u64, n_bits: usize, subtract: bool) -> Option<u64> {
    let mask = u64::MAX >> (64 - n_bits);
    let result = match subtract {
        true => load.wrapping_sub(value),
        false => load.wrapping_add(value),
    } & mask;
    if op.subflag(INT_WRAP) {
        return Some(result);
    }
    let saturate = op.subflag(INT_SATURATE);
    if op.subflag(INT_SIGNED) {
        // As the server does, a subtraction is checked as the addition of -value.
        let addend = match subtract {
            true => value.wrapping_neg(),
            false => value,
        };
        return signed_overflow(n_bits, saturate, load, addend, result);
    }
    let overflowed = match subtract {
        true => result > load,
        false => result < load,
    };
    match (overflowed, saturate, subtract) {
        (false, _, _) => Some(result),
        (true, false, _) => None,
        (true, true, false) => Some(mask),
        (true, true, true) => Some(0),
    }
}

/// The server's `handle_signed_overflow`: two negatives giving a positive, or two positives
/// giving a negative, overflowed; saturate to the extreme or fail (`None`).
fn signed_overflow(
    n_bits: usize,
    saturate: bool,
    load: u64,
    value: u64,
    result: u64,
) -> Option<u64> {
    let leading = 64 - n_bits;
    let extend = |bits: u64| ((bits << leading) as i64) >> leading;
    let (s_load, s_value, s_result) = (extend(load), extend(value), extend(result));
    let mask = u64::MAX >> leading;
    if s_load < 0 && s_value < 0 && s_result > 0 {
        return saturate.then_some(1 << (n_bits - 1));
    }
    if s_load > 0 && s_value > 0 && s_result < 0 {
        return saturate.then_some(mask >> 1);
    }
    Some(result)
}

/// GET_INT: the region as an unsigned, or (signed flag) sign-extended, integer.
fn get_int(op: &Op, blob: &[u8], offset: usize, size: usize) -> i64 {
    let load = load_int(blob, offset, size);
    let leading = 64 - size;
    match op.subflag(INT_SIGNED) {
        true => ((load << leading) as i64) >> leading,
        false => load as i64,
    }
}

/// The `size` (1 to 64) bits at `offset` as a big-endian unsigned integer.
fn load_int(blob: &[u8], offset: usize, size: usize) -> u64 {
    let mut bytes = [0; 8];
    for (to, from) in bytes.iter_mut().zip(get_bits(blob, offset, size)) {
        *to = from;
    }
    u64::from_be_bytes(bytes) >> (64 - size)
}

/// COUNT: the set bits in the region.
fn count(blob: &[u8], offset: usize, size: usize) -> i64 {
    get_bits(blob, offset, size)
        .iter()
        .map(|byte| i64::from(byte.count_ones()))
        .sum()
}

/// LSCAN: the index (from `offset`) of the first bit equal to `value`, or -1.
fn lscan(blob: &[u8], offset: usize, size: usize, value: bool) -> i64 {
    let region = get_bits(blob, offset, size);
    for (index, byte) in region.iter().enumerate() {
        let hits = if value { *byte } else { !byte };
        if hits != 0 {
            let bit = index * 8 + hits.leading_zeros() as usize;
            return if bit < size { bit as i64 } else { -1 };
        }
    }
    -1
}

/// RSCAN: the index (from `offset`) of the last bit equal to `value`, or -1.
fn rscan(blob: &[u8], offset: usize, size: usize, value: bool) -> i64 {
    let region = get_bits(blob, offset, size);
    for (index, byte) in region.iter().enumerate().rev() {
        let valid = tail_mask(size, index, region.len());
        let hits = (if value { *byte } else { !byte }) & valid;
        if hits != 0 {
            return (index * 8 + 7 - hits.trailing_zeros() as usize) as i64;
        }
    }
    -1
}

/// The mask of the bits of byte `index` of a `len`-byte, `size`-bit left-aligned buffer that
/// hold data (all but the padding of the last byte).
fn tail_mask(size: usize, index: usize, len: usize) -> u8 {
    match (index + 1 == len, size % 8) {
        (true, tail) if tail != 0 => 0xff << (8 - tail),
        _ => 0xff,
    }
}

/// The `size` bits at bit `offset` of `blob`, left-aligned in `ceil(size / 8)` bytes with
/// zero padding. Bits past the blob's end read as zero.
fn get_bits(blob: &[u8], offset: usize, size: usize) -> Vec<u8> {
    let len = size.div_ceil(8);
    let (base, shift) = (offset / 8, offset % 8);
    let mut out: Vec<u8> = (0..len)
        .map(|i| {
            let high = blob.get(base + i).copied().unwrap_or(0);
            match shift {
                0 => high,
                _ => {
                    let low = blob.get(base + i + 1).copied().unwrap_or(0);
                    (high << shift) | (low >> (8 - shift))
                }
            }
        })
        .collect();
    if let Some(last) = out.last_mut() {
        *last &= tail_mask(size, len - 1, len);
    }
    out
}

/// Overwrites the `size` bits at bit `offset` of `blob` with the first `size` bits of `src`
/// (left-aligned), leaving every other bit as it was. Bits past the blob's end are dropped.
fn put_bits(blob: &mut [u8], offset: usize, size: usize, src: &[u8]) {
    let len = size.div_ceil(8);
    let (base, shift) = (offset / 8, offset % 8);
    for (i, byte) in src.iter().take(len).enumerate() {
        let mask = tail_mask(size, i, len);
        let bits = byte & mask;
        if let Some(to) = blob.get_mut(base + i) {
            *to = (*to & !(mask >> shift)) | (bits >> shift);
        }
        if shift != 0
            && let Some(to) = blob.get_mut(base + i + 1)
        {
            *to = (*to & !(mask << (8 - shift))) | (bits << (8 - shift));
        }
    }
}

#[cfg(test)]
mod tests;
