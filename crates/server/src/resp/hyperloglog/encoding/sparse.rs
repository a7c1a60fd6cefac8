//! The sparse opcodes (ZERO, XZERO, VAL) and the in-place update of a sparse value, step for
//! step as Redis's `hllSparseSet`, so that the bytes come out as redis-server's would.

use super::{
    Corrupted, HEADER_BYTES, REGISTER_COUNT, VAL_RUN_MAX, VAL_VALUE_MAX, ZERO_RUN_MAX, dense_raise,
    to_dense,
};

/// One decoded opcode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Opcode {
    /// Registers at 0 (1..=64).
    Zero(usize),
    /// Registers at 0 (1..=16384), two bytes.
    XZero(usize),
    /// (value 1..=32, registers 1..=4).
    Val(u8, usize),
}

impl Opcode {
    fn run_length(self) -> usize {
        match self {
            Opcode::Zero(length) | Opcode::XZero(length) | Opcode::Val(_, length) => length,
        }
    }
}

const XZERO_BIT: u8 = 0x40;
const VAL_BIT: u8 = 0x80;
const KIND_MASK: u8 = 0xc0;

fn is_zero(byte: u8) -> bool {
    byte & KIND_MASK == 0
}

fn is_xzero(byte: u8) -> bool {
    byte & KIND_MASK == XZERO_BIT
}

fn is_val(byte: u8) -> bool {
    byte & VAL_BIT != 0
}

/// The value and run length of a VAL opcode byte.
fn val_fields(byte: u8) -> (u8, usize) {
    (((byte >> 2) & 0x1f) + 1, usize::from(byte & 0x3) + 1)
}

/// The opcode at `position` and its length in bytes. An XZERO cut short by the end of the
/// value reads its missing byte as 0, as Redis reads the string's terminating zero there.
pub(super) fn opcode_at(sparse: &[u8], position: usize) -> (Opcode, usize) {
    let byte = sparse[position];
    if is_zero(byte) {
        (Opcode::Zero(usize::from(byte & 0x3f) + 1), 1)
    } else if is_xzero(byte) {
        let low = usize::from(sparse.get(position + 1).copied().unwrap_or(0));
        (Opcode::XZero((usize::from(byte & 0x3f) << 8 | low) + 1), 2)
    } else {
        let (value, length) = val_fields(byte);
        (Opcode::Val(value, length), 1)
    }
}

/// An XZERO opcode for `length` registers (1..=16384).
pub(super) fn xzero(length: usize) -> [u8; 2] {
    let stored = length - 1;
    [XZERO_BIT | (stored >> 8) as u8, (stored & 0xff) as u8]
}

/// A ZERO opcode for `length` registers (1..=64).
fn zero(length: usize) -> u8 {
    (length - 1) as u8
}

/// A VAL opcode: `length` registers (1..=4) at `value` (1..=32).
fn val(value: u8, length: usize) -> u8 {
    VAL_BIT | ((value - 1) << 2) | (length - 1) as u8
}

/// Calls `visit(first register, run length, value)` for every VAL run of `sparse` (the bytes
/// after the header), in order.
///
/// # Errors
/// [`Corrupted`] unless the opcodes cover exactly the 16384 registers; a VAL run that would
/// pass the last register stops the walk before it is visited.
pub(super) fn for_each_run(
    sparse: &[u8],
    mut visit: impl FnMut(usize, usize, u8),
) -> Result<(), Corrupted> {
    let mut index = 0;
    let mut position = 0;
    while position < sparse.len() {
        let (opcode, length_bytes) = opcode_at(sparse, position);
        if let Opcode::Val(value, run_length) = opcode {
            if index + run_length > REGISTER_COUNT {
                break;
            }
            visit(index, run_length, value);
        }
        index += opcode.run_length();
        position += length_bytes;
    }
    if index == REGISTER_COUNT {
        Ok(())
    } else {
        Err(Corrupted)
    }
}

/// Adds the registers of `sparse` (the bytes after the header) to `histogram` by value.
pub(super) fn histogram(sparse: &[u8], histogram: &mut [u64; 64]) -> Result<(), Corrupted> {
    let mut nonzero = 0;
    for_each_run(sparse, |_, run_length, value| {
        histogram[usize::from(value)] += run_length as u64;
        nonzero += run_length;
    })?;
    histogram[0] += (REGISTER_COUNT - nonzero) as u64;
    Ok(())
}

/// Raises register `index` of sparse `value` to `run`: whether it was lower. Splits the
/// opcode holding it, merges equal VAL neighbours, and turns the value dense when `run` does
/// not fit a VAL opcode or the value would grow past `sparse_bytes_max` (Redis's check: only
/// a change that adds bytes promotes, so a value already past a lowered limit stays sparse
/// until it grows).
pub(super) fn raise(
    value: &mut Vec<u8>,
    index: usize,
    run: u8,
    sparse_bytes_max: usize,
) -> Result<bool, Corrupted> {
    if run > VAL_VALUE_MAX {
        return promote(value, index, run);
    }
    let Some(found) = locate(value, index) else {
        return Err(Corrupted);
    };
    match found.opcode {
        Opcode::Val(old, _) if old >= run => return Ok(false),
        Opcode::Val(_, 1) | Opcode::Zero(1) => value[found.position] = val(run, 1),
        opcode => {
            let sequence = split(opcode, found.first, index, run);
            let nominal_bytes: usize = if matches!(opcode, Opcode::XZero(_)) {
                2
            } else {
                1
            };
            if sequence.len() > nominal_bytes
                && value.len() + sequence.len() - nominal_bytes > sparse_bytes_max
            {
                return promote(value, index, run);
            }
            // The length counts the opcode's nominal bytes: an XZERO cut short by the end of
            // a corrupted value loses the sequence's last byte, as it does in Redis.
            let length_after = value.len() + sequence.len() - nominal_bytes;
            let end = (found.position + found.length_bytes).min(value.len());
            value.splice(found.position..end, sequence);
            value.truncate(length_after);
        }
    }
    merge_neighbours(value, found.previous.unwrap_or(HEADER_BYTES));
    Ok(true)
}

/// Where [`locate`] found a register.
struct Found {
    opcode: Opcode,
    /// The opcode's byte position in the value.
    position: usize,
    length_bytes: usize,
    /// The first register the opcode covers.
    first: usize,
    /// The position of the opcode before it, if any.
    previous: Option<usize>,
}

/// The opcode of `value` covering register `index`.
fn locate(value: &[u8], index: usize) -> Option<Found> {
    let mut position = HEADER_BYTES;
    let mut first = 0;
    let mut previous = None;
    while position < value.len() {
        let (opcode, length_bytes) = opcode_at(value, position);
        if index < first + opcode.run_length() {
            return Some(Found {
                opcode,
                position,
                length_bytes,
                first,
                previous,
            });
        }
        previous = Some(position);
        position += length_bytes;
        first += opcode.run_length();
    }
    None
}

/// The opcodes replacing `opcode` (covering registers from `first`) once register `index`
/// holds `run`: the part before, the register, the part after (at most 5 bytes).
fn split(opcode: Opcode, first: usize, index: usize, run: u8) -> Vec<u8> {
    let last = first + opcode.run_length() - 1;
    let mut sequence = Vec::with_capacity(5);
    let push_rest = |sequence: &mut Vec<u8>, length: usize| match opcode {
        Opcode::Val(current, _) => sequence.push(val(current, length)),
        _ if length > ZERO_RUN_MAX => sequence.extend_from_slice(&xzero(length)),
        _ => sequence.push(zero(length)),
    };
    if index != first {
        push_rest(&mut sequence, index - first);
    }
    sequence.push(val(run, 1));
    if index != last {
        push_rest(&mut sequence, last - index);
    }
    sequence
}

/// Merges adjacent VAL opcodes of equal value whose runs fit one opcode, looking at up to 5
/// opcodes from `start`, as Redis does after each change.
fn merge_neighbours(value: &mut Vec<u8>, start: usize) {
    let mut position = start;
    let mut scans_left = 5;
    while position < value.len() && scans_left > 0 {
        scans_left -= 1;
        let byte = value[position];
        if is_xzero(byte) {
            position += 2;
            continue;
        }
        if is_zero(byte) {
            position += 1;
            continue;
        }
        if let Some(&next) = value.get(position + 1)
            && is_val(next)
        {
            let (value_here, length_here) = val_fields(byte);
            let (value_next, length_next) = val_fields(next);
            let length = length_here + length_next;
            if value_here == value_next && length <= VAL_RUN_MAX {
                value[position + 1] = val(value_here, length);
                value.remove(position);
                // Stay: the merged opcode may merge with the next one too.
                continue;
            }
        }
        position += 1;
    }
}

/// Turns `value` dense, then raises register `index` to `run`.
fn promote(value: &mut Vec<u8>, index: usize, run: u8) -> Result<bool, Corrupted> {
    to_dense(value)?;
    Ok(dense_raise(&mut value[HEADER_BYTES..], index, run))
}
