//! BITFIELD and BITFIELD_RO: signed and unsigned integers of 1 to 64 bits (unsigned: 1 to 63)
//! at any bit offset of a string, with Redis's overflow rules (`bitops.c`).
//!
//! All operations are parsed and checked before the key is touched: a bad one answers an
//! error and changes nothing. A write grows the string once, to the last bit any SET or
//! INCRBY reaches, then runs the operations in order.

use engine::{Decision, Expiry};
use model::ResultCode;
use wire_resp::Args;

use super::{
    BIT_OFFSET_INVALID, grow_to_bit, owned_string, parse_bit_offset, record_bytes_max,
    with_string_bytes,
};
use crate::resp::keys::{self, Target};
use crate::resp::reply::Reply;
use crate::resp::strings;
use crate::resp::{After, Session};

/// Redis's reply to a type other than i1..i64 or u1..u63.
const TYPE_INVALID: &str = "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.";

/// An integer field: signedness and width.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldType {
    pub signed: bool,
    /// 1..=64 when signed, 1..=63 when not.
    pub bits: u32,
}

impl FieldType {
    /// Parses `i<bits>` or `u<bits>`.
    pub fn parse(arg: &[u8]) -> Result<FieldType, ()> {
        let (signed, bits_max) = match arg.first() {
            Some(b'i') => (true, 64),
            Some(b'u') => (false, 63),
            _ => return Err(()),
        };
        let bits = keys::parse_i64(&arg[1..])?;
        if !(1..=bits_max).contains(&bits) {
            return Err(());
        }
        Ok(FieldType {
            signed,
            bits: bits as u32,
        })
    }

    /// The smallest and largest values the field holds.
    fn bounds(self) -> (i128, i128) {
        if self.signed {
            let half = 1i128 << (self.bits - 1);
            (-half, half - 1)
        } else {
            (0, (1i128 << self.bits) - 1)
        }
    }
}

/// What happens to a SET or INCRBY result that does not fit its field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Overflow {
    /// Modulo 2^bits (signed: into the negative range).
    Wrap,
    /// The nearest bound.
    Sat,
    /// No write; the operation answers nil.
    Fail,
}

/// One parsed operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Operation {
    Get,
    Set(i64),
    IncrBy(i64),
}

#[derive(Clone, Copy, Debug)]
struct FieldOperation {
    operation: Operation,
    field: FieldType,
    offset_bits: u64,
    overflow: Overflow,
}

/// Reads the field at `offset_bits` as an unsigned number (bits past the end read as 0).
pub fn read_raw(bytes: &[u8], field: FieldType, offset_bits: u64) -> u64 {
    let first_byte = offset_bits / 8;
    let mut window = [0u8; 16];
    for (position, slot) in window.iter_mut().take(9).enumerate() {
        let byte = usize::try_from(first_byte + position as u64).ok();
        *slot = byte.and_then(|byte| bytes.get(byte)).copied().unwrap_or(0);
    }
    let shift = 128 - (offset_bits % 8) as u32 - field.bits;
    let mask = (1u128 << field.bits) - 1;
    ((u128::from_be_bytes(window) >> shift) & mask) as u64
}

/// Writes the low `field.bits` bits of `raw` at `offset_bits`, which `bytes` must hold.
pub fn write_raw(bytes: &mut [u8], field: FieldType, offset_bits: u64, raw: u64) {
    for bit in 0..u64::from(field.bits) {
        let on = (raw >> (u64::from(field.bits) - 1 - bit)) & 1 == 1;
        let offset = offset_bits + bit;
        let byte = &mut bytes[(offset / 8) as usize];
        let mask = 0x80 >> (offset % 8);
        if on {
            *byte |= mask;
        } else {
            *byte &= !mask;
        }
    }
}

/// The field's value: the raw bits, sign-extended when signed.
pub fn value_of(field: FieldType, raw: u64) -> i64 {
    if field.signed && field.bits < 64 && raw >> (field.bits - 1) & 1 == 1 {
        (raw | (u64::MAX << field.bits)) as i64
    } else {
        raw as i64
    }
}

/// What `wanted` becomes in `field` under `overflow`: `None` when it does not fit and
/// `overflow` is FAIL.
pub fn fitted(field: FieldType, wanted: i128, overflow: Overflow) -> Option<i64> {
    let (min, max) = field.bounds();
    if (min..=max).contains(&wanted) {
        return Some(wanted as i64);
    }
    match overflow {
        Overflow::Fail => None,
        Overflow::Sat if wanted > max => Some(max as i64),
        Overflow::Sat => Some(min as i64),
        Overflow::Wrap => {
            let span = 1i128 << field.bits;
            Some(((wanted - min).rem_euclid(span) + min) as i64)
        }
    }
}

/// The value a SET asks for, as Redis sees it: an unsigned field takes the 64-bit pattern of
/// a negative value, so it overflows upwards.
fn set_wanted(field: FieldType, value: i64) -> i128 {
    if field.signed {
        i128::from(value)
    } else {
        i128::from(value as u64)
    }
}

/// The operations of a BITFIELD, parsed in Redis's order, or the error it answers.
fn parse_operations(args: &Args) -> Result<Vec<FieldOperation>, &'static str> {
    let mut operations = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut position = 2;
    while position < args.len() {
        let remaining = args.len() - position - 1;
        let word = args.get(position);
        let takes_value = if word.eq_ignore_ascii_case(b"get") && remaining >= 2 {
            false
        } else if (word.eq_ignore_ascii_case(b"set") || word.eq_ignore_ascii_case(b"incrby"))
            && remaining >= 3
        {
            true
        } else if word.eq_ignore_ascii_case(b"overflow") && remaining >= 1 {
            overflow = parse_overflow(args.get(position + 1))?;
            position += 2;
            continue;
        } else {
            return Err(keys::SYNTAX_ERROR);
        };
        let field = FieldType::parse(args.get(position + 1)).map_err(|()| TYPE_INVALID)?;
        let offset_bits = parse_bit_offset(args.get(position + 2), Some(field.bits))
            .map_err(|()| BIT_OFFSET_INVALID)?;
        let operation = if takes_value {
            let value =
                keys::parse_i64(args.get(position + 3)).map_err(|()| keys::NOT_AN_INTEGER)?;
            if word.eq_ignore_ascii_case(b"set") {
                Operation::Set(value)
            } else {
                Operation::IncrBy(value)
            }
        } else {
            Operation::Get
        };
        operations.push(FieldOperation {
            operation,
            field,
            offset_bits,
            overflow,
        });
        position += if takes_value { 4 } else { 3 };
    }
    Ok(operations)
}

fn parse_overflow(arg: &[u8]) -> Result<Overflow, &'static str> {
    [
        (&b"wrap"[..], Overflow::Wrap),
        (b"sat", Overflow::Sat),
        (b"fail", Overflow::Fail),
    ]
    .into_iter()
    .find(|(name, _)| arg.eq_ignore_ascii_case(name))
    .map(|(_, overflow)| overflow)
    .ok_or("ERR Invalid OVERFLOW type specified")
}

/// BITFIELD key [GET type offset | SET type offset value | INCRBY type offset increment |
/// OVERFLOW WRAP|SAT|FAIL ...], and BITFIELD_RO (`read_only`: GET only).
pub fn bitfield(
    session: &mut Session,
    args: &Args,
    reply: &mut Reply<'_>,
    read_only: bool,
) -> After {
    let operations = match parse_operations(args) {
        Ok(operations) => operations,
        Err(message) => {
            reply.error(message);
            return After::Continue;
        }
    };
    let writes = operations.iter().any(|op| op.operation != Operation::Get);
    let answers = match (writes, read_only) {
        (false, _) => read_fields(session, args.get(1), &operations),
        (true, true) => {
            reply.error("ERR BITFIELD_RO only supports the GET subcommand");
            return After::Continue;
        }
        (true, false) => write_fields(session, args.get(1), &operations),
    };
    match answers {
        Ok(answers) => {
            reply.array(answers.len());
            for answer in answers {
                match answer {
                    Some(value) => reply.integer(value),
                    None => reply.null(),
                }
            }
        }
        Err(code) => keys::engine_error(reply, code),
    }
    After::Continue
}

/// Runs GET-only operations under the read lock.
fn read_fields(
    session: &Session,
    key: &[u8],
    operations: &[FieldOperation],
) -> Result<Vec<Option<i64>>, ResultCode> {
    let read = |bytes: &[u8]| {
        operations
            .iter()
            .map(|op| {
                Some(value_of(
                    op.field,
                    read_raw(bytes, op.field, op.offset_bits),
                ))
            })
            .collect::<Vec<_>>()
    };
    let target = Target::of(&session.state, session.database, key);
    target
        .read(|current| match current {
            None => Ok(read(&[])),
            Some(c) => with_string_bytes(&c, read),
        })?
        .map_err(|()| ResultCode::IncompatibleType)
}

/// Runs operations that write, in one read-modify-write of the key.
fn write_fields(
    session: &mut Session,
    key: &[u8],
    operations: &[FieldOperation],
) -> Result<Vec<Option<i64>>, ResultCode> {
    let last_bit = operations
        .iter()
        .filter(|op| op.operation != Operation::Get)
        .map(|op| op.offset_bits + u64::from(op.field.bits) - 1)
        .max()
        .unwrap_or(0);
    let bytes_max = record_bytes_max(session);
    let target = Target::of(&session.state, session.database, key);
    target.update(&mut session.writes, |current, writer| {
        let old = owned_string(current.as_ref().map(|c| c.get()).as_ref())?;
        let existed = old.is_some();
        let mut bytes = old.unwrap_or_default();
        let grew = grow_to_bit(&mut bytes, last_bit, bytes_max)?;
        let mut changed = grew || !existed;
        let answers = operations
            .iter()
            .map(|op| apply(&mut bytes, op, &mut changed))
            .collect();
        if !changed {
            return Ok((Decision::Keep, answers));
        }
        strings::write_string(writer, &bytes);
        Ok((Decision::Store(Expiry::Keep), answers))
    })
}

/// Runs one operation on `bytes` (grown to hold every written field); its answer.
fn apply(bytes: &mut [u8], op: &FieldOperation, changed: &mut bool) -> Option<i64> {
    let old_raw = read_raw(bytes, op.field, op.offset_bits);
    let old = value_of(op.field, old_raw);
    let (wanted, answer_old) = match op.operation {
        Operation::Get => return Some(old),
        Operation::Set(value) => (set_wanted(op.field, value), true),
        Operation::IncrBy(increment) => (i128::from(old) + i128::from(increment), false),
    };
    let new = fitted(op.field, wanted, op.overflow)?;
    let mask = u64::MAX >> (64 - op.field.bits);
    let new_raw = new as u64 & mask;
    if new_raw != old_raw {
        write_raw(bytes, op.field, op.offset_bits, new_raw);
        *changed = true;
    }
    Some(if answer_old { old } else { new })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(text: &str) -> FieldType {
        FieldType::parse(text.as_bytes()).expect("a valid type")
    }

    #[test]
    fn types_follow_redis_limits() {
        assert_eq!(
            field("i64"),
            FieldType {
                signed: true,
                bits: 64
            }
        );
        assert_eq!(
            field("u63"),
            FieldType {
                signed: false,
                bits: 63
            }
        );
        assert_eq!(
            field("u1"),
            FieldType {
                signed: false,
                bits: 1
            }
        );
        for bad in ["u64", "i65", "i0", "u0", "x8", "", "i", "i08", "i-1", "I8"] {
            assert!(FieldType::parse(bad.as_bytes()).is_err(), "{bad}");
        }
    }

    #[test]
    fn fields_read_and_write_across_byte_boundaries() {
        let mut bytes = vec![0u8; 10];
        let i64_type = field("i64");
        write_raw(&mut bytes, i64_type, 5, (-2i64) as u64);
        assert_eq!(value_of(i64_type, read_raw(&bytes, i64_type, 5)), -2);
        assert_eq!(bytes[0], 0b0000_0111);
        let u3 = field("u3");
        assert_eq!(read_raw(&bytes, u3, 3), 0b001);
        // Past the end reads zeros.
        assert_eq!(read_raw(&bytes, field("u8"), 200), 0);
        assert_eq!(read_raw(&[0xff], field("u8"), 4), 0xf0);
    }

    #[test]
    fn overflow_rules_match_redis() {
        let u2 = field("u2");
        assert_eq!(fitted(u2, 5, Overflow::Wrap), Some(1));
        assert_eq!(fitted(u2, 5, Overflow::Sat), Some(3));
        assert_eq!(fitted(u2, -1, Overflow::Sat), Some(0));
        assert_eq!(fitted(u2, 5, Overflow::Fail), None);
        let i8_type = field("i8");
        assert_eq!(fitted(i8_type, 128, Overflow::Wrap), Some(-128));
        assert_eq!(fitted(i8_type, -129, Overflow::Wrap), Some(127));
        assert_eq!(fitted(i8_type, 300, Overflow::Sat), Some(127));
        assert_eq!(fitted(i8_type, -300, Overflow::Sat), Some(-128));
        let i64_type = field("i64");
        let past = i128::from(i64::MAX) + 1;
        assert_eq!(fitted(i64_type, past, Overflow::Wrap), Some(i64::MIN));
        assert_eq!(fitted(i64_type, past, Overflow::Sat), Some(i64::MAX));
        // SET of a negative value into an unsigned field overflows upwards, as in Redis.
        assert_eq!(fitted(u2, set_wanted(u2, -1), Overflow::Sat), Some(3));
        assert_eq!(fitted(u2, set_wanted(u2, -1), Overflow::Wrap), Some(3));
        let i1 = field("i1");
        assert_eq!(fitted(i1, 1, Overflow::Wrap), Some(-1));
        assert_eq!(value_of(i1, 1), -1);
    }
}
