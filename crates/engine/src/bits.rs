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
mod tests {
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
            0x01, 0x12, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0A, 0x0B, 0x0C, 0x0D,
            0x0E, 0x0F, 0x10, 0x11, 0x41,
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
            0x41, 0x13, 0x11, 0x22, 0x33, 0x11, 0x22, 0x33, 0x08, 0x08, 0x91, 0x1B, 0x01, 0x12,
            0x23, 0x11, 0x22, 0x11, 0xc1,
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
            0x40, 0x20, 0x01, 0xF0, 0x80, 0x7F, 0x7F, 0x7F, 0x02, 0x02, 0x01, 0x02, 0x02, 0x02,
            0x03, 0x03, 0x06, 0x07, 0x07, 0x07,
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
            0x30, 0x1E, 0x00, 0xD0, 0x7E, 0x7F, 0x7F, 0x7F, 0x00, 0xF0, 0xF1, 0x00, 0x00, 0x00,
            0x01, 0xFD, 0xFE, 0x00, 0xE0, 0xE1,
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
            0x08, 0x01, 0x00, 0x18, 0x01, 0x01, 0x01, 0x01, 0x00, 0x10, 0x11, 0x01, 0x01, 0x01,
            0x00, 0x04, 0x06, 0x02, 0x22, 0x23,
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
}
