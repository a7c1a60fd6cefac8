//! HyperLogLog bins (particle type 18, HLL) and their ops (HLL_READ, HLL_MODIFY), byte for byte
//! as Aerospike keeps them (`as/src/base/particle_hll.c`): a HyperMinHash sketch, so an HLL
//! written here reads the same on Aerospike and back.
//!
//! Layout of an HLL particle (and of an HLL value in op arguments, after its kind byte):
//!
//! | offset | size | field |
//! |--------|------|-------|
//! | 0 | 1 | flags, always 0 |
//! | 1 | 1 | `index_bits`, 4..=16: the sketch has 2^index_bits registers |
//! | 2 | 1 | `minhash_bits`, 0 or 4..=51 |
//! | 3 | 8 | cached count, little-endian (the server's native order); 0: none cached |
//! | 11 | ((6 + minhash_bits) * 2^index_bits + 7) / 8 | the registers |
//!
//! Each register is `6 + minhash_bits` bits wide: the HLL value (6 bits, 1 + the trailing
//! zeros of the hash's second word) above the minhash bits (the first word's bits just above
//! the index). Register r starts at bit `r * (6 + minhash_bits)`, bits counted from the most
//! significant bit of the first register byte (big-endian bit order); the last byte's unused
//! low bits are padding. An element is hashed with MurmurHash3 x64 128 (seed 0) over its
//! msgpack bytes after Aerospike's compaction ([`compact_element`]); the register index is
//! the low `index_bits` of the first word.
//!
//! Invariants:
//! - every [`Hll`] was built by [`Hll::new`] or checked by [`Hll::parse`], so its register
//!   bytes are exactly as many as its bit counts need: a stored or sent HLL of any other size,
//!   flags or bit counts is refused with PARAMETER before a register is read, and register
//!   access reads and writes only bytes that exist;
//! - nothing is allocated from a declared size: a sketch's size follows from its bit counts,
//!   checked against their bounds first (at most 11 + 57 * 2^16 / 8 bytes);
//! - the estimators follow Aerospike's arithmetic step by step (Ertl's improved estimator for
//!   the count, HyperMinHash for similarity and intersection, inclusion-exclusion when
//!   `minhash_bits` is 0), so counts, similarities and intersections match the server's.

use model::{ParticleType, ResultCode};

use crate::cdt::value::{List, Value};
use crate::msgpack::{container_items, item_int};

/// The particle type of an HLL bin.
const PARTICLE_HLL: u8 = ParticleType::Hll as u8;

/// Bytes before the registers: flags, index bits, minhash bits, cached count.
const HEADER_SIZE: usize = 11;
/// Bits of a register's HLL value.
const HLL_BITS: u32 = 6;
/// One more than the largest HLL value a register holds.
const HLL_VALUES: usize = 1 << HLL_BITS;
/// Bounds on the bit counts.
const INDEX_BITS_MIN: u8 = 4;
const INDEX_BITS_MAX: u8 = 16;
const MINHASH_BITS_MIN: u8 = 4;
const MINHASH_BITS_MAX: u8 = 64 - HLL_BITS as u8 - 7;
const COMBINED_BITS_MAX: u32 = 64;

/// Policy flags (`as_hll_flags`).
const FLAG_CREATE_ONLY: u64 = 1;
const FLAG_UPDATE_ONLY: u64 = 2;
const FLAG_NO_FAIL: u64 = 4;
const FLAG_ALLOW_FOLD: u64 = 8;

/// Op codes (`as_hll_op_type`).
mod code {
    pub(super) const INIT: i64 = 0;
    pub(super) const ADD: i64 = 1;
    pub(super) const UNION: i64 = 2;
    pub(super) const UPDATE_COUNT: i64 = 3;
    pub(super) const FOLD: i64 = 4;
    pub(super) const COUNT: i64 = 50;
    pub(super) const GET_UNION: i64 = 51;
    pub(super) const UNION_COUNT: i64 = 52;
    pub(super) const INTERSECT_COUNT: i64 = 53;
    pub(super) const SIMILARITY: i64 = 54;
    pub(super) const DESCRIBE: i64 = 55;
    pub(super) const MAY_CONTAIN: i64 = 56;
}

/// Whether op `code` modifies its bin (`Some(true)`) or only reads it (`Some(false)`);
/// `None` for an unknown code.
pub(crate) fn is_modify(code: u8) -> Option<bool> {
    match i64::from(code) {
        code::INIT..=code::FOLD => Some(true),
        code::COUNT..=code::MAY_CONTAIN => Some(false),
        _ => None,
    }
}

/// Runs a reading op (`payload`: the op's msgpack `[code, args...]`) on a bin (`None`:
/// missing; else its particle type and bytes). Returns the op's result; nil for a missing
/// bin, as Aerospike answers.
///
/// # Errors
/// INCOMPATIBLE_TYPE for a bin that is not an HLL; PARAMETER for a malformed op or stored
/// HLL; OP_NOT_APPLICABLE for an intersection of more than two HLLs whose minhash bits
/// differ from the bin's.
pub(crate) fn read(payload: &[u8], bin: Option<(u8, &[u8])>) -> Result<Value, ResultCode> {
    let Some((particle_type, bytes)) = bin else {
        return Ok(Value::Nil);
    };
    let hll = stored_hll(particle_type, bytes)?;
    let (code, items) = split_payload(payload)?;
    let spec = read_spec(code).ok_or(ResultCode::Parameter)?;
    let args = Args::parse(&spec, &items)?;
    execute_read(code, &hll, args)
}

/// Runs a modifying op on a bin (`None`: missing), leaving in `bin` its new particle type
/// and bytes. Returns the op's result (nil for INIT, UNION and FOLD, and for an op that
/// NO_FAIL skipped, which leaves the bin as it was).
///
/// # Errors
/// The op's result code; `bin` is then unspecified (the caller drops it).
pub(crate) fn modify(payload: &[u8], bin: &mut Option<(u8, Vec<u8>)>) -> Result<Value, ResultCode> {
    let old = match bin.as_ref() {
        Some((particle_type, bytes)) => Some(stored_hll(*particle_type, bytes)?),
        None => None,
    };
    let (code, items) = split_payload(payload)?;
    let spec = modify_spec(code).ok_or(ResultCode::Parameter)?;
    let args = Args::parse(&spec, &items)?;
    if let Some(skip) = policy_check(args.flags, old.is_some()) {
        return skip.map(|()| Value::Nil);
    }
    let (new, result) = execute_modify(code, old, args)?;
    *bin = Some((PARTICLE_HLL, new.to_bytes()));
    Ok(result)
}

/// The stored bin as an HLL.
fn stored_hll(particle_type: u8, bytes: &[u8]) -> Result<Hll, ResultCode> {
    if particle_type != PARTICLE_HLL {
        return Err(ResultCode::IncompatibleType);
    }
    Hll::parse(bytes, true)
}

/// CREATE_ONLY on an existing bin, UPDATE_ONLY on a missing one: `Some(Ok(()))` when
/// NO_FAIL skips the op, `Some(Err(..))` when it fails; `None` to go on.
fn policy_check(flags: u64, exists: bool) -> Option<Result<(), ResultCode>> {
    let refusal = if exists && flags & FLAG_CREATE_ONLY != 0 {
        ResultCode::BinExists
    } else if !exists && flags & FLAG_UPDATE_ONLY != 0 {
        ResultCode::BinNotFound
    } else {
        return None;
    };
    Some(if flags & FLAG_NO_FAIL != 0 {
        Ok(())
    } else {
        Err(refusal)
    })
}

// ---------------------------------------------------------------------------------------------
// Op parsing.

/// One kind of op argument, in the order an op takes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Arg {
    IndexBits,
    MinhashBits,
    /// Policy flags, with the ones the op accepts.
    Flags(u64),
    /// A list of scalar values to hash.
    Elements,
    /// One HLL, or a list of HLLs.
    Hlls,
    /// As [`Arg::Hlls`], and more than two must share nonzero minhash bits.
    HllsIntersect,
}

/// What an op takes: its arguments in order and how many may be left off the end.
struct Spec {
    args: &'static [Arg],
    min_args: usize,
}

/// The arguments of a modifying op (`code::INIT`..=`code::FOLD`).
fn modify_spec(code: i64) -> Option<Spec> {
    const INIT_FLAGS: u64 = FLAG_CREATE_ONLY | FLAG_UPDATE_ONLY | FLAG_NO_FAIL;
    const ADD_FLAGS: u64 = FLAG_CREATE_ONLY | FLAG_NO_FAIL;
    const UNION_FLAGS: u64 = INIT_FLAGS | FLAG_ALLOW_FOLD;
    let (args, min_args): (&'static [Arg], usize) = match code {
        code::INIT => (
            &[Arg::IndexBits, Arg::MinhashBits, Arg::Flags(INIT_FLAGS)],
            0,
        ),
        code::ADD => (
            &[
                Arg::Elements,
                Arg::IndexBits,
                Arg::MinhashBits,
                Arg::Flags(ADD_FLAGS),
            ],
            1,
        ),
        code::UNION => (&[Arg::Hlls, Arg::Flags(UNION_FLAGS)], 1),
        code::UPDATE_COUNT => (&[], 0),
        code::FOLD => (&[Arg::IndexBits], 1),
        _ => return None,
    };
    Some(Spec { args, min_args })
}

/// The arguments of a reading op (`code::COUNT`..=`code::MAY_CONTAIN`): all required.
fn read_spec(code: i64) -> Option<Spec> {
    let args: &'static [Arg] = match code {
        code::COUNT | code::DESCRIBE => &[],
        code::GET_UNION | code::UNION_COUNT => &[Arg::Hlls],
        code::INTERSECT_COUNT | code::SIMILARITY => &[Arg::HllsIntersect],
        code::MAY_CONTAIN => &[Arg::Elements],
        _ => return None,
    };
    Some(Spec {
        args,
        min_args: args.len(),
    })
}

/// An op's parsed arguments; bit counts sent as -1 (or left off) are `None`.
#[derive(Default)]
struct Args {
    index_bits: Option<u8>,
    minhash_bits: Option<u8>,
    flags: u64,
    /// Compacted msgpack bytes of each element.
    elements: Vec<Vec<u8>>,
    hlls: Vec<Hll>,
}

impl Args {
    /// Parses `items` (the payload after the op code) as `spec` says.
    fn parse(spec: &Spec, items: &[&[u8]]) -> Result<Args, ResultCode> {
        if items.len() < spec.min_args || items.len() > spec.args.len() {
            return Err(ResultCode::Parameter);
        }
        let mut args = Args::default();
        for (kind, item) in spec.args.iter().zip(items) {
            match *kind {
                Arg::IndexBits => args.index_bits = parse_index_bits(item)?,
                Arg::MinhashBits => args.minhash_bits = parse_minhash_bits(item, args.index_bits)?,
                Arg::Flags(allowed) => args.flags = parse_flags(item, allowed)?,
                Arg::Elements => args.elements = parse_elements(item)?,
                Arg::Hlls => args.hlls = parse_hlls(item)?,
                Arg::HllsIntersect => args.hlls = parse_hlls_intersect(item)?,
            }
        }
        Ok(args)
    }
}

/// The op code and the other items of an op's payload `[code, args...]`.
fn split_payload(payload: &[u8]) -> Result<(i64, Vec<&[u8]>), ResultCode> {
    let items = array_items(payload).ok_or(ResultCode::Parameter)?;
    let (first, rest) = items.split_first().ok_or(ResultCode::Parameter)?;
    let code = item_int(first).ok_or(ResultCode::Parameter)?;
    Ok((code, rest.to_vec()))
}

/// The items of a msgpack array (not a map), each as its own bytes.
fn array_items(bytes: &[u8]) -> Option<Vec<&[u8]>> {
    match bytes.first()? {
        0x90..=0x9f | 0xdc | 0xdd => container_items(bytes),
        _ => None,
    }
}

/// An index bit count: -1 for unset, else within bounds.
fn parse_index_bits(item: &[u8]) -> Result<Option<u8>, ResultCode> {
    match item_int(item).ok_or(ResultCode::Parameter)? {
        -1 => Ok(None),
        bits => u8::try_from(bits)
            .ok()
            .filter(|&bits| valid_index_bits(bits))
            .map(Some)
            .ok_or(ResultCode::Parameter),
    }
}

/// A minhash bit count: -1 for unset, else within bounds, also with the index bits if set.
fn parse_minhash_bits(item: &[u8], index_bits: Option<u8>) -> Result<Option<u8>, ResultCode> {
    let bits = match item_int(item).ok_or(ResultCode::Parameter)? {
        -1 => return Ok(None),
        bits => u8::try_from(bits)
            .ok()
            .filter(|&bits| valid_minhash_bits(bits))
            .ok_or(ResultCode::Parameter)?,
    };
    match index_bits {
        Some(index_bits) if !valid_bits(index_bits, bits) => Err(ResultCode::Parameter),
        _ => Ok(Some(bits)),
    }
}

/// Policy flags: only those `allowed`, never CREATE_ONLY with UPDATE_ONLY.
fn parse_flags(item: &[u8], allowed: u64) -> Result<u64, ResultCode> {
    // Aerospike reads the flags as a u64: a negative integer is its two's complement bits.
    let flags = item_int(item).ok_or(ResultCode::Parameter)? as u64;
    let both = FLAG_CREATE_ONLY | FLAG_UPDATE_ONLY;
    if flags & !allowed != 0 || flags & both == both {
        return Err(ResultCode::Parameter);
    }
    Ok(flags)
}

/// A non-empty list of scalars (no list or map), each compacted as Aerospike hashes it.
fn parse_elements(item: &[u8]) -> Result<Vec<Vec<u8>>, ResultCode> {
    let items = array_items(item).ok_or(ResultCode::Parameter)?;
    if items.is_empty() {
        return Err(ResultCode::Parameter);
    }
    items
        .iter()
        .map(|element| match element.first() {
            Some(0x80..=0x9f | 0xdc..=0xdf) => Err(ResultCode::Parameter),
            _ => compact_element(element).ok_or(ResultCode::Parameter),
        })
        .collect()
}

/// One HLL value, or a non-empty list of them.
fn parse_hlls(item: &[u8]) -> Result<Vec<Hll>, ResultCode> {
    let items = match item.first() {
        Some(0x90..=0x9f | 0xdc | 0xdd) => array_items(item).ok_or(ResultCode::Parameter)?,
        _ => vec![item],
    };
    if items.is_empty() {
        return Err(ResultCode::Parameter);
    }
    items.iter().map(|item| parse_hll_value(item)).collect()
}

/// An HLL value: a msgpack str or bin of the kind byte (any; Aerospike ignores it) and the
/// sketch. Its bit counts are checked each against its bounds, not together, as Aerospike
/// checks them.
fn parse_hll_value(item: &[u8]) -> Result<Hll, ResultCode> {
    let data = bytes_payload(item).ok_or(ResultCode::Parameter)?;
    match data {
        [_kind, sketch @ ..] if sketch.len() >= HEADER_SIZE => Hll::parse(sketch, false),
        _ => Err(ResultCode::Parameter),
    }
}

/// [`parse_hlls`], and more than two HLLs must share the same nonzero minhash bits.
fn parse_hlls_intersect(item: &[u8]) -> Result<Vec<Hll>, ResultCode> {
    let hlls = parse_hlls(item)?;
    if let [first, _, _, ..] = hlls.as_slice() {
        let minhash_bits = first.minhash_bits;
        if minhash_bits == 0 || hlls.iter().any(|hll| hll.minhash_bits != minhash_bits) {
            return Err(ResultCode::Parameter);
        }
    }
    Ok(hlls)
}

/// The payload of a msgpack str or bin; `None` for anything else or a short one.
fn bytes_payload(item: &[u8]) -> Option<&[u8]> {
    let (&marker, rest) = item.split_first()?;
    let (width, len) = match marker {
        0xa0..=0xbf => (0usize, usize::from(marker & 0x1f)),
        0xc4 | 0xd9 => (1, read_be(rest, 1)? as usize),
        0xc5 | 0xda => (2, read_be(rest, 2)? as usize),
        0xc6 | 0xdb => (4, read_be(rest, 4)? as usize),
        _ => return None,
    };
    rest.get(width..width.checked_add(len)?)
}

/// A big-endian unsigned integer of `width` bytes at the start of `bytes`.
fn read_be(bytes: &[u8], width: usize) -> Option<u64> {
    let field = bytes.get(..width)?;
    Some(field.iter().fold(0, |acc, &b| (acc << 8) | u64::from(b)))
}

// ---------------------------------------------------------------------------------------------
// Element compaction: Aerospike hashes an element after rewriting it in its compact form.

/// `element` (one complete scalar msgpack value) as Aerospike's `msgpack_compactify` leaves
/// it: integers in their smallest form, str headers (and bin headers that fit a smaller str
/// header) as the smallest str header, ext headers as the smallest ext header; anything else
/// unchanged. `None` for the reserved marker or a truncated value.
fn compact_element(element: &[u8]) -> Option<Vec<u8>> {
    let (&marker, rest) = element.split_first()?;
    let mut out = Vec::with_capacity(element.len());
    match marker {
        0xc1 => return None,
        0xcc..=0xcf => {
            let width = 1 << (marker - 0xcc);
            pack_uint(&mut out, read_be(rest, width)?);
        }
        0xd0..=0xd3 => {
            let width = 1usize << (marker - 0xd0);
            let raw = read_be(rest, width)?;
            let unused = 64 - 8 * width as u32;
            pack_int(&mut out, ((raw << unused) as i64) >> unused);
        }
        0xc4..=0xc6 | 0xd9..=0xdb => {
            let (width, limit) = match marker {
                0xc4 | 0xd9 => (1, 0x1f),
                0xc5 | 0xda => (2, 0xff),
                _ => (4, 0xffff),
            };
            let len = read_be(rest, width)?;
            let data = rest.get(width..width.checked_add(usize::try_from(len).ok()?)?)?;
            if len > limit {
                return Some(element.to_vec());
            }
            pack_str_header(&mut out, len);
            out.extend_from_slice(data);
        }
        0xc7..=0xc9 => {
            let width = 1 << (marker - 0xc7);
            let len = read_be(rest, width)?;
            let ext_type = *rest.get(width)?;
            let start = width + 1;
            let data = rest.get(start..start.checked_add(usize::try_from(len).ok()?)?)?;
            pack_ext_header(&mut out, len, ext_type);
            out.extend_from_slice(data);
        }
        _ => out.extend_from_slice(element),
    }
    Some(out)
}

/// Appends `value` as the smallest msgpack unsigned integer.
fn pack_uint(out: &mut Vec<u8>, value: u64) {
    if value < 1 << 7 {
        out.push(value as u8);
    } else if value < 1 << 8 {
        out.extend_from_slice(&[0xcc, value as u8]);
    } else if value < 1 << 16 {
        out.push(0xcd);
        out.extend_from_slice(&(value as u16).to_be_bytes());
    } else if value < 1 << 32 {
        out.push(0xce);
        out.extend_from_slice(&(value as u32).to_be_bytes());
    } else {
        out.push(0xcf);
        out.extend_from_slice(&value.to_be_bytes());
    }
}

/// Appends `value` as the smallest msgpack integer (unsigned forms when not negative).
fn pack_int(out: &mut Vec<u8>, value: i64) {
    if value >= 0 {
        pack_uint(out, value as u64);
    } else if value >= -(1 << 5) {
        out.push(value as u8);
    } else if value >= -(1 << 7) {
        out.extend_from_slice(&[0xd0, value as u8]);
    } else if value >= -(1 << 15) {
        out.push(0xd1);
        out.extend_from_slice(&(value as i16).to_be_bytes());
    } else if value >= -(1 << 31) {
        out.push(0xd2);
        out.extend_from_slice(&(value as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&value.to_be_bytes());
    }
}

/// Appends the smallest str header for `len` bytes.
fn pack_str_header(out: &mut Vec<u8>, len: u64) {
    if len < 32 {
        out.push(0xa0 | len as u8);
    } else if len < 1 << 8 {
        out.extend_from_slice(&[0xd9, len as u8]);
    } else if len < 1 << 16 {
        out.push(0xda);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(0xdb);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    }
}

/// Appends the smallest ext header for `len` bytes of type `ext_type`.
fn pack_ext_header(out: &mut Vec<u8>, len: u64, ext_type: u8) {
    match len {
        1 => out.push(0xd4),
        2 => out.push(0xd5),
        4 => out.push(0xd6),
        8 => out.push(0xd7),
        16 => out.push(0xd8),
        _ if len < 1 << 8 => out.extend_from_slice(&[0xc7, len as u8]),
        _ if len < 1 << 16 => {
            out.push(0xc8);
            out.extend_from_slice(&(len as u16).to_be_bytes());
        }
        _ => {
            out.push(0xc9);
            out.extend_from_slice(&(len as u32).to_be_bytes());
        }
    }
    out.push(ext_type);
}

// ---------------------------------------------------------------------------------------------
// Op execution.

/// Runs a modifying op on the bin's HLL (`None`: missing): the new HLL and the op's result.
fn execute_modify(code: i64, old: Option<Hll>, args: Args) -> Result<(Hll, Value), ResultCode> {
    match code {
        code::INIT => Ok((init(old.as_ref(), &args)?, Value::Nil)),
        code::ADD => add(old, &args),
        code::UNION => Ok((set_union(old, &args)?, Value::Nil)),
        code::UPDATE_COUNT => refresh_count(old),
        code::FOLD => Ok((fold(old, &args)?, Value::Nil)),
        _ => Err(ResultCode::Parameter),
    }
}

/// INIT: an empty HLL of the given bit counts; unset ones keep the bin's (a new bin needs
/// index bits, and gets 0 minhash bits by default).
fn init(old: Option<&Hll>, args: &Args) -> Result<Hll, ResultCode> {
    let (index_bits, minhash_bits) = match old {
        None => (
            args.index_bits.ok_or(ResultCode::OpNotApplicable)?,
            args.minhash_bits.unwrap_or(0),
        ),
        Some(old) => {
            let index_bits = args.index_bits.unwrap_or(old.index_bits);
            let minhash_bits = args.minhash_bits.unwrap_or(old.minhash_bits);
            if !valid_bits(index_bits, minhash_bits) {
                return Err(ResultCode::OpNotApplicable);
            }
            (index_bits, minhash_bits)
        }
    };
    Ok(Hll::new(index_bits, minhash_bits))
}

/// ADD: hashes the elements into the bin's HLL (a new one of the given bit counts for a
/// missing bin; an existing bin keeps its own). Returns how many changed a register.
fn add(old: Option<Hll>, args: &Args) -> Result<(Hll, Value), ResultCode> {
    let mut hll = match old {
        Some(old) => old,
        None => Hll::new(
            args.index_bits.ok_or(ResultCode::OpNotApplicable)?,
            args.minhash_bits.unwrap_or(0),
        ),
    };
    let mut n_added: i64 = 0;
    for element in &args.elements {
        if hll.add(element) {
            n_added += 1;
        }
    }
    Ok((hll, Value::Int(n_added)))
}

/// SET_UNION: the bin becomes the union of itself and the HLLs sent. Without ALLOW_FOLD an
/// existing bin may not lose index bits nor its minhash bits.
fn set_union(old: Option<Hll>, args: &Args) -> Result<Hll, ResultCode> {
    let (min_index_bits, min_minhash_bits) = union_minimums(&args.hlls);
    let mut all: Vec<&Hll> = args.hlls.iter().collect();
    if let Some(old) = &old {
        if args.flags & FLAG_ALLOW_FOLD == 0
            && (old.index_bits > min_index_bits
                || (old.minhash_bits != 0 && old.minhash_bits != min_minhash_bits))
        {
            return Err(ResultCode::OpNotApplicable);
        }
        all.push(old);
    }
    Ok(union_of(&all))
}

/// The smallest index bits of `hlls`, and their common minhash bits (0 if they differ).
fn union_minimums(hlls: &[Hll]) -> (u8, u8) {
    let mut index_bits = u8::MAX;
    let mut minhash_bits: Option<u8> = None;
    for hll in hlls {
        index_bits = index_bits.min(hll.index_bits);
        minhash_bits = match minhash_bits {
            None => Some(hll.minhash_bits),
            Some(bits) if bits != hll.minhash_bits => Some(0),
            same => same,
        };
    }
    (index_bits, minhash_bits.unwrap_or(0))
}

/// UPDATE_COUNT (REFRESH_COUNT): caches the count in the bin and returns it. Like
/// Aerospike, a count already cached is kept as it is.
fn refresh_count(old: Option<Hll>) -> Result<(Hll, Value), ResultCode> {
    let mut hll = old.ok_or(ResultCode::BinNotFound)?;
    hll.cache = hll.estimate();
    let count = hll.cache as i64;
    Ok((hll, Value::Int(count)))
}

/// FOLD: shrinks the bin's HLL (which must have no minhash bits) to fewer index bits.
fn fold(old: Option<Hll>, args: &Args) -> Result<Hll, ResultCode> {
    let old = old.ok_or(ResultCode::BinNotFound)?;
    if old.minhash_bits > 0 {
        return Err(ResultCode::OpNotApplicable);
    }
    let index_bits = args
        .index_bits
        .filter(|&bits| bits <= old.index_bits)
        .ok_or(ResultCode::OpNotApplicable)?;
    if index_bits == old.index_bits {
        return Ok(old);
    }
    let mut folded = Hll::new(index_bits, 0);
    folded.union_with(&old);
    Ok(folded)
}

/// Runs a reading op on the bin's HLL.
fn execute_read(code: i64, hll: &Hll, args: Args) -> Result<Value, ResultCode> {
    let mut all: Vec<&Hll> = args.hlls.iter().collect();
    all.push(hll);
    Ok(match code {
        code::COUNT => Value::Int(hll.estimate() as i64),
        code::GET_UNION => Value::Bytes {
            kind: PARTICLE_HLL,
            data: union_of(&all).to_bytes(),
        },
        code::UNION_COUNT => Value::Int(union_cardinality(&all) as i64),
        code::INTERSECT_COUNT => {
            check_intersect(hll, &args.hlls)?;
            Value::Int(intersect_cardinality(&all) as i64)
        }
        code::SIMILARITY => {
            check_intersect(hll, &args.hlls)?;
            Value::Float(similarity(&all))
        }
        code::DESCRIBE => Value::List(List {
            ordered: false,
            items: vec![
                Value::Int(i64::from(hll.index_bits)),
                Value::Int(i64::from(hll.minhash_bits)),
            ],
        }),
        code::MAY_CONTAIN => {
            let all_in = args.elements.iter().all(|element| hll.may_contain(element));
            Value::Int(i64::from(all_in))
        }
        _ => return Err(ResultCode::Parameter),
    })
}

/// More than two HLLs sent may be intersected with the bin only when it shares their
/// (nonzero) minhash bits.
fn check_intersect(bin: &Hll, sent: &[Hll]) -> Result<(), ResultCode> {
    match sent {
        [first, _, _, ..] if bin.minhash_bits == 0 || bin.minhash_bits != first.minhash_bits => {
            Err(ResultCode::OpNotApplicable)
        }
        _ => Ok(()),
    }
}

// ---------------------------------------------------------------------------------------------
// The sketch.

/// One HyperMinHash sketch (see the module doc for its layout).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Hll {
    index_bits: u8,
    minhash_bits: u8,
    /// The cached count; 0 when none.
    cache: u64,
    /// Exactly [`registers_size`] bytes.
    registers: Vec<u8>,
}

/// Whether `bits` is a valid index bit count.
fn valid_index_bits(bits: u8) -> bool {
    (INDEX_BITS_MIN..=INDEX_BITS_MAX).contains(&bits)
}

/// Whether `bits` is a valid minhash bit count (0: none).
fn valid_minhash_bits(bits: u8) -> bool {
    bits == 0 || (MINHASH_BITS_MIN..=MINHASH_BITS_MAX).contains(&bits)
}

/// Whether the pair makes a valid HLL for a bin.
fn valid_bits(index_bits: u8, minhash_bits: u8) -> bool {
    valid_index_bits(index_bits)
        && valid_minhash_bits(minhash_bits)
        && u32::from(index_bits) + u32::from(minhash_bits) <= COMBINED_BITS_MAX
}

/// Bytes of the registers for the bit counts (within bounds).
fn registers_size(index_bits: u8, minhash_bits: u8) -> usize {
    let bits = (HLL_BITS as usize + usize::from(minhash_bits)) << index_bits;
    bits.div_ceil(8)
}

/// The low `bits` bits set.
fn low_mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1 << bits) - 1
    }
}

impl Hll {
    /// An empty sketch (bit counts within bounds).
    fn new(index_bits: u8, minhash_bits: u8) -> Hll {
        Hll {
            index_bits,
            minhash_bits,
            cache: 0,
            registers: vec![0; registers_size(index_bits, minhash_bits)],
        }
    }

    /// A sketch from its bytes: flags 0, bit counts each within bounds (and together, for a
    /// bin: `combined`), and exactly the size they need.
    fn parse(bytes: &[u8], combined: bool) -> Result<Hll, ResultCode> {
        let [
            flags,
            index_bits,
            minhash_bits,
            c0,
            c1,
            c2,
            c3,
            c4,
            c5,
            c6,
            c7,
            registers @ ..,
        ] = bytes
        else {
            return Err(ResultCode::Parameter);
        };
        let (index_bits, minhash_bits) = (*index_bits, *minhash_bits);
        let bits_ok = if combined {
            valid_bits(index_bits, minhash_bits)
        } else {
            valid_index_bits(index_bits) && valid_minhash_bits(minhash_bits)
        };
        if *flags != 0 || !bits_ok || registers.len() != registers_size(index_bits, minhash_bits) {
            return Err(ResultCode::Parameter);
        }
        Ok(Hll {
            index_bits,
            minhash_bits,
            cache: u64::from_le_bytes([*c0, *c1, *c2, *c3, *c4, *c5, *c6, *c7]),
            registers: registers.to_vec(),
        })
    }

    /// The particle bytes.
    fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_SIZE + self.registers.len());
        out.extend_from_slice(&[0, self.index_bits, self.minhash_bits]);
        out.extend_from_slice(&self.cache.to_le_bytes());
        out.extend_from_slice(&self.registers);
        out
    }

    /// How many registers.
    fn n_registers(&self) -> u32 {
        1 << self.index_bits
    }

    /// Bits per register.
    fn register_bits(&self) -> u32 {
        HLL_BITS + u32::from(self.minhash_bits)
    }

    /// The 8 bytes from `byte` on as a big-endian word (missing bytes read as 0).
    fn window(&self, byte: usize) -> u64 {
        (0..8).fold(0, |acc, i| {
            let b = self.registers.get(byte + i).copied().unwrap_or(0);
            (acc << 8) | u64::from(b)
        })
    }

    /// Where register `r` lies: its first byte, and how far its bits are shifted up from the
    /// bottom of the 8-byte window there.
    fn locate(&self, r: u32) -> (usize, u32) {
        let bit = r as usize * self.register_bits() as usize;
        let shift = 64 - (bit % 8) as u32 - self.register_bits();
        (bit / 8, shift)
    }

    /// Register `r`'s value.
    fn get(&self, r: u32) -> u64 {
        let (byte, shift) = self.locate(r);
        (self.window(byte) >> shift) & low_mask(self.register_bits())
    }

    /// Sets register `r` to `value` (bits beyond its width dropped, as Aerospike drops them).
    fn set(&mut self, r: u32, value: u64) {
        let (byte, shift) = self.locate(r);
        let mask = low_mask(self.register_bits()) << shift;
        let window = (self.window(byte) & !mask) | ((value << shift) & mask);
        for (i, b) in window.to_be_bytes().iter().enumerate() {
            if let Some(slot) = self.registers.get_mut(byte + i) {
                *slot = *b;
            }
        }
    }

    /// The HLL value (leading 6 bits) of a register value.
    fn hll_value(&self, value: u64) -> u64 {
        value >> self.minhash_bits
    }

    /// The register an element falls in and the value it would set there.
    fn hash(&self, element: &[u8]) -> (u32, u64) {
        let (h1, h2) = murmur3_x64_128(element);
        let index = (h1 as u32) & (self.n_registers() - 1);
        let minhash = (h1 >> self.index_bits) & low_mask(u32::from(self.minhash_bits));
        // trailing_zeros of 0 is 64, as Aerospike's cf_lsb64 has it.
        let hll_value = u64::from(h2.trailing_zeros() + 1);
        (index, (hll_value << self.minhash_bits) | minhash)
    }

    /// Adds an element; whether it raised a register (then the cached count is dropped).
    fn add(&mut self, element: &[u8]) -> bool {
        let (r, value) = self.hash(element);
        if self.get(r) < value {
            self.set(r, value);
            self.cache = 0;
            return true;
        }
        false
    }

    /// Whether the element may have been added (no false negatives).
    fn may_contain(&self, element: &[u8]) -> bool {
        let (r, value) = self.hash(element);
        value <= self.get(r)
    }

    /// The estimated count: the cached one, else Ertl's improved estimator (arXiv 1702.01284,
    /// algorithm 6) over the HLL values.
    fn estimate(&self) -> u64 {
        if self.cache != 0 {
            return self.cache;
        }
        let mut histogram = [0u32; HLL_VALUES + 1];
        for r in 0..self.n_registers() {
            let value = self.hll_value(self.get(r)) as usize;
            if let Some(slot) = histogram.get_mut(value) {
                *slot += 1;
            }
        }
        let n = f64::from(self.n_registers());
        let mut z = n * tau(f64::from(histogram[HLL_VALUES]) / n);
        for &count in histogram[1..].iter().rev() {
            z = 0.5 * (z + f64::from(count));
        }
        z += n * sigma(f64::from(histogram[0]) / n);
        (alpha(self.index_bits) * n * n / z).round() as u64
    }

    /// Raises this sketch's registers to `other`'s (whose index bits are at least this one's;
    /// its registers fold onto this one's by their low index bits). With no minhash bits here
    /// only the HLL values count.
    fn union_with(&mut self, other: &Hll) {
        let mask = self.n_registers() - 1;
        if self.minhash_bits == 0 {
            for r in 0..other.n_registers() {
                let value = other.hll_value(other.get(r));
                if self.get(r & mask) < value {
                    self.set(r & mask, value);
                }
            }
            return;
        }
        for r in 0..other.n_registers() {
            let value = other.get(r);
            if self.get(r & mask) < value {
                self.set(r & mask, value);
            }
        }
        self.cache = 0;
    }

    /// Keeps only the registers equal in `other` (folded as in [`Hll::union_with`]).
    fn intersect_with(&mut self, other: &Hll) {
        let mask = self.n_registers() - 1;
        for r in 0..other.n_registers() {
            let mine = self.get(r & mask);
            let kept = if mine == other.get(r) { mine } else { 0 };
            self.set(r & mask, kept);
        }
    }

    /// How many registers are not 0.
    fn n_used_registers(&self) -> u32 {
        (0..self.n_registers())
            .filter(|&r| self.get(r) != 0)
            .count() as u32
    }

    /// Whether any of the first 2^index_bits register bytes is set (Aerospike looks no
    /// further).
    fn has_data(&self) -> bool {
        let n = self.n_registers() as usize;
        self.registers.iter().take(n).any(|&b| b != 0)
    }
}

/// The bit counts a union of `hlls` has: the fewest index bits, and the minhash bits when all
/// share them (else 0).
fn template(hlls: &[&Hll]) -> (u8, u8) {
    let Some((first, rest)) = hlls.split_first() else {
        return (INDEX_BITS_MIN, 0);
    };
    let mut index_bits = first.index_bits;
    let mut minhash_bits = first.minhash_bits;
    for hll in rest {
        index_bits = index_bits.min(hll.index_bits);
        if minhash_bits != 0 && minhash_bits != hll.minhash_bits {
            minhash_bits = 0;
        }
    }
    (index_bits, minhash_bits)
}

/// The union of `hlls`, with the [`template`] bit counts.
fn union_of(hlls: &[&Hll]) -> Hll {
    let (index_bits, minhash_bits) = template(hlls);
    let mut union = Hll::new(index_bits, minhash_bits);
    for hll in hlls {
        union.union_with(hll);
    }
    union
}

/// The estimated count of the union.
fn union_cardinality(hlls: &[&Hll]) -> u64 {
    union_of(hlls).estimate()
}

/// The estimated count of the intersection: similarity times union with minhash bits, else
/// inclusion-exclusion.
fn intersect_cardinality(hlls: &[&Hll]) -> u64 {
    if template(hlls).1 == 0 {
        return hll_intersect_cardinality(hlls);
    }
    let similarity = similarity(hlls);
    if similarity.is_nan() {
        return 0;
    }
    (union_cardinality(hlls) as f64 * similarity).round() as u64
}

/// The estimated Jaccard similarity: HyperMinHash (arXiv 1710.08436) with minhash bits, else
/// intersection over union. NaN when all are empty.
fn similarity(hlls: &[&Hll]) -> f64 {
    let (index_bits, minhash_bits) = template(hlls);
    if minhash_bits == 0 {
        return hll_similarity(hlls);
    }
    let one_has_data = hlls.iter().any(|hll| hll.has_data());
    if hlls.iter().any(|hll| !hll.has_data()) {
        return if one_has_data { 0.0 } else { f64::NAN };
    }
    let n_union = union_of(hlls).n_used_registers();
    let mut intersection = Hll::new(index_bits, minhash_bits);
    let mut n_intersect = 0;
    if let Some((first, rest)) = hlls.split_first() {
        intersection.union_with(first);
        for hll in rest {
            intersection.intersect_with(hll);
        }
        n_intersect = intersection.n_used_registers();
    }
    let collisions = match hlls {
        [a, b] => expected_collisions(index_bits, minhash_bits, a.estimate(), b.estimate()),
        _ => 0.0,
    };
    let result = (f64::from(n_intersect) - collisions) / f64::from(n_union);
    if result < 0.0 { 0.0 } else { result }
}

/// Without minhash bits: the intersection count by inclusion-exclusion (two or three HLLs).
fn hll_intersect_cardinality(hlls: &[&Hll]) -> u64 {
    let union = union_cardinality(hlls);
    let mut sum: u64 = 0;
    for hll in hlls {
        match sum.checked_add(hll.estimate()) {
            Some(total) => sum = total,
            None => {
                sum = u64::MAX;
                break;
            }
        }
    }
    match hlls {
        [_, _] => sum.saturating_sub(union),
        [a, b, c, ..] => {
            let (a, b, c) = (*a, *b, *c);
            let pairs = intersect_cardinality(&[a, b])
                .wrapping_add(intersect_cardinality(&[b, c]))
                .wrapping_add(intersect_cardinality(&[a, c]));
            // Aerospike computes this in signed 64-bit arithmetic.
            let result = (union as i64).wrapping_sub((sum as i64).wrapping_sub(pairs as i64));
            result.max(0) as u64
        }
        _ => 0,
    }
}

/// Without minhash bits: intersection count over union count.
fn hll_similarity(hlls: &[&Hll]) -> f64 {
    hll_intersect_cardinality(hlls) as f64 / union_cardinality(hlls) as f64
}

/// HyperMinHash's expected count of registers equal by chance in two sketches of these
/// counts.
fn expected_collisions(index_bits: u8, minhash_bits: u8, count0: u64, count1: u64) -> f64 {
    let n = f64::from(1u32 << index_bits);
    let buckets = 1i32 << HLL_BITS;
    let (count0, count1) = (count0 as f64, count1 as f64);
    let mut sum = 0.0;
    for i in 1..=buckets {
        let b1 = if i == buckets { 0.0 } else { 2f64.powi(-i) } / n;
        let b2 = 2f64.powi(1 - i) / n;
        let pr_x = (1.0 - b1).powf(count0) - (1.0 - b2).powf(count0);
        let pr_y = (1.0 - b1).powf(count1) - (1.0 - b2).powf(count1);
        sum += pr_x * pr_y;
    }
    sum * n / 2f64.powi(i32::from(minhash_bits))
}

/// Iterations after which the series below stop (they converge long before).
const SERIES_MAX: usize = 4096;

/// Ertl's tau function.
fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let mut y = 1.0;
    let mut z = 1.0 - x;
    for _ in 0..SERIES_MAX {
        x = x.sqrt();
        let previous = z;
        y *= 0.5;
        // Aerospike writes pow(1 - x, 2), which the compiler makes this exact product.
        z -= (1.0 - x) * (1.0 - x) * y;
        if previous == z {
            break;
        }
    }
    z / 3.0
}

/// Ertl's sigma function.
fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let mut y = 1.0;
    let mut z = x;
    for _ in 0..SERIES_MAX {
        x *= x;
        let previous = z;
        z += x * y;
        y += y;
        if previous == z {
            break;
        }
    }
    z
}

/// The HLL bias constant for 2^index_bits registers.
fn alpha(index_bits: u8) -> f64 {
    match index_bits {
        4 => 0.673,
        5 => 0.697,
        6 => 0.709,
        _ => 0.7213 / (1.0 + 1.079 / f64::from(1u32 << index_bits)),
    }
}

/// MurmurHash3 x64 128 with seed 0 (Aerospike's `murmurHash3_x64_128`): the two 64-bit
/// words, blocks read little-endian.
fn murmur3_x64_128(data: &[u8]) -> (u64, u64) {
    const C1: u64 = 0x87c3_7b91_1142_53d5;
    const C2: u64 = 0x4cf5_ad43_2745_937f;
    let mix_k1 = |k: u64| k.wrapping_mul(C1).rotate_left(31).wrapping_mul(C2);
    let mix_k2 = |k: u64| k.wrapping_mul(C2).rotate_left(33).wrapping_mul(C1);
    let (mut h1, mut h2) = (0u64, 0u64);
    let blocks = data.chunks_exact(16);
    let tail = blocks.remainder();
    for block in blocks {
        let (k1, k2) = block.split_at(8);
        h1 ^= mix_k1(le_word(k1));
        h1 = h1
            .rotate_left(27)
            .wrapping_add(h2)
            .wrapping_mul(5)
            .wrapping_add(0x52dc_e729);
        h2 ^= mix_k2(le_word(k2));
        h2 = h2
            .rotate_left(31)
            .wrapping_add(h1)
            .wrapping_mul(5)
            .wrapping_add(0x3849_5ab5);
    }
    if tail.len() > 8 {
        h2 ^= mix_k2(le_word(&tail[8..]));
    }
    if !tail.is_empty() {
        h1 ^= mix_k1(le_word(&tail[..tail.len().min(8)]));
    }
    let len = data.len() as u64;
    h1 ^= len;
    h2 ^= len;
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    h1 = fmix64(h1);
    h2 = fmix64(h2);
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    (h1, h2)
}

/// Up to 8 bytes as a little-endian word.
fn le_word(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .rev()
        .fold(0, |acc, &b| (acc << 8) | u64::from(b))
}

/// MurmurHash3's 64-bit finalizer.
fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^= k >> 33;
    k
}

#[cfg(test)]
mod tests {
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::cdt::value::pack;

    type Bin = Option<(u8, Vec<u8>)>;

    fn int(value: i64) -> Value {
        Value::Int(value)
    }

    fn list(items: Vec<Value>) -> Value {
        Value::List(List {
            ordered: false,
            items,
        })
    }

    fn payload(code: i64, args: Vec<Value>) -> Vec<u8> {
        let mut items = vec![int(code)];
        items.extend(args);
        pack(&list(items))
    }

    fn strings(prefix: &str, range: std::ops::Range<usize>) -> Vec<Value> {
        range
            .map(|i| Value::string(format!("{prefix}{i}").as_bytes()))
            .collect()
    }

    fn modify_op(bin: &mut Bin, code: i64, args: Vec<Value>) -> Result<Value, ResultCode> {
        modify(&payload(code, args), bin)
    }

    fn read_op(bin: &Bin, code: i64, args: Vec<Value>) -> Result<Value, ResultCode> {
        let bin = bin.as_ref().map(|(kind, bytes)| (*kind, bytes.as_slice()));
        read(&payload(code, args), bin)
    }

    fn init(
        bin: &mut Bin,
        index_bits: i64,
        minhash_bits: i64,
        flags: u64,
    ) -> Result<Value, ResultCode> {
        modify_op(
            bin,
            code::INIT,
            vec![int(index_bits), int(minhash_bits), int(flags as i64)],
        )
    }

    fn add(bin: &mut Bin, values: &[Value], index_bits: i64, minhash_bits: i64) -> i64 {
        let args = vec![
            list(values.to_vec()),
            int(index_bits),
            int(minhash_bits),
            int(0),
        ];
        as_int(modify_op(bin, code::ADD, args))
    }

    fn as_int(result: Result<Value, ResultCode>) -> i64 {
        match result {
            Ok(Value::Int(value)) => value,
            other => panic!("expected an integer, got {other:?}"),
        }
    }

    fn as_float(result: Result<Value, ResultCode>) -> f64 {
        match result {
            Ok(Value::Float(value)) => value,
            other => panic!("expected a float, got {other:?}"),
        }
    }

    fn count(bin: &Bin) -> i64 {
        as_int(read_op(bin, code::COUNT, vec![]))
    }

    fn describe(bin: &Bin) -> (i64, i64) {
        match read_op(bin, code::DESCRIBE, vec![]) {
            Ok(Value::List(described)) => match described.items.as_slice() {
                [Value::Int(index), Value::Int(minhash)] => (*index, *minhash),
                other => panic!("bad description {other:?}"),
            },
            other => panic!("expected a list, got {other:?}"),
        }
    }

    /// The bin's bytes as an HLL value in op arguments.
    fn hll_of(bin: &Bin) -> Value {
        let (kind, data) = bin.clone().expect("a bin");
        assert_eq!(kind, PARTICLE_HLL);
        Value::Bytes { kind, data }
    }

    fn hll_with(index_bits: i64, minhash_bits: i64, values: &[Value]) -> Bin {
        let mut bin = None;
        add(&mut bin, values, index_bits, minhash_bits);
        bin
    }

    /// Relative error `sigmas` standard errors wide for 2^index_bits registers.
    fn within(expected: usize, estimate: i64, index_bits: i64, sigmas: f64) -> bool {
        let error = sigmas * 1.04 / 2f64.powf(index_bits as f64).sqrt();
        let expected = expected as f64;
        let estimate = estimate as f64;
        expected * (1.0 - error) <= estimate && estimate <= expected * (1.0 + error)
    }

    /// The legal (index, minhash) pairs the Go client's tests use.
    fn legal_descriptions() -> Vec<(i64, i64)> {
        let mut out = Vec::new();
        for index in (4..=16).step_by(4) {
            let max_minhash = 51.min(64 - index);
            out.extend([
                (index, 0),
                (index, 4),
                (index, (max_minhash + index) / 2),
                (index, max_minhash),
            ]);
        }
        out
    }

    /// The illegal pairs the Go client's tests use.
    fn illegal_descriptions() -> Vec<(i64, i64)> {
        let mut out = Vec::new();
        for index in (3..=21).step_by(4) {
            if !(4..=16).contains(&index) {
                out.extend([(index, 0), (index, 3), (index, 51)]);
            } else {
                out.extend([(index, 3), (index, 52)]);
                if index + 51 > 64 {
                    out.push((index, 1 + 51 - (64 - (index + 51))));
                }
            }
        }
        out
    }

    #[test]
    fn murmur3_matches_reference_vectors() {
        assert_eq!(murmur3_x64_128(b""), (0, 0));
        assert_eq!(
            murmur3_x64_128(b"hello"),
            (0xcbd8_a7b3_41bd_9b02, 0x5b1e_906a_48ae_1d19)
        );
        assert_eq!(
            murmur3_x64_128(b"\xa6\x03key 0"),
            (0x937a_8305_5d57_3f66, 0xd3ae_b858_e70d_68f2)
        );
        assert_eq!(
            murmur3_x64_128(b"The quick brown fox jumps over the lazy dog"),
            (0xe34b_bc7b_bc07_1b6c, 0x7a43_3ca9_c49a_9347)
        );
        let counting: Vec<u8> = (0..40).collect();
        assert_eq!(
            murmur3_x64_128(&counting),
            (0xc3a0_54d8_418c_8064, 0xa001_ca30_974c_12ad)
        );
    }

    #[test]
    fn elements_are_compacted_as_aerospike_compacts_them() {
        let compact = |bytes: &[u8]| compact_element(bytes).expect("compacts");
        assert_eq!(compact(&[0xcd, 0x00, 0x05]), [0x05]);
        assert_eq!(
            compact(&[0xd3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x80]),
            [0xd0, 0x80]
        );
        assert_eq!(compact(&[0xd1, 0xff, 0xff]), [0xff]);
        assert_eq!(compact(&[0xd2, 0x00, 0x00, 0x01, 0x00]), [0xcd, 0x01, 0x00]);
        assert_eq!(compact(&[0xcc, 0xc8]), [0xcc, 0xc8], "already compact");
        assert_eq!(compact(&[0xd9, 0x02, 0x03, b'a']), [0xa2, 0x03, b'a']);
        assert_eq!(
            compact(&[0xc4, 0x02, 0x04, 0x01]),
            [0xa2, 0x04, 0x01],
            "short bin8 to fixstr"
        );
        let long_bin8 = [[0xc4, 40].as_slice(), &[7; 40]].concat();
        assert_eq!(compact(&long_bin8), long_bin8, "bin8 over 31 bytes stays");
        let bin16 = [[0xc5, 0, 40].as_slice(), &[7; 40]].concat();
        assert_eq!(compact(&bin16), [[0xd9, 40].as_slice(), &[7; 40]].concat());
        assert_eq!(compact(&[0xc7, 0x01, 0x05, 0xaa]), [0xd4, 0x05, 0xaa]);
        assert_eq!(
            compact(&[0xc8, 0x00, 0x03, 0x05, 1, 2, 3]),
            [0xc7, 0x03, 0x05, 1, 2, 3]
        );
        assert_eq!(
            compact(&[0xcb, 0, 0, 0, 0, 0, 0, 0, 0]),
            [0xcb, 0, 0, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(compact_element(&[0xc1]), None);
        assert_eq!(compact_element(&[0xd9, 0x05, 0x03]), None, "truncated");
    }

    #[test]
    fn registers_pack_big_endian_bit_order_and_round_trip() {
        let mut rng = SmallRng::seed_from_u64(7);
        for (index_bits, minhash_bits) in [(4, 0), (4, 4), (5, 13), (8, 51), (10, 7)] {
            let mut hll = Hll::new(index_bits, minhash_bits);
            let width = hll.register_bits();
            let values: Vec<u64> = (0..hll.n_registers())
                .map(|_| rng.random::<u64>() & low_mask(width))
                .collect();
            for (r, &value) in values.iter().enumerate() {
                hll.set(r as u32, value);
            }
            for (r, &value) in values.iter().enumerate() {
                assert_eq!(
                    hll.get(r as u32),
                    value,
                    "register {r} of ({index_bits}, {minhash_bits})"
                );
                // Bit by bit, most significant first from the register's first bit.
                let first = r * width as usize;
                let from_bits = (0..width as usize).fold(0u64, |acc, i| {
                    let bit = first + i;
                    (acc << 1) | u64::from(hll.registers[bit / 8] >> (7 - bit % 8) & 1)
                });
                assert_eq!(from_bits, value);
            }
        }
        // The first register of (4, 0) is the top 6 bits of the first byte.
        let mut hll = Hll::new(4, 0);
        hll.set(0, 0b10_0001);
        hll.set(1, 0b11_1111);
        assert_eq!(&hll.registers[..2], &[0b1000_0111, 0b1111_0000]);
    }

    #[test]
    fn init_sets_the_bit_counts_and_refuses_illegal_ones() {
        for (index, minhash) in legal_descriptions() {
            let mut bin = None;
            assert!(matches!(init(&mut bin, index, minhash, 0), Ok(Value::Nil)));
            let (kind, bytes) = bin.clone().expect("created");
            assert_eq!(kind, PARTICLE_HLL);
            let size = HEADER_SIZE + registers_size(index as u8, minhash as u8);
            assert_eq!(bytes.len(), size);
            assert_eq!(&bytes[..3], &[0, index as u8, minhash as u8]);
            assert!(bytes[3..].iter().all(|&b| b == 0));
            assert_eq!(count(&bin), 0);
            assert_eq!(as_int(modify_op(&mut bin, code::UPDATE_COUNT, vec![])), 0);
            assert_eq!(describe(&bin), (index, minhash));
        }
        for (index, minhash) in illegal_descriptions() {
            let mut bin = None;
            assert_eq!(
                init(&mut bin, index, minhash, 0).err(),
                Some(ResultCode::Parameter),
                "({index}, {minhash})"
            );
        }
    }

    #[test]
    fn init_flags_follow_aerospike() {
        let mut bin = None;
        init(&mut bin, 4, -1, FLAG_CREATE_ONLY).expect("creates");
        assert_eq!(
            init(&mut bin, 4, -1, FLAG_CREATE_ONLY).err(),
            Some(ResultCode::BinExists)
        );
        init(&mut bin, 4, -1, FLAG_UPDATE_ONLY).expect("updates");
        let mut missing = None;
        assert_eq!(
            init(&mut missing, 4, -1, FLAG_UPDATE_ONLY).err(),
            Some(ResultCode::BinNotFound)
        );
        // NO_FAIL skips, leaving the bin as it was.
        let before = bin.clone();
        assert!(matches!(
            init(&mut bin, 8, -1, FLAG_CREATE_ONLY | FLAG_NO_FAIL),
            Ok(Value::Nil)
        ));
        assert_eq!(bin, before);
        assert!(matches!(
            init(&mut missing, 4, -1, FLAG_UPDATE_ONLY | FLAG_NO_FAIL),
            Ok(Value::Nil)
        ));
        assert_eq!(missing, None);
        assert_eq!(
            init(&mut bin, 4, -1, FLAG_ALLOW_FOLD).err(),
            Some(ResultCode::Parameter)
        );
        assert_eq!(
            init(&mut bin, 4, -1, FLAG_CREATE_ONLY | FLAG_UPDATE_ONLY).err(),
            Some(ResultCode::Parameter)
        );
        // Unset index bits: a new bin cannot be made; an existing one keeps its own.
        assert_eq!(
            init(&mut missing, -1, -1, 0).err(),
            Some(ResultCode::OpNotApplicable)
        );
        let mut big = None;
        init(&mut big, 16, 0, 0).expect("creates");
        assert_eq!(
            init(&mut big, -1, 51, 0).err(),
            Some(ResultCode::OpNotApplicable)
        );
        init(&mut big, -1, 48, 0).expect("16 + 48 fits");
        assert_eq!(describe(&big), (16, 48));
        // INIT with no arguments clears an existing bin.
        add(&mut big, &strings("v", 0..10), -1, -1);
        assert!(count(&big) > 0);
        modify_op(&mut big, code::INIT, vec![]).expect("clears");
        assert_eq!((count(&big), describe(&big)), (0, (16, 48)));
    }

    #[test]
    fn add_counts_within_the_error_bound_and_adds_nothing_twice() {
        let entries = strings("key ", 0..256);
        for (index, minhash) in legal_descriptions() {
            let mut bin = None;
            assert!(add(&mut bin, &entries, index, minhash) > 0);
            let estimate = count(&bin);
            assert!(
                within(entries.len(), estimate, index, 6.0),
                "({index}, {minhash}): {estimate}"
            );
            assert_eq!(
                as_int(modify_op(&mut bin, code::UPDATE_COUNT, vec![])),
                estimate
            );
            assert_eq!(describe(&bin), (index, minhash));
            assert_eq!(add(&mut bin, &entries, -1, -1), 0);
            // The refreshed count is cached in the bin's header.
            let bytes = &bin.as_ref().expect("a bin").1;
            assert_eq!(
                u64::from_le_bytes(bytes[3..11].try_into().expect("8 bytes")),
                estimate as u64
            );
        }
        for (index, minhash) in illegal_descriptions() {
            let mut bin = None;
            let args = vec![list(entries.clone()), int(index), int(minhash)];
            assert_eq!(
                modify_op(&mut bin, code::ADD, args).err(),
                Some(ResultCode::Parameter)
            );
        }
    }

    #[test]
    fn add_flags_and_arguments_follow_aerospike() {
        let entries = strings("key ", 0..256);
        let with_flags =
            |flags: u64| vec![list(entries.clone()), int(4), int(-1), int(flags as i64)];
        let mut bin = None;
        modify_op(&mut bin, code::ADD, with_flags(FLAG_CREATE_ONLY)).expect("creates");
        assert_eq!(
            modify_op(&mut bin, code::ADD, with_flags(FLAG_CREATE_ONLY)).err(),
            Some(ResultCode::BinExists)
        );
        assert_eq!(
            modify_op(&mut bin, code::ADD, with_flags(FLAG_UPDATE_ONLY)).err(),
            Some(ResultCode::Parameter)
        );
        assert_eq!(
            modify_op(&mut bin, code::ADD, with_flags(FLAG_ALLOW_FOLD)).err(),
            Some(ResultCode::Parameter)
        );
        assert!(matches!(
            modify_op(
                &mut bin,
                code::ADD,
                with_flags(FLAG_CREATE_ONLY | FLAG_NO_FAIL)
            ),
            Ok(Value::Nil)
        ));
        let mut missing = None;
        let no_bits = vec![list(entries.clone())];
        assert_eq!(
            modify_op(&mut missing, code::ADD, no_bits).err(),
            Some(ResultCode::OpNotApplicable)
        );
        // An existing bin keeps its own bit counts whatever the op says.
        let changed = add(&mut bin, &strings("other ", 0..10), 12, 20);
        assert!((0..=10).contains(&changed));
        assert_eq!(describe(&bin), (4, 0));
        // Lists and maps may not be elements; the list may not be empty.
        let nested = vec![list(vec![list(vec![int(1)])]), int(4)];
        assert_eq!(
            modify_op(&mut None, code::ADD, nested).err(),
            Some(ResultCode::Parameter)
        );
        assert_eq!(
            modify_op(&mut None, code::ADD, vec![list(vec![]), int(4)]).err(),
            Some(ResultCode::Parameter)
        );
        // Integers hash by value, whatever width they were sent in.
        let mut wide = None;
        let mut narrow = None;
        let wide_payload = [
            0x94, 0x01, 0x91, 0xd3, 0, 0, 0, 0, 0, 0, 0, 0x2a, 0x08, 0x00,
        ];
        modify(&wide_payload, &mut wide).expect("adds");
        add(&mut narrow, &[int(42)], 8, 0);
        assert_eq!(wide, narrow);
    }

    #[test]
    fn fold_shrinks_index_bits_and_keeps_counts() {
        let vals0 = strings("key ", 0..128);
        let vals1 = strings("key ", 128..256);
        for index in 4..16i64 {
            for target in 4..=index {
                let mut bin = hll_with(index, 0, &vals0);
                let before = count(&bin);
                assert!(within(vals0.len(), before, index, 6.0));
                assert_eq!(
                    as_int(modify_op(&mut bin, code::UPDATE_COUNT, vec![])),
                    before
                );
                assert!(matches!(
                    modify_op(&mut bin, code::FOLD, vec![int(target)]),
                    Ok(Value::Nil)
                ));
                assert_eq!(describe(&bin), (target, 0));
                let folded = count(&bin);
                assert!(
                    within(vals0.len(), folded, target, 6.0),
                    "{index} -> {target}: {folded}"
                );
                assert_eq!(add(&mut bin, &vals0, -1, -1), 0, "{index} -> {target}");
                add(&mut bin, &vals1, -1, -1);
                assert!(within(256, count(&bin), target, 6.0));
                // Folding matches adding at the smaller size from the start.
                if target < index {
                    let direct = hll_with(target, 0, &vals0);
                    let mut folded_again = hll_with(index, 0, &vals0);
                    modify_op(&mut folded_again, code::FOLD, vec![int(target)]).expect("folds");
                    assert_eq!(folded_again, direct);
                }
            }
        }
    }

    #[test]
    fn fold_refusals_follow_aerospike() {
        let mut bin = None;
        init(&mut bin, 10, -1, 0).expect("creates");
        modify_op(&mut bin, code::FOLD, vec![int(4)]).expect("folds down");
        assert_eq!(
            modify_op(&mut bin, code::FOLD, vec![int(16)]).err(),
            Some(ResultCode::OpNotApplicable)
        );
        assert_eq!(
            modify_op(&mut None, code::FOLD, vec![int(4)]).err(),
            Some(ResultCode::BinNotFound)
        );
        let mut minhash = None;
        init(&mut minhash, 10, 8, 0).expect("creates");
        assert_eq!(
            modify_op(&mut minhash, code::FOLD, vec![int(4)]).err(),
            Some(ResultCode::OpNotApplicable)
        );
        assert_eq!(
            modify_op(&mut bin, code::FOLD, vec![]).err(),
            Some(ResultCode::Parameter)
        );
        assert_eq!(
            modify_op(&mut bin, code::FOLD, vec![int(3)]).err(),
            Some(ResultCode::Parameter)
        );
    }

    fn expect_set_union(index_bits: i64, folding: bool, allow_fold: bool) {
        let vals: Vec<Vec<Value>> = (0..3)
            .map(|i| strings(&format!("key{i} "), 0..85))
            .collect();
        let mut folded = false;
        let mut hlls = Vec::new();
        let mut expected = 0;
        for (i, sub) in vals.iter().enumerate() {
            let mut ix = index_bits;
            if folding {
                ix = (ix - i as i64).max(4);
                folded |= ix < index_bits;
            }
            let bin = hll_with(ix, -1, sub);
            assert!(within(sub.len(), count(&bin), ix, 6.0));
            hlls.push(hll_of(&bin));
            expected += sub.len();
        }
        let flags = if allow_fold { FLAG_ALLOW_FOLD } else { 0 };
        let mut bin = None;
        init(&mut bin, index_bits, -1, 0).expect("creates");
        let result = modify_op(
            &mut bin,
            code::UNION,
            vec![list(hlls.clone()), int(flags as i64)],
        );
        if folded && !allow_fold {
            assert_eq!(result.err(), Some(ResultCode::OpNotApplicable));
            return;
        }
        assert!(matches!(result, Ok(Value::Nil)));
        let union_count = count(&bin);
        let mut fresh = None;
        modify_op(&mut fresh, code::UNION, vec![list(hlls), int(0)]).expect("creates");
        assert_eq!(count(&fresh), union_count);
        assert!(
            within(expected, union_count, index_bits, 6.0),
            "{union_count} of {expected}"
        );
        for sub in &vals {
            assert_eq!(add(&mut bin, sub, index_bits, -1), 0);
            assert_eq!(count(&bin), union_count);
        }
    }

    #[test]
    fn set_union_merges_and_folds_only_when_allowed() {
        for index_bits in [4, 8, 12, 16] {
            for (folding, allow_fold) in
                [(false, false), (false, true), (true, false), (true, true)]
            {
                expect_set_union(index_bits, folding, allow_fold);
            }
        }
    }

    #[test]
    fn set_union_flags_follow_aerospike() {
        let other = hll_with(6, -1, &strings("key ", 0..256));
        let hlls = || list(vec![hll_of(&other)]);
        let union = |bin: &mut Bin, flags: u64| {
            modify_op(bin, code::UNION, vec![hlls(), int(flags as i64)])
        };
        let mut bin = None;
        union(&mut bin, FLAG_CREATE_ONLY).expect("creates");
        assert_eq!(bin, other, "a union of one HLL into nothing is that HLL");
        assert_eq!(
            union(&mut bin, FLAG_CREATE_ONLY).err(),
            Some(ResultCode::BinExists)
        );
        union(&mut bin, FLAG_UPDATE_ONLY).expect("updates");
        assert_eq!(
            union(&mut None, FLAG_UPDATE_ONLY).err(),
            Some(ResultCode::BinNotFound)
        );
        union(&mut bin, FLAG_CREATE_ONLY | FLAG_NO_FAIL).expect("skips");
        let mut missing = None;
        union(&mut missing, FLAG_UPDATE_ONLY | FLAG_NO_FAIL).expect("skips");
        assert_eq!(missing, None);
        // Fold down (8 -> 6) and up (4 stays 4).
        let mut high = None;
        init(&mut high, 8, -1, 0).expect("creates");
        assert_eq!(union(&mut high, 0).err(), Some(ResultCode::OpNotApplicable));
        union(&mut high, FLAG_ALLOW_FOLD).expect("folds");
        assert_eq!(describe(&high), (6, 0));
        let mut low = None;
        init(&mut low, 4, -1, 0).expect("creates");
        union(&mut low, FLAG_ALLOW_FOLD).expect("folds");
        assert_eq!(describe(&low), (4, 0));
        // A bin with minhash bits may not lose them without ALLOW_FOLD.
        let mut minhash = None;
        init(&mut minhash, 6, 8, 0).expect("creates");
        assert_eq!(
            union(&mut minhash, 0).err(),
            Some(ResultCode::OpNotApplicable)
        );
        union(&mut minhash, FLAG_ALLOW_FOLD).expect("folds");
        assert_eq!(describe(&minhash), (6, 0));
        // One HLL may be sent bare, not in a list.
        let mut bare = None;
        modify_op(&mut bare, code::UNION, vec![hll_of(&other)]).expect("creates");
        assert_eq!(bare, other);
    }

    #[test]
    fn refresh_and_get_count_on_missing_bins() {
        assert_eq!(
            modify_op(&mut None, code::UPDATE_COUNT, vec![]).err(),
            Some(ResultCode::BinNotFound)
        );
        assert!(matches!(
            read_op(&None, code::COUNT, vec![]),
            Ok(Value::Nil)
        ));
        let mut bin = hll_with(6, -1, &strings("key ", 0..256));
        let first = as_int(modify_op(&mut bin, code::UPDATE_COUNT, vec![]));
        assert_eq!(
            as_int(modify_op(&mut bin, code::UPDATE_COUNT, vec![])),
            first
        );
        assert!(within(256, count(&bin), 6, 6.0));
    }

    #[test]
    fn get_union_and_union_count_agree() {
        let vals: Vec<Vec<Value>> = (0..3)
            .map(|i| strings(&format!("key{i} "), 0..85))
            .collect();
        let hlls: Vec<Value> = vals
            .iter()
            .map(|sub| hll_of(&hll_with(14, -1, sub)))
            .collect();
        let bin = hll_with(14, -1, &vals[0]);
        let union = read_op(&bin, code::GET_UNION, vec![list(hlls.clone())]).expect("a union");
        let union_count = as_int(read_op(&bin, code::UNION_COUNT, vec![list(hlls)]));
        assert!(within(255, union_count, 14, 6.0), "{union_count}");
        let Value::Bytes { kind, data } = union else {
            panic!("expected an HLL, got {union:?}");
        };
        assert_eq!(kind, PARTICLE_HLL);
        assert_eq!(count(&Some((kind, data))), union_count);
    }

    #[test]
    fn similarity_and_intersect_count_estimate_overlap() {
        let common = strings("common", 0..2000);
        let vals: Vec<Vec<Value>> = (0..3)
            .map(|i| strings(&format!("key{i} "), 0..2000))
            .collect();
        for (index, minhash) in [(12, 16), (14, 30), (16, 24)] {
            let hlls: Vec<Value> = vals
                .iter()
                .map(|sub| {
                    let mut bin = hll_with(index, minhash, sub);
                    add(&mut bin, &common, -1, -1);
                    hll_of(&bin)
                })
                .collect();
            let mut bin = None;
            init(&mut bin, index, minhash, 0).expect("creates");
            modify_op(&mut bin, code::UNION, vec![list(hlls.clone())]).expect("unions");
            assert_eq!(describe(&bin), (index, minhash));
            // The bin (the union) with the three: the intersection is the common part.
            let similarity = as_float(read_op(&bin, code::SIMILARITY, vec![list(hlls.clone())]));
            let intersect = as_int(read_op(
                &bin,
                code::INTERSECT_COUNT,
                vec![list(hlls.clone())],
            ));
            let expected = 2000.0 / 8000.0;
            assert!(
                (similarity - expected).abs() < 0.05,
                "({index}, {minhash}): {similarity}"
            );
            assert!(
                within(2000, intersect, index, 12.0),
                "({index}, {minhash}): {intersect}"
            );
            // Two sketches (bin + one): similarity against its own union is |A| / |U|.
            let two = as_float(read_op(&bin, code::SIMILARITY, vec![hlls[0].clone()]));
            assert!((two - 0.5).abs() < 0.05, "{two}");
        }
    }

    #[test]
    fn empty_similarity_is_nan_and_intersects_nothing() {
        for (index, minhash) in legal_descriptions() {
            let mut bin = None;
            init(&mut bin, index, minhash, 0).expect("creates");
            let hlls = vec![list(vec![hll_of(&bin)])];
            assert!(
                as_float(read_op(&bin, code::SIMILARITY, hlls.clone())).is_nan(),
                "({index}, {minhash})"
            );
            assert_eq!(as_int(read_op(&bin, code::INTERSECT_COUNT, hlls)), 0);
        }
    }

    #[test]
    fn intersect_refusals_follow_aerospike() {
        let entries = strings("key ", 0..256);
        for index in [4, 8, 12, 16] {
            let bin = hll_with(index, 0, &entries);
            let hll = hll_of(&bin);
            let hmh = hll_of(&hll_with(index, 4, &entries));
            let two = list(vec![hll.clone(), hll.clone()]);
            let intersect = as_int(read_op(&bin, code::INTERSECT_COUNT, vec![two.clone()]));
            assert!((intersect as f64) < 1.8 * 256.0, "{intersect}");
            as_float(read_op(&bin, code::SIMILARITY, vec![two]));
            let three = list(vec![hll.clone(), hll.clone(), hll]);
            assert_eq!(
                read_op(&bin, code::INTERSECT_COUNT, vec![three.clone()]).err(),
                Some(ResultCode::Parameter)
            );
            assert_eq!(
                read_op(&bin, code::SIMILARITY, vec![three]).err(),
                Some(ResultCode::Parameter)
            );
            let hmhs = list(vec![hmh.clone(), hmh.clone()]);
            let intersect = as_int(read_op(&bin, code::INTERSECT_COUNT, vec![hmhs]));
            assert!((intersect as f64) < 1.8 * 256.0, "{intersect}");
            let hmhs = list(vec![hmh.clone(), hmh.clone(), hmh]);
            assert_eq!(
                read_op(&bin, code::INTERSECT_COUNT, vec![hmhs.clone()]).err(),
                Some(ResultCode::OpNotApplicable)
            );
            assert_eq!(
                read_op(&bin, code::SIMILARITY, vec![hmhs]).err(),
                Some(ResultCode::OpNotApplicable)
            );
        }
    }

    #[test]
    fn may_contain_finds_every_added_element() {
        let entries = strings("key ", 0..256);
        let bin = hll_with(12, 20, &entries);
        assert_eq!(
            as_int(read_op(
                &bin,
                code::MAY_CONTAIN,
                vec![list(entries.clone())]
            )),
            1
        );
        assert_eq!(
            as_int(read_op(
                &bin,
                code::MAY_CONTAIN,
                vec![list(entries[..1].to_vec())]
            )),
            1
        );
        let absent = strings("absent ", 0..64);
        assert_eq!(
            as_int(read_op(&bin, code::MAY_CONTAIN, vec![list(absent)])),
            0
        );
    }

    #[test]
    fn malformed_ops_and_bins_are_refused() {
        let bin = hll_with(8, 0, &strings("key ", 0..10));
        let (_, bytes) = bin.clone().expect("a bin");
        let stored = |bytes: Vec<u8>| Some((PARTICLE_HLL, bytes));
        // A stored HLL of the wrong size, flags or bits.
        let short = stored(bytes[..bytes.len() - 1].to_vec());
        assert_eq!(
            read_op(&short, code::COUNT, vec![]).err(),
            Some(ResultCode::Parameter)
        );
        let mut flagged = bytes.clone();
        flagged[0] = 1;
        assert_eq!(
            read_op(&stored(flagged), code::COUNT, vec![]).err(),
            Some(ResultCode::Parameter)
        );
        let mut bits = bytes.clone();
        bits[1] = 17;
        assert_eq!(
            read_op(&stored(bits), code::COUNT, vec![]).err(),
            Some(ResultCode::Parameter)
        );
        assert_eq!(
            read_op(&stored(vec![]), code::COUNT, vec![]).err(),
            Some(ResultCode::Parameter)
        );
        let mut short = short;
        assert_eq!(
            modify_op(&mut short, code::ADD, vec![list(vec![int(1)])]).err(),
            Some(ResultCode::Parameter)
        );
        // Another particle type.
        let other = Some((3u8, b"text".to_vec()));
        assert_eq!(
            read_op(&other, code::COUNT, vec![]).err(),
            Some(ResultCode::IncompatibleType)
        );
        let mut other = other;
        assert_eq!(
            init(&mut other, 8, 0, 0).err(),
            Some(ResultCode::IncompatibleType)
        );
        // Bad payloads.
        let mut target = bin.clone();
        for bad in [
            vec![],
            vec![0x90],
            vec![0x01],
            vec![0x91],
            vec![0x92, 0x00],
            vec![0x81, 0x00, 0x00],
        ] {
            assert_eq!(
                modify(&bad, &mut target).err(),
                Some(ResultCode::Parameter),
                "{bad:?}"
            );
            assert_eq!(
                read(&bad, Some((PARTICLE_HLL, &bytes))).err(),
                Some(ResultCode::Parameter)
            );
        }
        assert_eq!(read_op(&bin, 57, vec![]).err(), Some(ResultCode::Parameter));
        assert_eq!(
            read_op(&bin, code::INIT, vec![]).err(),
            Some(ResultCode::Parameter)
        );
        assert_eq!(
            modify_op(&mut target, code::COUNT, vec![]).err(),
            Some(ResultCode::Parameter)
        );
        assert_eq!(
            modify_op(&mut target, 5, vec![]).err(),
            Some(ResultCode::Parameter)
        );
        assert_eq!(
            read_op(&bin, code::COUNT, vec![int(1)]).err(),
            Some(ResultCode::Parameter)
        );
        assert_eq!(
            modify_op(&mut target, code::UPDATE_COUNT, vec![int(1)]).err(),
            Some(ResultCode::Parameter)
        );
        let five = vec![int(8), int(0), int(0), int(0)];
        assert_eq!(
            modify_op(&mut target, code::INIT, five).err(),
            Some(ResultCode::Parameter)
        );
        assert_eq!(
            init(&mut target, 8, 0, 16).err(),
            Some(ResultCode::Parameter),
            "unknown flag"
        );
        // Bad HLL arguments: truncated, wrong size, bad flags, not bytes.
        let mut bad_sketches = Vec::new();
        let good = bytes.clone();
        bad_sketches.push(good[..good.len() - 1].to_vec());
        bad_sketches.push(good[..5].to_vec());
        let mut flagged = good.clone();
        flagged[0] = 2;
        bad_sketches.push(flagged);
        let mut big = good.clone();
        big[1] = 16;
        bad_sketches.push(big);
        for sketch in bad_sketches {
            let arg = list(vec![Value::Bytes {
                kind: PARTICLE_HLL,
                data: sketch,
            }]);
            assert_eq!(
                read_op(&bin, code::UNION_COUNT, vec![arg.clone()]).err(),
                Some(ResultCode::Parameter)
            );
            assert_eq!(
                modify_op(&mut target, code::UNION, vec![arg]).err(),
                Some(ResultCode::Parameter)
            );
        }
        assert_eq!(
            read_op(&bin, code::GET_UNION, vec![list(vec![int(1)])]).err(),
            Some(ResultCode::Parameter)
        );
        assert_eq!(
            read_op(&bin, code::GET_UNION, vec![list(vec![])]).err(),
            Some(ResultCode::Parameter)
        );
    }

    #[test]
    fn op_codes_split_into_reads_and_modifies() {
        for code in 0..=4 {
            assert_eq!(is_modify(code), Some(true));
        }
        for code in 50..=56 {
            assert_eq!(is_modify(code), Some(false));
        }
        for code in [5, 49, 57, 255] {
            assert_eq!(is_modify(code), None);
        }
    }

    #[test]
    fn random_distinct_adds_estimate_within_three_standard_errors() {
        let seed = std::env::var("OSPREY_HLL_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
                now.map_or(1, |elapsed| elapsed.as_nanos() as u64)
            });
        println!("hll estimate test seed: {seed} (replay with OSPREY_HLL_SEED={seed})");
        let mut rng = SmallRng::seed_from_u64(seed);
        for index_bits in [8, 10, 12, 14] {
            let n = rng.random_range(2_000..20_000usize);
            let mut values: Vec<i64> = (0..n).map(|_| rng.random::<i64>()).collect();
            values.sort_unstable();
            values.dedup();
            let mut bin = None;
            for chunk in values.chunks(1000) {
                let chunk: Vec<Value> = chunk.iter().map(|&v| int(v)).collect();
                add(&mut bin, &chunk, index_bits, 0);
            }
            let estimate = count(&bin);
            assert!(
                within(values.len(), estimate, index_bits, 3.0),
                "seed {seed}: {estimate} for {} distinct values at {index_bits} index bits",
                values.len()
            );
        }
    }
}
