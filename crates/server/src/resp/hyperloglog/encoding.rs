//! Redis's HyperLogLog string, byte for byte (`hyperloglog.c`), so that a value moves between
//! Osprey and redis-server unchanged. This is not the Aerospike HLL of `engine::hll`.
//!
//! Layout: a 16-byte header, then the registers.
//!
//! ```text
//! 0..4   "HYLL"
//! 4      encoding: 0 dense, 1 sparse
//! 5..8   unused, zero
//! 8..16  cached cardinality, little endian; bit 7 of byte 15 set = the cache is stale
//! 16..   dense: 16384 registers of 6 bits, register 0 in the low bits of the first byte
//!        sparse: opcodes, run-length encoding the registers in order
//!            00xxxxxx           ZERO:  xxxxxx+1 registers (1..64) at 0
//!            01xxxxxx yyyyyyyy  XZERO: xxxxxxyyyyyyyy+1 registers (1..16384) at 0
//!            1vvvvvxx           VAL:   xx+1 registers (1..4) at vvvvv+1 (1..32)
//! ```
//!
//! An element hashes with MurmurHash64A (seed `0xadc83b19`): the low 14 bits pick the
//! register, and the run of zeros above them, plus one, is the value the register keeps the
//! maximum of. The estimate is Ertl's improved estimator, as Redis 7 computes it.
//!
//! Invariants:
//! - Every function accepts any bytes that passed [`check`] and never indexes out of bounds:
//!   a sparse value whose opcodes do not cover exactly 16384 registers is [`Corrupted`].
//! - A sparse value never grows past [`SPARSE_BYTES_MAX`]: the change that would make it
//!   do so, or a register value above 32, turns it dense first, as in Redis.
//! - Every change that may move the estimate marks the cached cardinality stale.

/// Header bytes before the registers.
pub const HEADER_BYTES: usize = 16;

/// Registers: 2^14, Redis's `HLL_P` of 14.
pub const REGISTER_COUNT: usize = 1 << INDEX_BITS;

/// Hash bits that pick the register.
const INDEX_BITS: u32 = 14;

/// Bits per dense register: enough for the longest run, 64 - 14 + 1 = 51.
const REGISTER_BITS: usize = 6;

/// The largest value a dense register holds.
const REGISTER_MAX: u8 = (1 << REGISTER_BITS) - 1;

/// The bytes of a dense value.
pub const DENSE_BYTES: usize = HEADER_BYTES + (REGISTER_COUNT * REGISTER_BITS).div_ceil(8);

const _: () = assert!(DENSE_BYTES == 12304);

/// Redis's default `hll-sparse-max-bytes`: past it, a sparse value turns dense.
pub const SPARSE_BYTES_MAX_DEFAULT: usize = 3000;

const _: () = assert!(SPARSE_BYTES_MAX_DEFAULT < DENSE_BYTES);

/// The largest value a sparse VAL opcode holds.
const VAL_VALUE_MAX: u8 = 32;

/// The longest run of one VAL opcode.
const VAL_RUN_MAX: usize = 4;

/// The longest run of a ZERO opcode.
const ZERO_RUN_MAX: usize = 64;

/// The longest run of an XZERO opcode.
const XZERO_RUN_MAX: usize = 16384;

const _: () = assert!(XZERO_RUN_MAX == REGISTER_COUNT);

/// Registers' largest meaningful value: the hash's 50 bits above the index, plus one.
const RUN_BITS: usize = 64 - INDEX_BITS as usize;

/// The seed Redis hashes elements with.
const HASH_SEED: u64 = 0xadc8_3b19;

/// The encoding byte of a dense value.
const ENCODING_DENSE: u8 = 0;

/// The encoding byte of a sparse value.
const ENCODING_SPARSE: u8 = 1;

/// The magic the value starts with.
const MAGIC: &[u8; 4] = b"HYLL";

/// Where the encoding byte is.
const ENCODING_AT: usize = 4;

/// Where the cached cardinality is.
const CACHE_AT: usize = 8;

/// Bit of the cache's last byte that marks it stale.
const CACHE_STALE_BIT: u8 = 0x80;

/// How a valid value holds its registers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    Dense,
    Sparse,
}

/// The bytes are not a HyperLogLog (Redis's WRONGTYPE "not a valid HyperLogLog").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NotHll;

/// The sparse registers are malformed (Redis's INVALIDOBJ).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Corrupted;

/// Checks the header as Redis's `isHLLObjectOrReply`: magic, a known encoding, and the exact
/// length of a dense value. Sparse opcodes are checked only when read.
pub fn check(value: &[u8]) -> Result<Encoding, NotHll> {
    if value.len() < HEADER_BYTES || &value[..4] != MAGIC {
        return Err(NotHll);
    }
    match value[ENCODING_AT] {
        ENCODING_DENSE if value.len() == DENSE_BYTES => Ok(Encoding::Dense),
        ENCODING_SPARSE => Ok(Encoding::Sparse),
        _ => Err(NotHll),
    }
}

/// A new, empty value: sparse, one XZERO covering every register, the cache 0 and valid.
pub fn empty() -> Vec<u8> {
    let mut value = header(ENCODING_SPARSE);
    push_xzero(&mut value, REGISTER_COUNT);
    value
}

fn header(encoding: u8) -> Vec<u8> {
    let mut value = Vec::with_capacity(HEADER_BYTES + 2);
    value.extend_from_slice(MAGIC);
    value.extend_from_slice(&[encoding, 0, 0, 0]);
    value.extend_from_slice(&[0; 8]);
    value
}

/// The cached cardinality, if it is not stale.
pub fn cached_count(value: &[u8]) -> Option<u64> {
    let cache: [u8; 8] = value.get(CACHE_AT..HEADER_BYTES)?.try_into().ok()?;
    (cache[7] & CACHE_STALE_BIT == 0).then(|| u64::from_le_bytes(cache))
}

/// Stores `count` as the cached cardinality (valid).
pub fn set_cached_count(value: &mut [u8], count: u64) {
    value[CACHE_AT..HEADER_BYTES].copy_from_slice(&count.to_le_bytes());
}

/// Marks the cached cardinality stale.
pub fn invalidate_cached_count(value: &mut [u8]) {
    value[HEADER_BYTES - 1] |= CACHE_STALE_BIT;
}

/// Adds `element`: whether a register grew (the estimate may have changed). A sparse value
/// that would grow past `sparse_bytes_max` turns dense.
///
/// # Errors
/// [`Corrupted`] when the sparse opcodes do not reach the element's register.
pub fn add(
    value: &mut Vec<u8>,
    element: &[u8],
    sparse_bytes_max: usize,
) -> Result<bool, Corrupted> {
    let (index, run) = register_of(element);
    set_register(value, index, run, sparse_bytes_max)
}

/// Whether adding `element` to `value`, a dense value, would raise a register: read in place,
/// so that an add that changes nothing copies nothing (most adds, once a value is dense).
pub fn dense_raises(value: &[u8], element: &[u8]) -> bool {
    let (index, run) = register_of(element);
    dense_read(&value[HEADER_BYTES..], index) < run
}

/// Adds `element` to `value`, a dense value, in place: whether a register grew (then the
/// cache is marked stale).
pub fn dense_add(value: &mut [u8], element: &[u8]) -> bool {
    let (index, run) = register_of(element);
    let raised = dense_raise(&mut value[HEADER_BYTES..], index, run);
    if raised {
        invalidate_cached_count(value);
    }
    raised
}

/// Raises register `index` to `run` if it is lower: whether it was. May turn a sparse value
/// dense (past `sparse_bytes_max`). Marks the cache stale when it changes something.
pub fn set_register(
    value: &mut Vec<u8>,
    index: usize,
    run: u8,
    sparse_bytes_max: usize,
) -> Result<bool, Corrupted> {
    let changed = match value[ENCODING_AT] {
        ENCODING_DENSE => dense_raise(&mut value[HEADER_BYTES..], index, run),
        _ => sparse::raise(value, index, run, sparse_bytes_max)?,
    };
    if changed {
        invalidate_cached_count(value);
    }
    Ok(changed)
}

/// Makes a sparse value dense (a dense one is left as it is). The header, cache included,
/// is kept, as Redis does.
pub fn to_dense(value: &mut Vec<u8>) -> Result<(), Corrupted> {
    if value[ENCODING_AT] == ENCODING_DENSE {
        return Ok(());
    }
    let mut dense = vec![0u8; DENSE_BYTES];
    dense[..HEADER_BYTES].copy_from_slice(&value[..HEADER_BYTES]);
    dense[ENCODING_AT] = ENCODING_DENSE;
    let registers = &mut dense[HEADER_BYTES..];
    sparse::for_each_run(
        &value[HEADER_BYTES..],
        |first, run_length, register_value| {
            for index in first..first + run_length {
                dense_write(registers, index, register_value);
            }
        },
    )?;
    *value = dense;
    Ok(())
}

/// Raises each of `registers` (one byte per register) to the value's register.
pub fn merge_into(registers: &mut [u8; REGISTER_COUNT], value: &[u8]) -> Result<(), Corrupted> {
    let stored = &value[HEADER_BYTES..];
    if value[ENCODING_AT] == ENCODING_DENSE {
        for (index, register) in registers.iter_mut().enumerate() {
            *register = (*register).max(dense_read(stored, index));
        }
        return Ok(());
    }
    sparse::for_each_run(stored, |first, run_length, register_value| {
        for register in &mut registers[first..first + run_length] {
            *register = (*register).max(register_value);
        }
    })
}

/// Every register of a valid value, one per byte (PFDEBUG GETREG reads a dense value).
pub fn registers(value: &[u8]) -> Box<[u8; REGISTER_COUNT]> {
    let mut registers = Box::new([0u8; REGISTER_COUNT]);
    // A dense value cannot be corrupted; a sparse one is made dense before GETREG.
    let _ = merge_into(&mut registers, value);
    registers
}

/// The opcodes of a sparse value as PFDEBUG DECODE prints them: `z:len`, `Z:len`,
/// `v:value,len`, separated by spaces (an XZERO cut short reads its missing byte as 0).
pub fn decode_sparse(value: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut text = String::new();
    let sparse = &value[HEADER_BYTES..];
    let mut position = 0;
    while position < sparse.len() {
        let (opcode, length_bytes) = sparse::opcode_at(sparse, position);
        let _ = match opcode {
            sparse::Opcode::Zero(length) => write!(text, "z:{length} "),
            sparse::Opcode::XZero(length) => write!(text, "Z:{length} "),
            sparse::Opcode::Val(value, length) => write!(text, "v:{value},{length} "),
        };
        position += length_bytes;
    }
    text.truncate(text.trim_end_matches(' ').len());
    text
}

/// Redis's PFSELFTEST, with `seed` for its random values: dense registers keep what is
/// written to them without touching their neighbours, then ten million elements go into a
/// dense and a sparse value side by side, which must agree, stay sparse while small, and
/// estimate within six standard errors at each power of ten. The error is Redis's text after
/// `TESTFAILED`.
pub fn self_test(seed: u64, sparse_bytes_max: usize) -> Result<(), String> {
    use rand::{Rng, SeedableRng};
    const CYCLES: usize = 1000;
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let mut dense = vec![0u8; DENSE_BYTES - HEADER_BYTES];
    let mut expected = vec![0u8; REGISTER_COUNT];
    for _ in 0..CYCLES {
        for (index, slot) in expected.iter_mut().enumerate() {
            *slot = rng.random::<u8>() & REGISTER_MAX;
            dense_write(&mut dense, index, *slot);
        }
        for (index, &slot) in expected.iter().enumerate() {
            let read = dense_read(&dense, index);
            if read != slot {
                return Err(format!("Register {index} should be {slot} but is {read}"));
            }
        }
    }
    let mut dense = header(ENCODING_DENSE);
    dense.resize(DENSE_BYTES, 0);
    let mut sparse = empty();
    let relative_error = 1.04 / (REGISTER_COUNT as f64).sqrt();
    let element_seed: u64 = rng.random();
    let mut checkpoint: u64 = 1;
    for j in 1..=10_000_000u64 {
        let element = (j ^ element_seed).to_le_bytes();
        let (index, run) = register_of(&element);
        dense_raise(&mut dense[HEADER_BYTES..], index, run);
        set_register(&mut sparse, index, run, sparse_bytes_max).map_err(|_| "corrupted")?;
        if j != checkpoint {
            continue;
        }
        if j < (sparse_bytes_max / 2) as u64 && check(&sparse) != Ok(Encoding::Sparse) {
            return Err("sparse encoding not used".to_owned());
        }
        let dense_count = count(&dense).map_err(|_| "corrupted")?;
        if Ok(dense_count) != count(&sparse) {
            return Err("dense/sparse disagree".to_owned());
        }
        let error = checkpoint.abs_diff(dense_count);
        // Cardinality 10 collides often enough to pass six errors now and then (Redis).
        let error_max = if j == 10 {
            1
        } else {
            (relative_error * 6.0 * checkpoint as f64).ceil() as u64
        };
        if error > error_max {
            return Err(format!("Too big error. card:{checkpoint} abserr:{error}"));
        }
        checkpoint *= 10;
    }
    Ok(())
}

/// The estimated cardinality of a value, computed (the cache is not read).
pub fn count(value: &[u8]) -> Result<u64, Corrupted> {
    let mut histogram = [0u64; 64];
    let stored = &value[HEADER_BYTES..];
    if value[ENCODING_AT] == ENCODING_DENSE {
        for index in 0..REGISTER_COUNT {
            histogram[usize::from(dense_read(stored, index))] += 1;
        }
    } else {
        sparse::histogram(stored, &mut histogram)?;
    }
    Ok(estimate(&histogram))
}

/// The estimated cardinality of registers held one per byte (a merge).
pub fn count_registers(registers: &[u8; REGISTER_COUNT]) -> u64 {
    let mut histogram = [0u64; 64];
    for &register in registers {
        histogram[usize::from(register & REGISTER_MAX)] += 1;
    }
    estimate(&histogram)
}

/// Ertl's estimator from the histogram of register values ("New cardinality estimation
/// algorithms for HyperLogLog sketches", arXiv:1702.01284), in Redis's order of operations.
/// Values above 51 cannot come from a hash and, as in Redis, do not count.
fn estimate(histogram: &[u64; 64]) -> u64 {
    /// 0.5 / ln 2: the estimator's constant for an unbounded register count.
    const ALPHA_INF: f64 = 0.721_347_520_444_481_7;
    let m = REGISTER_COUNT as f64;
    let mut z = m * tau((m - histogram[RUN_BITS + 1] as f64) / m);
    for run in (1..=RUN_BITS).rev() {
        z += histogram[run] as f64;
        z *= 0.5;
    }
    z += m * sigma(histogram[0] as f64 / m);
    let estimate = ALPHA_INF * m * m / z;
    if estimate.is_finite() && estimate < ESTIMATE_OUT_OF_RANGE as f64 {
        estimate.round() as u64
    } else {
        ESTIMATE_OUT_OF_RANGE
    }
}

/// What Redis's `llroundl` gives for an estimate past `i64::MAX` (only registers no hash can
/// reach get there): `i64::MIN`'s bits, which is also a cache marked stale.
pub const ESTIMATE_OUT_OF_RANGE: u64 = 1 << 63;

/// Ertl's sigma.
fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let mut y = 1.0;
    let mut z = x;
    loop {
        x *= x;
        let previous = z;
        z += x * y;
        y += y;
        if previous == z {
            return z;
        }
    }
}

/// Ertl's tau.
fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let mut y = 1.0;
    let mut z = 1.0 - x;
    loop {
        x = x.sqrt();
        let previous = z;
        y *= 0.5;
        z -= (1.0 - x) * (1.0 - x) * y;
        if previous == z {
            return z / 3.0;
        }
    }
}

/// The register `element` falls in and the run it records (1..=51).
pub fn register_of(element: &[u8]) -> (usize, u8) {
    let hash = murmur_hash64a(element, HASH_SEED);
    let index = (hash & (REGISTER_COUNT as u64 - 1)) as usize;
    // A sentinel bit above the 50 used ones bounds the run at 51.
    let rest = (hash >> INDEX_BITS) | (1 << RUN_BITS);
    (index, rest.trailing_zeros() as u8 + 1)
}

/// MurmurHash2, 64-bit version, reading words little endian (as Redis does on every host).
pub fn murmur_hash64a(bytes: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = seed ^ (bytes.len() as u64).wrapping_mul(M);
    let words = bytes.chunks_exact(8);
    let tail = words.remainder();
    for word in words {
        let mut k = u64::from_le_bytes(word.try_into().expect("chunks of 8 bytes"));
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    if !tail.is_empty() {
        for (position, &byte) in tail.iter().enumerate() {
            h ^= u64::from(byte) << (8 * position);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// Register `index` of dense `registers` (a last register's missing next byte reads as 0).
fn dense_read(registers: &[u8], index: usize) -> u8 {
    let bit = index * REGISTER_BITS;
    let (byte, shift) = (bit / 8, bit % 8);
    let low = u16::from(registers[byte]);
    let high = u16::from(registers.get(byte + 1).copied().unwrap_or(0));
    (((low | (high << 8)) >> shift) as u8) & REGISTER_MAX
}

/// Sets register `index` of dense `registers` to `register_value` (at most 63).
fn dense_write(registers: &mut [u8], index: usize, register_value: u8) {
    let bit = index * REGISTER_BITS;
    let (byte, shift) = (bit / 8, bit % 8);
    let mask = u16::from(REGISTER_MAX) << shift;
    let bits = u16::from(register_value & REGISTER_MAX) << shift;
    registers[byte] = (registers[byte] & !(mask as u8)) | bits as u8;
    if let Some(next) = registers.get_mut(byte + 1) {
        *next = (*next & !((mask >> 8) as u8)) | (bits >> 8) as u8;
    }
}

/// Raises dense register `index` to `run`: whether it was lower.
fn dense_raise(registers: &mut [u8], index: usize, run: u8) -> bool {
    if dense_read(registers, index) >= run {
        return false;
    }
    dense_write(registers, index, run);
    true
}

/// Appends XZERO opcodes for `run_length` registers at 0 (one opcode per 16384).
fn push_xzero(out: &mut Vec<u8>, mut run_length: usize) {
    while run_length > 0 {
        let length = run_length.min(XZERO_RUN_MAX);
        out.extend_from_slice(&sparse::xzero(length));
        run_length -= length;
    }
}

mod sparse;

#[cfg(test)]
mod tests;
