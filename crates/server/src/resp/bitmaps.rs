//! Bitmap commands (SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP, BITFIELD, BITFIELD_RO) on string
//! values, as Redis's `bitops.c` defines them. A bitmap is a string: its bytes are stored in the
//! `value` bin like any string (STRING when valid UTF-8, else BLOB), and a string stored as an
//! INTEGER after INCR is read as its decimal text (see `docs/internals/redis-mapping.md`).
//!
//! Bit 0 is the most significant bit of the first byte, as in Redis.
//!
//! Invariants:
//! - A bit offset is below 2^32 (Redis's 512 MiB strings); a write that would grow a string
//!   past the namespace's `max-record-size` is refused before anything is allocated.
//! - A write that changes no byte and grows nothing stores nothing (the generation stays).
//! - BITOP reads and writes its keys in the namespace's exclusive section.

use std::sync::Arc;

use engine::{Current, CurrentMut, Decision, Expiry};
use model::{ParticleType, ResultCode};
use wire_resp::Args;

use super::commands::Command;
use super::keys::{self, Target, WRONGTYPE};
use super::reply::Reply;
use super::strings::{self, StringValue, VALUE_BIN};
use super::{After, Session};

mod bitfield;

/// The bitmap commands.
pub const COMMANDS: &[Command] = &[
    ("bitcount", -2, bitcount),
    ("bitfield", -2, |s, a, r| bitfield::bitfield(s, a, r, false)),
    ("bitfield_ro", -2, |s, a, r| {
        bitfield::bitfield(s, a, r, true)
    }),
    ("bitop", -4, bitop),
    ("bitpos", -3, bitpos),
    ("getbit", 3, getbit),
    ("setbit", 4, setbit),
];

/// Redis's reply to a bit offset that is not an integer, is negative or reaches 2^32.
pub const BIT_OFFSET_INVALID: &str = "ERR bit offset is not an integer or out of range";

/// Redis's reply to a SETBIT value other than 0 or 1.
const BIT_VALUE_INVALID: &str = "ERR bit is not an integer or out of range";

/// Redis's longest string (`proto-max-bulk-len`), in bytes: bit offsets stay below 8 times it.
const STRING_BYTES_MAX: u64 = 512 * 1024 * 1024;

/// Calls `look` with the bytes of the record's string value, in place, or `Err(())` when the
/// record holds another type (the same rule as `strings::string_of`, without a copy). An
/// INTEGER value is read as its decimal text.
pub fn with_string_bytes<T>(current: &Current<'_>, look: impl FnOnce(&[u8]) -> T) -> Result<T, ()> {
    if current.native().is_some() {
        return Err(());
    }
    let bins = current.bins();
    let mut iter = bins.iter();
    let bin = iter.next().filter(|bin| bin.name == VALUE_BIN).ok_or(())?;
    if iter.next().is_some() {
        return Err(());
    }
    match bin.particle_type {
        t if t == ParticleType::String as u8 || t == ParticleType::Blob as u8 => {
            Ok(look(bin.value))
        }
        t if t == ParticleType::Integer as u8 => {
            let bytes: [u8; 8] = bin.value.try_into().map_err(|_| ())?;
            Ok(look(i64::from_be_bytes(bytes).to_string().as_bytes()))
        }
        _ => Err(()),
    }
}

/// Changes the bytes of the string at `current` in place, keeping their length (see
/// `CurrentMut::packed_bin_mut`): `None`, with nothing changed, when the value is not a string
/// held as bytes (an integer, another type) or cannot change in place now; the caller then
/// takes the general path. The particle type follows the new bytes as
/// [`strings::write_string`] sets it. A caller that gets `Some` must decide
/// [`Decision::Touch`].
pub fn patch_string_bytes<T>(
    current: &mut CurrentMut<'_>,
    change: impl FnOnce(&mut [u8]) -> T,
) -> Option<T> {
    // One `value` bin of bytes (an integer is kept as its number: not patched).
    let is_bytes = |particle_type: u8| {
        particle_type == ParticleType::String as u8 || particle_type == ParticleType::Blob as u8
    };
    let bins = current.get().bins();
    let mut iter = bins.iter();
    let sole_bin = iter.next().filter(|_| iter.next().is_none());
    if !sole_bin.is_some_and(|bin| bin.name == VALUE_BIN && is_bytes(bin.particle_type)) {
        return None;
    }
    let bin = current.packed_bin_mut(VALUE_BIN)?;
    let changed = change(bin.value);
    *bin.particle_type = strings::particle_of(bin.value) as u8;
    Some(changed)
}

/// The bytes of the string a write starts from: `None` when there is no key, `Err` when the
/// key holds another type.
pub fn owned_string(current: Option<&Current<'_>>) -> Result<Option<Vec<u8>>, ResultCode> {
    match current.map(strings::string_of) {
        None => Ok(None),
        Some(Ok(value)) => Ok(Some(string_bytes(value))),
        Some(Err(())) => Err(ResultCode::IncompatibleType),
    }
}

/// A string value's bytes: an INTEGER as its decimal text.
fn string_bytes(value: StringValue) -> Vec<u8> {
    match value {
        StringValue::Bytes(bytes) => bytes,
        StringValue::Integer(value) => value.to_string().into_bytes(),
    }
}

/// The largest string, in bytes, a write may make in the RESP namespace.
pub fn record_bytes_max(session: &Session) -> u64 {
    u64::from(
        keys::namespace_of(&session.state)
            .config()
            .max_record_size_bytes,
    )
}

/// Parses a bit offset as Redis's `getBitOffsetFromArgument`: a non-negative integer whose
/// byte is below 512 MiB. With `hash_bits`, `#n` means `n * hash_bits` (BITFIELD).
pub fn parse_bit_offset(arg: &[u8], hash_bits: Option<u32>) -> Result<u64, ()> {
    let (digits, multiplier) = match (arg.first(), hash_bits) {
        (Some(b'#'), Some(bits)) => (&arg[1..], i64::from(bits)),
        _ => (arg, 1),
    };
    let offset = keys::parse_i64(digits)?.checked_mul(multiplier).ok_or(())?;
    let offset = u64::try_from(offset).map_err(|_| ())?;
    if offset >> 3 >= STRING_BYTES_MAX {
        return Err(());
    }
    Ok(offset)
}

/// Grows `bytes` with zero bytes so that bit `last_bit` exists; whether it grew.
///
/// # Errors
/// `RecordTooBig` when the string would pass `bytes_max`, before anything is allocated.
pub fn grow_to_bit(bytes: &mut Vec<u8>, last_bit: u64, bytes_max: u64) -> Result<bool, ResultCode> {
    let needed_bytes = last_bit / 8 + 1;
    if needed_bytes > bytes_max {
        return Err(ResultCode::RecordTooBig);
    }
    let needed_bytes = usize::try_from(needed_bytes).map_err(|_| ResultCode::RecordTooBig)?;
    if bytes.len() >= needed_bytes {
        return Ok(false);
    }
    bytes.resize(needed_bytes, 0);
    Ok(true)
}

/// The bit at `offset` (0 past the end).
pub fn bit_at(bytes: &[u8], offset: u64) -> bool {
    let Ok(byte_index) = usize::try_from(offset / 8) else {
        return false;
    };
    bytes
        .get(byte_index)
        .is_some_and(|byte| byte & (0x80 >> (offset % 8)) != 0)
}

/// Sets the bit at `offset`, which must exist.
fn set_bit_at(bytes: &mut [u8], offset: u64, on: bool) {
    let byte = &mut bytes[(offset / 8) as usize];
    let mask = 0x80 >> (offset % 8);
    if on {
        *byte |= mask;
    } else {
        *byte &= !mask;
    }
}

/// SETBIT key offset value: the bit's old value.
fn setbit(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let Ok(offset) = parse_bit_offset(args.get(2), None) else {
        reply.error(BIT_OFFSET_INVALID);
        return After::Continue;
    };
    let on = match keys::parse_i64(args.get(3)) {
        Ok(value @ (0 | 1)) => value == 1,
        _ => {
            reply.error(BIT_VALUE_INVALID);
            return After::Continue;
        }
    };
    let bytes_max = record_bytes_max(session);
    let target = Target::of(&session.state, session.database, args.get(1));
    let result = target.update(&mut session.writes, |mut current, writer| {
        // The bit within the string: it changes in place, or already has the value (then
        // nothing is written).
        let bit_within = |bytes: &[u8]| {
            let within = usize::try_from(offset / 8).is_ok_and(|byte| byte < bytes.len());
            within.then(|| bit_at(bytes, offset))
        };
        if let Some(current) = &mut current
            && let Ok(Some(was_on)) = with_string_bytes(&current.get(), bit_within)
        {
            if was_on == on {
                return Ok((Decision::Keep, on));
            }
            if patch_string_bytes(current, |bytes| set_bit_at(bytes, offset, on)).is_some() {
                return Ok((Decision::Touch(Expiry::Keep), was_on));
            }
        }
        let current = current.as_ref().map(|c| c.get());
        let old = owned_string(current.as_ref())?;
        let existed = old.is_some();
        let mut bytes = old.unwrap_or_default();
        let grew = grow_to_bit(&mut bytes, offset, bytes_max)?;
        let was_on = bit_at(&bytes, offset);
        if existed && !grew && was_on == on {
            return Ok((Decision::Keep, was_on));
        }
        set_bit_at(&mut bytes, offset, on);
        strings::write_string(writer, &bytes);
        Ok((Decision::Store(Expiry::Keep), was_on))
    });
    match result {
        Ok(was_on) => reply.integer(i64::from(was_on)),
        Err(code) => keys::engine_error(reply, code),
    }
    After::Continue
}

/// GETBIT key offset
fn getbit(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let Ok(offset) = parse_bit_offset(args.get(2), None) else {
        reply.error(BIT_OFFSET_INVALID);
        return After::Continue;
    };
    let target = Target::of(&session.state, session.database, args.get(1));
    let found = target.read(|current| {
        current.map_or(Ok(false), |c| {
            with_string_bytes(&c, |bytes| bit_at(bytes, offset))
        })
    });
    match found {
        Ok(Ok(on)) => reply.integer(i64::from(on)),
        Ok(Err(())) => reply.error(WRONGTYPE),
        Err(code) => keys::engine_error(reply, code),
    }
    After::Continue
}

/// An inclusive range of bits, first to last.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BitRange {
    first_bit: u64,
    last_bit: u64,
}

/// Whether BITCOUNT and BITPOS ranges count bytes or bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RangeUnit {
    Byte,
    Bit,
}

/// Parses BYTE or BIT (any case).
fn parse_unit(arg: &[u8]) -> Result<RangeUnit, ()> {
    if arg.eq_ignore_ascii_case(b"byte") {
        Ok(RangeUnit::Byte)
    } else if arg.eq_ignore_ascii_case(b"bit") {
        Ok(RangeUnit::Bit)
    } else {
        Err(())
    }
}

/// The bits a `start`..=`end` range in `unit`s covers in a string of `length_bytes`, negative
/// ends counting from the end, as BITCOUNT and BITPOS clamp them; `None` when empty.
fn resolve_range(length_bytes: usize, start: i64, end: i64, unit: RangeUnit) -> Option<BitRange> {
    let length_bytes = i64::try_from(length_bytes).ok()?;
    let total = match unit {
        RangeUnit::Byte => length_bytes,
        RangeUnit::Bit => length_bytes.checked_mul(8)?,
    };
    let start = if start < 0 {
        total.saturating_add(start)
    } else {
        start
    }
    .max(0);
    let end = if end < 0 {
        total.saturating_add(end)
    } else {
        end
    }
    .max(0)
    .min(total - 1);
    if start > end {
        return None;
    }
    let (start, end) = (u64::try_from(start).ok()?, u64::try_from(end).ok()?);
    Some(match unit {
        RangeUnit::Byte => BitRange {
            first_bit: start * 8,
            last_bit: end * 8 + 7,
        },
        RangeUnit::Bit => BitRange {
            first_bit: start,
            last_bit: end,
        },
    })
}

/// The mask of the bits of byte `byte_index` that `range` covers.
fn range_mask(range: BitRange, byte_index: u64) -> u8 {
    let byte_first = byte_index * 8;
    let from = range.first_bit.max(byte_first) - byte_first;
    let to = range.last_bit.min(byte_first + 7) - byte_first;
    (0xffu8 >> from) & (0xffu8 << (7 - to))
}

/// The set bits of `bytes` in `range` (which lies within `bytes`).
pub fn count_ones(bytes: &[u8], range: BitRange) -> u64 {
    let first_byte = range.first_bit / 8;
    let last_byte = range.last_bit / 8;
    let edge = |byte_index: u64| {
        u64::from((bytes[byte_index as usize] & range_mask(range, byte_index)).count_ones())
    };
    if first_byte == last_byte {
        return edge(first_byte);
    }
    let middle = &bytes[first_byte as usize + 1..last_byte as usize];
    let chunks = middle.chunks_exact(8);
    let tail: u64 = chunks
        .remainder()
        .iter()
        .map(|b| u64::from(b.count_ones()))
        .sum();
    let words: u64 = chunks
        .map(|chunk| {
            let word = u64::from_ne_bytes(chunk.try_into().expect("chunks of 8 bytes"));
            u64::from(word.count_ones())
        })
        .sum();
    edge(first_byte) + words + tail + edge(last_byte)
}

/// The first bit equal to `on` in `range` of `bytes` (which lies within `bytes`).
pub fn find_bit(bytes: &[u8], range: BitRange, on: bool) -> Option<u64> {
    let first_byte = range.first_bit / 8;
    let last_byte = range.last_bit / 8;
    let probe = |byte_index: u64| {
        let byte = bytes[byte_index as usize];
        let wanted = if on { byte } else { !byte };
        let hits = wanted & range_mask(range, byte_index);
        (hits != 0).then(|| byte_index * 8 + u64::from(hits.leading_zeros()))
    };
    if let Some(found) = probe(first_byte) {
        return Some(found);
    }
    if first_byte == last_byte {
        return None;
    }
    // Whole bytes: skip those with no wanted bit, then look inside the first other one.
    let skip = if on { 0x00 } else { 0xff };
    let middle = &bytes[first_byte as usize + 1..last_byte as usize];
    if let Some(position) = middle.iter().position(|&byte| byte != skip) {
        return probe(first_byte + 1 + position as u64);
    }
    probe(last_byte)
}

/// Parses a range bound as Redis's `getLongLongFromObjectOrReply`.
fn parse_bound(arg: &[u8]) -> Result<i64, &'static str> {
    keys::parse_i64(arg).map_err(|()| keys::NOT_AN_INTEGER)
}

/// BITCOUNT key [start end [BYTE|BIT]]
fn bitcount(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let target = Target::of(&session.state, session.database, args.get(1));
    let counted = target.read(|current| {
        // As in Redis 7.2, a missing key counts 0 before the arguments are looked at.
        current.map_or(Ok(Ok(0)), |c| {
            with_string_bytes(&c, |bytes| bitcount_of(bytes, args))
        })
    });
    match counted {
        Ok(Ok(Ok(count))) => reply.integer(i64::try_from(count).unwrap_or(i64::MAX)),
        Ok(Ok(Err(message))) => reply.error(message),
        Ok(Err(())) => reply.error(WRONGTYPE),
        Err(code) => keys::engine_error(reply, code),
    }
    After::Continue
}

/// What BITCOUNT answers for the string `bytes`, its arguments checked in Redis's order.
fn bitcount_of(bytes: &[u8], args: &Args) -> Result<u64, &'static str> {
    let range = match args.len() {
        2 => resolve_range(bytes.len(), 0, -1, RangeUnit::Byte),
        4 | 5 => {
            let start = parse_bound(args.get(2))?;
            let end = parse_bound(args.get(3))?;
            if start < 0 && end < 0 && start > end {
                return Ok(0);
            }
            let unit = match args.len() {
                5 => parse_unit(args.get(4)).map_err(|()| keys::SYNTAX_ERROR)?,
                _ => RangeUnit::Byte,
            };
            resolve_range(bytes.len(), start, end, unit)
        }
        _ => return Err(keys::SYNTAX_ERROR),
    };
    Ok(range.map_or(0, |range| count_ones(bytes, range)))
}

/// BITPOS key bit [start [end [BYTE|BIT]]]
fn bitpos(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let on = match keys::parse_i64(args.get(2)) {
        Ok(bit @ (0 | 1)) => bit == 1,
        Ok(_) => {
            reply.error("ERR The bit argument must be 1 or 0.");
            return After::Continue;
        }
        Err(()) => {
            reply.error(keys::NOT_AN_INTEGER);
            return After::Continue;
        }
    };
    let target = Target::of(&session.state, session.database, args.get(1));
    let found = target.read(|current| {
        // A missing key is an endless run of zeros.
        current.map_or(Ok(Ok(if on { -1 } else { 0 })), |c| {
            with_string_bytes(&c, |bytes| bitpos_of(bytes, on, args))
        })
    });
    match found {
        Ok(Ok(Ok(position))) => reply.integer(position),
        Ok(Ok(Err(message))) => reply.error(message),
        Ok(Err(())) => reply.error(WRONGTYPE),
        Err(code) => keys::engine_error(reply, code),
    }
    After::Continue
}

/// What BITPOS answers for the string `bytes`: the first bit equal to `on` in the range, or
/// -1. Looking for a 0 without an explicit end, the string counts as padded with zeros, so the
/// answer is the first bit past the range.
fn bitpos_of(bytes: &[u8], on: bool, args: &Args) -> Result<i64, &'static str> {
    if args.len() > 6 {
        return Err(keys::SYNTAX_ERROR);
    }
    let start = match args.len() {
        3 => 0,
        _ => parse_bound(args.get(3))?,
    };
    let unit = match args.len() {
        6 => parse_unit(args.get(5)).map_err(|()| keys::SYNTAX_ERROR)?,
        _ => RangeUnit::Byte,
    };
    let end_given = args.len() >= 5;
    let end = if end_given {
        parse_bound(args.get(4))?
    } else {
        -1
    };
    let Some(range) = resolve_range(bytes.len(), start, end, unit) else {
        return Ok(-1);
    };
    let position = match find_bit(bytes, range, on) {
        Some(position) => Some(position),
        None if !on && !end_given => Some(range.last_bit + 1),
        None => None,
    };
    Ok(position.map_or(-1, |position| i64::try_from(position).unwrap_or(i64::MAX)))
}

/// A BITOP operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BitOperation {
    And,
    Or,
    Xor,
    Not,
}

impl BitOperation {
    fn parse(arg: &[u8]) -> Option<BitOperation> {
        [
            (&b"and"[..], BitOperation::And),
            (b"or", BitOperation::Or),
            (b"xor", BitOperation::Xor),
            (b"not", BitOperation::Not),
        ]
        .into_iter()
        .find(|(name, _)| arg.eq_ignore_ascii_case(name))
        .map(|(_, operation)| operation)
    }
}

/// Folds source `source` (the `position`th, from 0) into `result`, as BITOP does: a shorter
/// string reads as padded with zero bytes. The result is as long as the longest source.
pub fn fold_source(result: &mut Vec<u8>, operation: BitOperation, position: usize, source: &[u8]) {
    if position == 0 {
        result.clear();
        result.extend_from_slice(source);
        if operation == BitOperation::Not {
            result.iter_mut().for_each(|byte| *byte = !*byte);
        }
        return;
    }
    if result.len() < source.len() {
        result.resize(source.len(), 0);
    }
    let padded = source.iter().copied().chain(std::iter::repeat(0));
    for (byte, other) in result.iter_mut().zip(padded) {
        match operation {
            BitOperation::And => *byte &= other,
            BitOperation::Or => *byte |= other,
            BitOperation::Xor => *byte ^= other,
            BitOperation::Not => unreachable!("BITOP NOT has one source"),
        }
    }
}

/// BITOP AND|OR|XOR|NOT destkey key [key ...]: the length of the string stored at `destkey`
/// (a result of length 0 deletes it).
fn bitop(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let Some(operation) = BitOperation::parse(args.get(1)) else {
        reply.error(keys::SYNTAX_ERROR);
        return After::Continue;
    };
    if operation == BitOperation::Not && args.len() != 4 {
        reply.error("ERR BITOP NOT must be called with a single source key.");
        return After::Continue;
    }
    let state = Arc::clone(&session.state);
    let stored = keys::namespace_of(&state).exclusive(|| bitop_isolated(session, args, operation));
    match stored {
        Ok(length) => reply.integer(i64::try_from(length).unwrap_or(i64::MAX)),
        Err(code) => keys::engine_error(reply, code),
    }
    After::Continue
}

/// BITOP inside the exclusive section: folds the sources, then stores or deletes.
fn bitop_isolated(
    session: &mut Session,
    args: &Args,
    operation: BitOperation,
) -> Result<usize, ResultCode> {
    let mut result = Vec::new();
    for position in 3..args.len() {
        let target = Target::of(&session.state, session.database, args.get(position));
        target.read(|current| match current {
            None => {
                fold_source(&mut result, operation, position - 3, &[]);
                Ok(())
            }
            Some(c) => with_string_bytes(&c, |bytes| {
                fold_source(&mut result, operation, position - 3, bytes);
            })
            .map_err(|()| ResultCode::IncompatibleType),
        })??;
    }
    let destination = Target::of(&session.state, session.database, args.get(2));
    destination.update(&mut session.writes, |_, writer| {
        if result.is_empty() {
            return Ok((Decision::Delete, 0));
        }
        strings::write_string(writer, &result);
        Ok((Decision::Store(Expiry::Never), result.len()))
    })
}

#[cfg(test)]
mod tests;
