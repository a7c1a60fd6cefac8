//! The target over particle decoding: particle types, user keys and bin values as writes carry
//! them, checked against a reference written from Aerospike's rules.
//!
//! Invariants the target asserts, beyond "no panic":
//! - [`UserKey::from_particle`] accepts exactly integers of 8 bytes, strings and blobs, and
//!   [`UserKey::particle_type`] gives the type back.
//! - [`ParticleType::from_u8`] round-trips every byte it accepts.
//! - Two single-op writes to one record (write, increment, append or prepend, any particle type
//!   and value) get the result code the reference predicts, and a read then returns exactly the
//!   bins the reference holds: integers widened to 8 bytes, sums wrapped, strings joined.

use model::{Op, OpCode, ParticleType, ResultCode, UserKey};

use crate::fixture::{self, OwnedBin};
use crate::input::Input;

/// The particle types clients send, for choices that should usually hit one.
const KNOWN_TYPES: [u8; 15] = [0, 1, 2, 3, 4, 7, 8, 9, 10, 11, 12, 17, 18, 19, 20];

/// The op codes a single-op write may carry here.
const OP_CODES: [OpCode; 4] = [OpCode::Write, OpCode::Incr, OpCode::Append, OpCode::Prepend];

/// Target `particle`: a user key, then two ops `(code, particle type, bin name, value)`
/// written in turn to one record.
pub fn particle(data: &[u8]) {
    let mut input = Input::new(data);
    check_user_key(input.byte(), input.short_bytes());
    let (namespace, _clock) = fixture::namespace();
    let digest = fixture::digest(0);
    let mut bins: Vec<OwnedBin> = Vec::new();
    for _ in 0..2 {
        let op = Op {
            code: input.pick(&OP_CODES),
            particle_type: particle_type(input.byte()),
            bin_name: input.short_bytes(),
            value: input.short_bytes(),
        };
        let expected = apply(&bins, &op);
        let got = fixture::write(&namespace, digest, &[op]);
        match expected {
            Ok(after) => {
                assert!(got.is_ok(), "{op:?} on {bins:?}: {got:?}");
                bins = after;
            }
            Err(code) => assert_eq!(got.map(|_| ()), Err(code), "{op:?} on {bins:?}"),
        }
        let read = fixture::read_all(&namespace, digest).map(|(_, bins)| bins);
        if bins.is_empty() {
            assert_eq!(read, Err(ResultCode::NotFound));
        } else {
            assert_eq!(read, Ok(bins.clone()));
        }
    }
}

/// A known type most of the time (high bit clear), any byte otherwise, but never GeoJSON
/// (23): a GeoJSON write is parsed and stored in the server's form (cells added), which this
/// model does not predict; `geo`'s unit tests and `test_geo.py` cover it.
fn particle_type(byte: u8) -> u8 {
    let chosen = if byte & 0x80 == 0 {
        KNOWN_TYPES[usize::from(byte) % KNOWN_TYPES.len()]
    } else {
        byte & 0x7f
    };
    not_geojson(chosen)
}

/// `particle_type`, with GeoJSON (23) read as a blob (4).
pub(crate) fn not_geojson(particle_type: u8) -> u8 {
    match particle_type {
        23 => 4,
        other => other,
    }
}

fn check_user_key(particle_type: u8, bytes: &[u8]) {
    let key = UserKey::from_particle(particle_type, bytes);
    let expected_ok = match particle_type {
        1 => bytes.len() == 8,
        3 | 4 => true,
        _ => false,
    };
    assert_eq!(key.is_some(), expected_ok, "key of type {particle_type}");
    if let Some(key) = key {
        assert_eq!(key.particle_type() as u8, particle_type);
    }
    if let Some(known) = ParticleType::from_u8(particle_type) {
        assert_eq!(known as u8, particle_type);
    }
}

/// What Aerospike does with `op` on a record holding `bins` (in stored order): the bins after
/// it, or the result code of the failure.
fn apply(bins: &[OwnedBin], op: &Op<'_>) -> Result<Vec<OwnedBin>, ResultCode> {
    check_op(op)?;
    let after = apply_checked(bins.to_vec(), op)?;
    if after.is_empty() && bins.is_empty() {
        return Err(ResultCode::NotFound);
    }
    Ok(after)
}

/// What a modifying op that passed [`check_op`] does to `bins`: the bins after it, or the
/// result code of the failure.
pub(crate) fn apply_checked(bins: Vec<OwnedBin>, op: &Op<'_>) -> Result<Vec<OwnedBin>, ResultCode> {
    let mut after = bins;
    let existing = after.iter().position(|(name, _, _)| name == op.bin_name);
    let value = match op.code {
        OpCode::Write if op.particle_type == ParticleType::Null as u8 => {
            if let Some(position) = existing {
                after.remove(position);
            }
            return Ok(after);
        }
        OpCode::Write if op.particle_type == ParticleType::Integer as u8 => {
            widen(op.value).expect("checked").to_vec()
        }
        OpCode::Write => op.value.to_vec(),
        // Aerospike: every modify op on a missing bin creates it, whatever the op's type.
        OpCode::Incr | OpCode::Append | OpCode::Prepend
            if existing.is_none() && op.particle_type != ParticleType::Null as u8 =>
        {
            let create = Op {
                code: OpCode::Write,
                ..*op
            };
            return apply_checked(after, &create);
        }
        OpCode::Incr => increment(existing.map(|position| &after[position]), op)?,
        OpCode::Append | OpCode::Prepend => {
            concatenate(existing.map(|position| &after[position]), op)?
        }
        other => panic!("apply_checked is for writes, increments and joins, not {other:?}"),
    };
    let bin = (op.bin_name.to_vec(), op.particle_type, value);
    match existing {
        Some(position) => after[position] = bin,
        None => after.push(bin),
    }
    Ok(after)
}

/// The checks every modifying op (write, increment, append, prepend) passes before anything
/// changes: a valid bin name and a value its particle type allows.
pub(crate) fn check_op(op: &Op<'_>) -> Result<(), ResultCode> {
    let name = op.bin_name;
    if name.is_empty() || name.len() > model::BIN_NAME_BYTES_MAX || name.contains(&0) {
        return Err(ResultCode::BinName);
    }
    let value = op.value;
    let valid = match ParticleType::from_u8(op.particle_type) {
        None => false,
        Some(ParticleType::Null) => value.is_empty(),
        Some(ParticleType::Integer) => widen(value).is_some(),
        Some(ParticleType::Float) => value.len() == 8,
        Some(ParticleType::Bool) => matches!(value, [0 | 1]),
        Some(ParticleType::List) => reference_container(value).0,
        Some(ParticleType::Map) => reference_container(value).1,
        Some(_) => true,
    };
    if valid {
        Ok(())
    } else {
        Err(ResultCode::Parameter)
    }
}

/// Whether `value` is one msgpack array, and whether it is one map, by the reference decoder.
fn reference_container(value: &[u8]) -> (bool, bool) {
    crate::msgpack::reference_container(value)
        .expect("a value of at most 255 bytes nests less deeply than the reference follows")
}

/// An integer value of 1, 2, 4 or 8 bytes, big-endian and zero-extended to 8.
fn widen(value: &[u8]) -> Option<[u8; 8]> {
    if !matches!(value.len(), 1 | 2 | 4 | 8) {
        return None;
    }
    let mut widened = [0; 8];
    widened[8 - value.len()..].copy_from_slice(value);
    Some(widened)
}

fn increment(current: Option<&OwnedBin>, op: &Op<'_>) -> Result<Vec<u8>, ResultCode> {
    let integer = ParticleType::Integer as u8;
    let float = ParticleType::Float as u8;
    // Only numbers add up.
    let operand = if op.particle_type == integer {
        widen(op.value).expect("checked")
    } else if op.particle_type == float {
        <[u8; 8]>::try_from(op.value).map_err(|_| ResultCode::Parameter)?
    } else {
        return Err(ResultCode::IncompatibleType);
    };
    match current {
        None if op.particle_type == integer || op.particle_type == float => Ok(operand.to_vec()),
        Some((_, current_type, value)) if *current_type == op.particle_type => {
            // Only integer and float bins can be incremented; both are stored as 8 bytes.
            let number =
                || <[u8; 8]>::try_from(value.as_slice()).expect("stored numbers are 8 bytes");
            if op.particle_type == integer {
                let sum = i64::from_be_bytes(number()).wrapping_add(i64::from_be_bytes(operand));
                Ok(sum.to_be_bytes().to_vec())
            } else if op.particle_type == float {
                let sum = f64::from_be_bytes(number()) + f64::from_be_bytes(operand);
                Ok(sum.to_be_bytes().to_vec())
            } else {
                Err(ResultCode::IncompatibleType)
            }
        }
        _ => Err(ResultCode::IncompatibleType),
    }
}

fn concatenate(current: Option<&OwnedBin>, op: &Op<'_>) -> Result<Vec<u8>, ResultCode> {
    let joinable = [ParticleType::String as u8, ParticleType::Blob as u8];
    if !joinable.contains(&op.particle_type) {
        return Err(ResultCode::IncompatibleType);
    }
    match current {
        None => Ok(op.value.to_vec()),
        Some((_, current_type, _)) if *current_type != op.particle_type => {
            Err(ResultCode::IncompatibleType)
        }
        Some((_, _, value)) if op.code == OpCode::Append => Ok([value, op.value].concat()),
        Some((_, _, value)) => Ok([op.value, value].concat()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_integers_widen_and_increments_wrap() {
        // Key: string "k". Op 1: write integer 0xfffe to bin "n"; op 2: add i64::MAX.
        let mut data = vec![3, 1, b'k'];
        data.extend_from_slice(&[0, 1, 1, b'n', 2, 0xff, 0xfe]);
        data.extend_from_slice(&[
            1, 1, 1, b'n', 8, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        ]);
        particle(&data);
    }

    #[test]
    fn a_bad_bin_name_or_value_is_refused_before_anything_changes() {
        particle(&[0, 0, 0, 1, 16, b'x']);
        particle(&[0, 0, 0, 1, 1, b'n', 3, 1, 2, 3]);
        particle(&[0, 0, 2, 5, 1, b's', 1, b'x', 3, 5, 1, b's', 1, b'y']);
    }
}
