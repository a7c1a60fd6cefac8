//! Redis's serialization of one value (what DUMP answers and RESTORE takes): the value's RDB
//! type byte and encoding, the RDB version (2 bytes, little-endian) and a CRC-64 (Jones,
//! reflected, as Redis's `crc64.c`) of everything before it, little-endian.
//!
//! Decoding accepts what redis-server 7.0 writes: strings (plain, integer-encoded,
//! LZF-compressed), lists (linked list, ziplist, quicklist of ziplists, quicklist 2 of
//! listpacks and plain nodes), sets (plain, intset), sorted sets (plain with text or binary
//! scores, ziplist, listpack) and hashes (plain, ziplist, listpack). Encoding writes the plain
//! forms (string, linked list, set, sorted set with binary scores, hash), which every Redis
//! since 4.0 reads.
//!
//! Invariants:
//! - A payload whose version is newer than [`RDB_VERSION`] or whose checksum is wrong is
//!   refused before anything in it is read.
//! - Nothing is allocated by a declared length: every length is checked against the bytes
//!   left before it is used, and collections grow as elements are read (each takes at least a
//!   byte). An LZF string's declared length is bounded by what its compressed bytes can
//!   expand to.
//! - Decoding never panics: every read is checked (a unit test feeds random bytes).

/// The RDB version Redis 7.0 writes (and the newest this reads).
pub const RDB_VERSION: u16 = 10;

/// A Redis value as a dump carries it.
#[derive(Clone, Debug, PartialEq)]
pub enum RdbValue {
    /// A string.
    String(Vec<u8>),
    /// A list, head first.
    List(Vec<Vec<u8>>),
    /// A set's members.
    Set(Vec<Vec<u8>>),
    /// A sorted set's members and scores.
    ZSet(Vec<(Vec<u8>, f64)>),
    /// A hash's fields and values.
    Hash(Vec<(Vec<u8>, Vec<u8>)>),
}

/// Why a payload was refused, in Redis's words ([`DumpError::text`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DumpError {
    /// Too short, a newer RDB version, or a wrong checksum.
    VersionOrChecksum,
    /// The checksum holds but the value is malformed, empty, or of a type not read here.
    BadFormat,
}

impl DumpError {
    /// Redis's error text.
    pub fn text(self) -> &'static str {
        match self {
            DumpError::VersionOrChecksum => "ERR DUMP payload version or checksum are wrong",
            DumpError::BadFormat => "ERR Bad data format",
        }
    }
}

/// The RDB type bytes read and written (Redis's `rdb.h`).
mod rdb_type {
    pub const STRING: u8 = 0;
    pub const LIST: u8 = 1;
    pub const SET: u8 = 2;
    pub const ZSET: u8 = 3;
    pub const HASH: u8 = 4;
    pub const ZSET_2: u8 = 5;
    pub const LIST_ZIPLIST: u8 = 10;
    pub const SET_INTSET: u8 = 11;
    pub const ZSET_ZIPLIST: u8 = 12;
    pub const HASH_ZIPLIST: u8 = 13;
    pub const LIST_QUICKLIST: u8 = 14;
    pub const HASH_LISTPACK: u8 = 16;
    pub const ZSET_LISTPACK: u8 = 17;
    pub const LIST_QUICKLIST_2: u8 = 18;
    pub const SET_LISTPACK: u8 = 20;
}

/// Bytes after the value: the version (2) and the checksum (8).
const FOOTER_BYTES: usize = 10;

/// The dump of `value`: plain encodings, version [`RDB_VERSION`], checksum.
pub fn encode(value: &RdbValue) -> Vec<u8> {
    let mut out = Vec::new();
    match value {
        RdbValue::String(bytes) => {
            out.push(rdb_type::STRING);
            write_string(&mut out, bytes);
        }
        RdbValue::List(elements) | RdbValue::Set(elements) => {
            let is_list = matches!(value, RdbValue::List(_));
            out.push(if is_list {
                rdb_type::LIST
            } else {
                rdb_type::SET
            });
            write_length(&mut out, elements.len() as u64);
            elements.iter().for_each(|e| write_string(&mut out, e));
        }
        RdbValue::ZSet(entries) => {
            out.push(rdb_type::ZSET_2);
            write_length(&mut out, entries.len() as u64);
            for (member, score) in entries {
                write_string(&mut out, member);
                out.extend_from_slice(&score.to_le_bytes());
            }
        }
        RdbValue::Hash(pairs) => {
            out.push(rdb_type::HASH);
            write_length(&mut out, pairs.len() as u64);
            for (field, value) in pairs {
                write_string(&mut out, field);
                write_string(&mut out, value);
            }
        }
    }
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let checksum = crc64(0, &out);
    out.extend_from_slice(&checksum.to_le_bytes());
    out
}

/// The value of a dump `payload`.
///
/// # Errors
/// [`DumpError::VersionOrChecksum`] before anything is read when the footer is wrong;
/// [`DumpError::BadFormat`] when the value is malformed or empty.
pub fn decode(payload: &[u8]) -> Result<RdbValue, DumpError> {
    let body = verified_body(payload)?;
    let mut reader = Reader { bytes: body };
    let value = reader.value().ok_or(DumpError::BadFormat)?;
    let empty = match &value {
        RdbValue::String(_) => false,
        RdbValue::List(e) | RdbValue::Set(e) => e.is_empty(),
        RdbValue::ZSet(e) => e.is_empty(),
        RdbValue::Hash(e) => e.is_empty(),
    };
    if empty {
        return Err(DumpError::BadFormat);
    }
    Ok(value)
}

/// RDB opcodes of function libraries (Redis's `rdb.h`).
mod rdb_opcode {
    /// A library: its code as an RDB string (what FUNCTION DUMP writes).
    pub const FUNCTION_2: u8 = 245;
    /// The pre-release form of Redis 7.0's release candidates.
    pub const FUNCTION_PRE_GA: u8 = 246;
}

/// Why a FUNCTION RESTORE payload was refused, in Redis's words ([`FunctionsError::text`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FunctionsError {
    /// Too short, a newer RDB version, or a wrong checksum.
    VersionOrChecksum,
    /// A library record's opcode could not be read.
    NoType,
    /// The pre-release function record.
    PreGa,
    /// A record that is not a library.
    NotAFunction,
    /// A library's code could not be read.
    BadLibrary,
}

impl FunctionsError {
    /// Redis's error text.
    pub fn text(self) -> &'static str {
        match self {
            FunctionsError::VersionOrChecksum => "ERR DUMP payload version or checksum are wrong",
            FunctionsError::NoType => "ERR can not read data type",
            FunctionsError::PreGa => "ERR Pre-GA function format not supported",
            FunctionsError::NotAFunction => "ERR given type is not a function",
            FunctionsError::BadLibrary => "ERR Failed loading library payload",
        }
    }
}

/// FUNCTION DUMP's payload: each library's code as an RDB function record, then the version
/// and checksum, as a value's dump.
pub fn encode_functions<'a>(codes: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = Vec::new();
    for code in codes {
        out.push(rdb_opcode::FUNCTION_2);
        write_string(&mut out, code);
    }
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let checksum = crc64(0, &out);
    out.extend_from_slice(&checksum.to_le_bytes());
    out
}

/// The libraries' codes of a FUNCTION RESTORE `payload`, in its order.
///
/// # Errors
/// [`FunctionsError::VersionOrChecksum`] before anything is read when the footer is wrong;
/// the others for a record that is not a readable library.
pub fn decode_functions(payload: &[u8]) -> Result<Vec<Vec<u8>>, FunctionsError> {
    let body = verified_body(payload).map_err(|_| FunctionsError::VersionOrChecksum)?;
    let mut reader = Reader { bytes: body };
    let mut codes = Vec::new();
    while !reader.bytes.is_empty() {
        match reader.byte().ok_or(FunctionsError::NoType)? {
            rdb_opcode::FUNCTION_2 => {}
            rdb_opcode::FUNCTION_PRE_GA => return Err(FunctionsError::PreGa),
            _ => return Err(FunctionsError::NotAFunction),
        }
        codes.push(reader.string().ok_or(FunctionsError::BadLibrary)?);
    }
    Ok(codes)
}

/// The value bytes of a payload whose version and checksum hold.
fn verified_body(payload: &[u8]) -> Result<&[u8], DumpError> {
    let Some(footer_start) = payload.len().checked_sub(FOOTER_BYTES) else {
        return Err(DumpError::VersionOrChecksum);
    };
    let (body_and_version, checksum) = payload.split_at(footer_start + 2);
    let version = u16::from_le_bytes([payload[footer_start], payload[footer_start + 1]]);
    if version > RDB_VERSION {
        return Err(DumpError::VersionOrChecksum);
    }
    let expected = u64::from_le_bytes(checksum.try_into().expect("8 checksum bytes"));
    if crc64(0, body_and_version) != expected {
        return Err(DumpError::VersionOrChecksum);
    }
    Ok(&payload[..footer_start])
}

/// CRC-64 as Redis computes it (Jones polynomial, reflected, no final xor), from `crc`.
pub fn crc64(crc: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(crc, |crc, &byte| {
        CRC64_TABLE[((crc ^ u64::from(byte)) & 0xff) as usize] ^ (crc >> 8)
    })
}

/// The Jones polynomial 0xad93d23594c935a9, bit-reversed for the reflected algorithm.
const CRC64_POLY_REFLECTED: u64 = 0x95ac_9329_ac4b_c9b5;

static CRC64_TABLE: [u64; 256] = crc64_table();

const fn crc64_table() -> [u64; 256] {
    let mut table = [0u64; 256];
    let mut index = 0;
    while index < 256 {
        let mut crc = index as u64;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ CRC64_POLY_REFLECTED
            } else {
                crc >> 1
            };
            bit += 1;
        }
        table[index] = crc;
        index += 1;
    }
    table
}

/// An RDB length: 6 bits, 14 bits, 32 or 64 bits big-endian.
fn write_length(out: &mut Vec<u8>, length: u64) {
    if length < 1 << 6 {
        out.push(length as u8);
    } else if length < 1 << 14 {
        out.push(0x40 | (length >> 8) as u8);
        out.push(length as u8);
    } else if let Ok(length) = u32::try_from(length) {
        out.push(0x80);
        out.extend_from_slice(&length.to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&length.to_be_bytes());
    }
}

/// An RDB string, its bytes as they are (Redis reads any string so).
fn write_string(out: &mut Vec<u8>, bytes: &[u8]) {
    write_length(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// What a length byte announces.
enum Length {
    /// A length.
    Plain(u64),
    /// A special string encoding (Redis's `RDB_ENC_*`): 0 int8, 1 int16, 2 int32, 3 LZF.
    Encoded(u8),
}

/// Reads a value's bytes; every method answers `None` on malformed or short input.
struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, count: usize) -> Option<&'a [u8]> {
        if count > self.bytes.len() {
            return None;
        }
        let (taken, rest) = self.bytes.split_at(count);
        self.bytes = rest;
        Some(taken)
    }

    fn byte(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    fn length_or_encoding(&mut self) -> Option<Length> {
        let first = self.byte()?;
        Some(match first >> 6 {
            0 => Length::Plain(u64::from(first & 0x3f)),
            1 => Length::Plain(u64::from(first & 0x3f) << 8 | u64::from(self.byte()?)),
            2 if first == 0x80 => Length::Plain(u64::from(u32::from_be_bytes(
                self.take(4)?.try_into().ok()?,
            ))),
            2 if first == 0x81 => Length::Plain(u64::from_be_bytes(self.take(8)?.try_into().ok()?)),
            2 => return None,
            _ => Length::Encoded(first & 0x3f),
        })
    }

    /// A length that must not exceed the bytes left (each counted thing takes a byte or more).
    fn length(&mut self) -> Option<usize> {
        match self.length_or_encoding()? {
            Length::Plain(length) => usize::try_from(length).ok(),
            Length::Encoded(_) => None,
        }
    }

    fn string(&mut self) -> Option<Vec<u8>> {
        match self.length_or_encoding()? {
            Length::Plain(length) => Some(self.take(usize::try_from(length).ok()?)?.to_vec()),
            Length::Encoded(0) => Some(i64::from(self.byte()? as i8).to_string().into_bytes()),
            Length::Encoded(1) => {
                let value = i16::from_le_bytes(self.take(2)?.try_into().ok()?);
                Some(value.to_string().into_bytes())
            }
            Length::Encoded(2) => {
                let value = i32::from_le_bytes(self.take(4)?.try_into().ok()?);
                Some(value.to_string().into_bytes())
            }
            Length::Encoded(3) => {
                let compressed_bytes = self.length()?;
                let length = self.length()?;
                lzf_decompress(self.take(compressed_bytes)?, length)
            }
            Length::Encoded(_) => None,
        }
    }

    /// A score of the old sorted-set type: a length byte, then text; 253 NaN, 254 +inf, 255
    /// -inf.
    fn text_double(&mut self) -> Option<f64> {
        match self.byte()? {
            253 => None,
            254 => Some(f64::INFINITY),
            255 => Some(f64::NEG_INFINITY),
            length => {
                let text = std::str::from_utf8(self.take(usize::from(length))?).ok()?;
                text.parse().ok().filter(|score: &f64| !score.is_nan())
            }
        }
    }

    fn binary_double(&mut self) -> Option<f64> {
        let score = f64::from_le_bytes(self.take(8)?.try_into().ok()?);
        (!score.is_nan()).then_some(score)
    }

    fn strings(&mut self) -> Option<Vec<Vec<u8>>> {
        let count = self.length()?;
        let mut elements = Vec::new();
        for _ in 0..count {
            elements.push(self.string()?);
        }
        Some(elements)
    }

    fn value(&mut self) -> Option<RdbValue> {
        let value = match self.byte()? {
            rdb_type::STRING => RdbValue::String(self.string()?),
            rdb_type::LIST => RdbValue::List(self.strings()?),
            rdb_type::SET => RdbValue::Set(self.strings()?),
            rdb_type::ZSET => RdbValue::ZSet(self.zset_plain(false)?),
            rdb_type::ZSET_2 => RdbValue::ZSet(self.zset_plain(true)?),
            rdb_type::HASH => RdbValue::Hash(self.hash_plain()?),
            rdb_type::LIST_ZIPLIST => RdbValue::List(ziplist(&self.string()?)?),
            rdb_type::SET_INTSET => RdbValue::Set(intset(&self.string()?)?),
            rdb_type::SET_LISTPACK => RdbValue::Set(listpack(&self.string()?)?),
            rdb_type::ZSET_ZIPLIST => RdbValue::ZSet(scored(ziplist(&self.string()?)?)?),
            rdb_type::ZSET_LISTPACK => RdbValue::ZSet(scored(listpack(&self.string()?)?)?),
            rdb_type::HASH_ZIPLIST => RdbValue::Hash(pairs(ziplist(&self.string()?)?)?),
            rdb_type::HASH_LISTPACK => RdbValue::Hash(pairs(listpack(&self.string()?)?)?),
            rdb_type::LIST_QUICKLIST => self.quicklist(false)?,
            rdb_type::LIST_QUICKLIST_2 => self.quicklist(true)?,
            _ => return None,
        };
        Some(value)
    }

    /// A plain hash: a count of pairs, then each field and its value.
    fn hash_plain(&mut self) -> Option<Vec<(Vec<u8>, Vec<u8>)>> {
        let count = self.length()?;
        let mut pairs = Vec::new();
        for _ in 0..count {
            pairs.push((self.string()?, self.string()?));
        }
        Some(pairs)
    }

    /// A plain sorted set, with text scores (the old type) or binary ones.
    fn zset_plain(&mut self, binary_scores: bool) -> Option<Vec<(Vec<u8>, f64)>> {
        let count = self.length()?;
        let mut entries = Vec::new();
        for _ in 0..count {
            let member = self.string()?;
            let score = if binary_scores {
                self.binary_double()?
            } else {
                self.text_double()?
            };
            entries.push((member, score));
        }
        Some(entries)
    }

    fn quicklist(&mut self, version_2: bool) -> Option<RdbValue> {
        let nodes = self.length()?;
        let mut elements = Vec::new();
        for _ in 0..nodes {
            if !version_2 {
                elements.extend(ziplist(&self.string()?)?);
                continue;
            }
            match self.length()? {
                // A plain node: one element, as it is.
                1 => elements.push(self.string()?),
                2 => elements.extend(listpack(&self.string()?)?),
                _ => return None,
            }
        }
        Some(RdbValue::List(elements))
    }
}

/// Consecutive elements as (field, value) pairs; `None` for an odd count.
fn pairs(elements: Vec<Vec<u8>>) -> Option<Vec<(Vec<u8>, Vec<u8>)>> {
    if !elements.len().is_multiple_of(2) {
        return None;
    }
    let mut iter = elements.into_iter();
    let mut out = Vec::new();
    while let (Some(field), Some(value)) = (iter.next(), iter.next()) {
        out.push((field, value));
    }
    Some(out)
}

/// Consecutive elements as (member, score) pairs, scores as text.
fn scored(elements: Vec<Vec<u8>>) -> Option<Vec<(Vec<u8>, f64)>> {
    pairs(elements)?
        .into_iter()
        .map(|(member, score)| {
            let score = super::parse_double(&score)?;
            Some((member, score))
        })
        .collect()
}

/// LZF decompression (Redis's `lzf_d.c` format) of `input` into exactly `length` bytes; the
/// output grows as it is produced, never past `length`.
fn lzf_decompress(input: &[u8], length: usize) -> Option<Vec<u8>> {
    // Each input byte yields at most 264 / 2 output bytes (a 2-byte back reference of 264).
    if length > input.len().saturating_mul(LZF_EXPANSION_MAX) {
        return None;
    }
    let mut out: Vec<u8> = Vec::new();
    let mut position = 0;
    while position < input.len() {
        let control = usize::from(input[position]);
        position += 1;
        if control < 32 {
            let literal = input.get(position..position + control + 1)?;
            if out.len() + literal.len() > length {
                return None;
            }
            out.extend_from_slice(literal);
            position += control + 1;
            continue;
        }
        let mut run = control >> 5;
        if run == 7 {
            run += usize::from(*input.get(position)?);
            position += 1;
        }
        let back = ((control & 0x1f) << 8) + usize::from(*input.get(position)?) + 1;
        position += 1;
        let start = out.len().checked_sub(back)?;
        if out.len() + run + 2 > length {
            return None;
        }
        for offset in 0..run + 2 {
            out.push(out[start + offset]);
        }
    }
    (out.len() == length).then_some(out)
}

/// The most an LZF input byte can expand to.
const LZF_EXPANSION_MAX: usize = 132;

/// The entries of a listpack (Redis's `listpack.c`): total bytes, count, entries, 0xFF.
fn listpack(bytes: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut reader = Reader { bytes };
    let total = u32::from_le_bytes(reader.take(4)?.try_into().ok()?);
    if usize::try_from(total).ok()? != bytes.len() {
        return None;
    }
    reader.take(2)?;
    let mut elements = Vec::new();
    loop {
        let start_left = reader.bytes.len();
        let first = reader.byte()?;
        let element = match first {
            0xff => break,
            b if b & 0x80 == 0 => (b & 0x7f).to_string().into_bytes(),
            b if b & 0xc0 == 0x80 => reader.take(usize::from(b & 0x3f))?.to_vec(),
            b if b & 0xe0 == 0xc0 => {
                let raw = (i64::from(b & 0x1f) << 8) | i64::from(reader.byte()?);
                let value = if raw >= 1 << 12 { raw - (1 << 13) } else { raw };
                value.to_string().into_bytes()
            }
            b if b & 0xf0 == 0xe0 => {
                let length = (usize::from(b & 0x0f) << 8) | usize::from(reader.byte()?);
                reader.take(length)?.to_vec()
            }
            0xf0 => {
                let length = u32::from_le_bytes(reader.take(4)?.try_into().ok()?);
                reader.take(usize::try_from(length).ok()?)?.to_vec()
            }
            0xf1 => le_integer(reader.take(2)?).to_string().into_bytes(),
            0xf2 => le_integer(reader.take(3)?).to_string().into_bytes(),
            0xf3 => le_integer(reader.take(4)?).to_string().into_bytes(),
            0xf4 => le_integer(reader.take(8)?).to_string().into_bytes(),
            _ => return None,
        };
        let entry_bytes = start_left - reader.bytes.len();
        reader.take(backlen_bytes(entry_bytes))?;
        elements.push(element);
    }
    Some(elements)
}

/// How many bytes a listpack entry's back length takes, for an entry of `entry_bytes`.
fn backlen_bytes(entry_bytes: usize) -> usize {
    match entry_bytes {
        0..128 => 1,
        128..16_384 => 2,
        16_384..2_097_152 => 3,
        2_097_152..268_435_456 => 4,
        _ => 5,
    }
}

/// A signed little-endian integer of 1 to 8 bytes.
fn le_integer(bytes: &[u8]) -> i64 {
    let mut widened = [0u8; 8];
    widened[..bytes.len()].copy_from_slice(bytes);
    let shift = 64 - 8 * bytes.len() as u32;
    (i64::from_le_bytes(widened) << shift) >> shift
}

/// The entries of a ziplist (Redis's `ziplist.c`): bytes, tail, count, entries, 0xFF.
fn ziplist(bytes: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut reader = Reader { bytes };
    let total = u32::from_le_bytes(reader.take(4)?.try_into().ok()?);
    if usize::try_from(total).ok()? != bytes.len() {
        return None;
    }
    reader.take(6)?;
    let mut elements = Vec::new();
    loop {
        let previous = reader.byte()?;
        if previous == 0xff {
            break;
        }
        if previous == 0xfe {
            reader.take(4)?;
        }
        let encoding = reader.byte()?;
        let element = match encoding >> 6 {
            0 => reader.take(usize::from(encoding & 0x3f))?.to_vec(),
            1 => {
                let length = (usize::from(encoding & 0x3f) << 8) | usize::from(reader.byte()?);
                reader.take(length)?.to_vec()
            }
            2 => {
                let length = u32::from_be_bytes(reader.take(4)?.try_into().ok()?);
                reader.take(usize::try_from(length).ok()?)?.to_vec()
            }
            _ => ziplist_integer(&mut reader, encoding)?
                .to_string()
                .into_bytes(),
        };
        elements.push(element);
    }
    Some(elements)
}

fn ziplist_integer(reader: &mut Reader<'_>, encoding: u8) -> Option<i64> {
    Some(match encoding {
        0xc0 => le_integer(reader.take(2)?),
        0xd0 => le_integer(reader.take(4)?),
        0xe0 => le_integer(reader.take(8)?),
        0xf0 => le_integer(reader.take(3)?),
        0xfe => le_integer(reader.take(1)?),
        0xf1..=0xfd => i64::from(encoding & 0x0f) - 1,
        _ => return None,
    })
}

/// The members of an intset: encoding (2, 4 or 8 bytes a member), count, members.
fn intset(bytes: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut reader = Reader { bytes };
    let width = u32::from_le_bytes(reader.take(4)?.try_into().ok()?);
    let count = u32::from_le_bytes(reader.take(4)?.try_into().ok()?);
    if !matches!(width, 2 | 4 | 8) {
        return None;
    }
    let width = usize::try_from(width).ok()?;
    let count = usize::try_from(count).ok()?;
    if count.checked_mul(width)? != reader.bytes.len() {
        return None;
    }
    Some(
        reader
            .bytes
            .chunks_exact(width)
            .map(|member| le_integer(member).to_string().into_bytes())
            .collect(),
    )
}

#[cfg(test)]
mod tests;
