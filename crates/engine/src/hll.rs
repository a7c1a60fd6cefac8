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
mod tests;
