//! Redis's serialization of one value (what DUMP answers and RESTORE takes): the value's RDB
//! type byte and encoding, the RDB version (2 bytes, little-endian) and a CRC-64 (Jones,
//! reflected, as Redis's `crc64.c`) of everything before it, little-endian.
//!
//! Decoding accepts what redis-server 7.0 writes: strings (plain, integer-encoded,
//! LZF-compressed), lists (linked list, ziplist, quicklist of ziplists, quicklist 2 of
//! listpacks and plain nodes), sets (plain, intset), sorted sets (plain with text or binary
//! scores, ziplist, listpack), hashes (plain, ziplist, listpack) and streams (`rdb/stream.rs`).
//! Encoding writes the plain forms (string, linked list, set, sorted set with binary scores,
//! hash), which every Redis since 4.0 reads, and streams as Redis 7.0 writes them.
//!
//! The value decoders read from an [`Input`]: a payload in memory here, or an RDB file as it
//! is read (`rdb_file.rs`), so a dump and a file share one decoder for each encoding.
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
    /// A stream: entries, counters and consumer groups.
    Stream(Box<RdbStream>),
}

impl RdbValue {
    /// About how many bytes its elements hold (what bounds a batch of values in memory).
    pub fn size_bytes_estimate(&self) -> usize {
        let lengths = |elements: &[Vec<u8>]| elements.iter().map(Vec::len).sum::<usize>();
        match self {
            RdbValue::String(bytes) => bytes.len(),
            RdbValue::List(elements) | RdbValue::Set(elements) => lengths(elements),
            RdbValue::ZSet(entries) => entries.iter().map(|(m, _)| m.len() + 8).sum(),
            RdbValue::Hash(pairs) => pairs.iter().map(|(f, v)| f.len() + v.len()).sum(),
            RdbValue::Stream(stream) => stream.entries.iter().map(|(_, f)| lengths(f) + 16).sum(),
        }
    }
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
pub(super) mod rdb_type {
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
    pub const STREAM_LISTPACKS: u8 = 15;
    pub const STREAM_LISTPACKS_2: u8 = 19;
    pub const STREAM_LISTPACKS_3: u8 = 21;
    /// A module's value, before and after Redis 5's module format.
    pub const MODULE_PRE_GA: u8 = 6;
    pub const MODULE_2: u8 = 7;
    /// The zipmap hash of Redis before 2.6, which Redis 7.0 still reads.
    pub const HASH_ZIPMAP: u8 = 9;
}

/// Bytes after the value: the version (2) and the checksum (8).
const FOOTER_BYTES: usize = 10;

/// The dump of `value`: plain encodings, version [`RDB_VERSION`], checksum.
pub fn encode(value: &RdbValue) -> Vec<u8> {
    let mut out = Vec::new();
    write_value(&mut out, value);
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let checksum = crc64(0, &out);
    out.extend_from_slice(&checksum.to_le_bytes());
    out
}

/// Appends `value`'s type byte and its plain encoding (a stream as Redis 7.0 writes one).
pub(super) fn write_value(out: &mut Vec<u8>, value: &RdbValue) {
    out.push(value_type_of(value));
    write_value_body(out, value);
}

/// The RDB type [`write_value_body`] writes `value` as.
pub(super) fn value_type_of(value: &RdbValue) -> u8 {
    match value {
        RdbValue::String(_) => rdb_type::STRING,
        RdbValue::List(_) => rdb_type::LIST,
        RdbValue::Set(_) => rdb_type::SET,
        RdbValue::ZSet(_) => rdb_type::ZSET_2,
        RdbValue::Hash(_) => rdb_type::HASH,
        RdbValue::Stream(_) => rdb_type::STREAM_LISTPACKS_2,
    }
}

/// Appends `value`'s plain encoding, without its type byte.
pub(super) fn write_value_body(out: &mut Vec<u8>, value: &RdbValue) {
    match value {
        RdbValue::String(bytes) => write_string(out, bytes),
        RdbValue::List(elements) | RdbValue::Set(elements) => {
            write_length(out, elements.len() as u64);
            elements.iter().for_each(|e| write_string(out, e));
        }
        RdbValue::ZSet(entries) => {
            write_length(out, entries.len() as u64);
            for (member, score) in entries {
                write_string(out, member);
                out.extend_from_slice(&score.to_le_bytes());
            }
        }
        RdbValue::Hash(pairs) => {
            write_length(out, pairs.len() as u64);
            for (field, value) in pairs {
                write_string(out, field);
                write_string(out, value);
            }
        }
        RdbValue::Stream(stream) => stream::write(out, stream),
    }
}

/// Whether `value_type` is a value type [`Reader::value_of_type`] reads.
pub(super) fn is_value_type(value_type: u8) -> bool {
    matches!(
        value_type,
        rdb_type::STRING
            | rdb_type::LIST
            | rdb_type::SET
            | rdb_type::ZSET
            | rdb_type::HASH
            | rdb_type::ZSET_2
            | rdb_type::LIST_ZIPLIST
            | rdb_type::SET_INTSET
            | rdb_type::ZSET_ZIPLIST
            | rdb_type::HASH_ZIPLIST
            | rdb_type::LIST_QUICKLIST
            | rdb_type::STREAM_LISTPACKS
            | rdb_type::HASH_LISTPACK
            | rdb_type::ZSET_LISTPACK
            | rdb_type::LIST_QUICKLIST_2
            | rdb_type::STREAM_LISTPACKS_2
            | rdb_type::SET_LISTPACK
            | rdb_type::STREAM_LISTPACKS_3
    )
}

/// The value of a dump `payload`.
///
/// # Errors
/// [`DumpError::VersionOrChecksum`] before anything is read when the footer is wrong;
/// [`DumpError::BadFormat`] when the value is malformed or empty.
pub fn decode(payload: &[u8]) -> Result<RdbValue, DumpError> {
    let body = verified_body(payload)?;
    let mut reader = Reader::new(body);
    let value = reader.value().ok_or(DumpError::BadFormat)?;
    if !reader.input.is_empty() {
        return Err(DumpError::BadFormat);
    }
    let empty = match &value {
        RdbValue::String(_) | RdbValue::Stream(_) => false,
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
pub(super) mod rdb_opcode {
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
    let mut reader = Reader::new(body);
    let mut codes = Vec::new();
    while !reader.input.is_empty() {
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
pub(super) fn write_length(out: &mut Vec<u8>, length: u64) {
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
pub(super) fn write_string(out: &mut Vec<u8>, bytes: &[u8]) {
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

/// Where a [`Reader`]'s bytes come from: a payload in memory, or a file as it is read.
pub(super) trait Input {
    /// The next `count` bytes; `None` when fewer are left (or they cannot be read).
    fn take(&mut self, count: usize) -> Option<&[u8]>;

    /// The next `count` bytes, owned. An input that reads a file overrides it so that the
    /// bytes are not copied twice; none grows the vector before the bytes are there.
    fn take_vec(&mut self, count: usize) -> Option<Vec<u8>> {
        self.take(count).map(<[u8]>::to_vec)
    }
}

impl Input for &[u8] {
    fn take(&mut self, count: usize) -> Option<&[u8]> {
        split_front(self, count)
    }
}

/// The first `count` bytes of `input`, which then starts after them; `None` when fewer.
fn split_front<'a>(input: &mut &'a [u8], count: usize) -> Option<&'a [u8]> {
    if count > input.len() {
        return None;
    }
    let (taken, rest) = input.split_at(count);
    *input = rest;
    Some(taken)
}

/// Reads values from an [`Input`]; every method answers `None` on malformed or short input.
pub(super) struct Reader<I> {
    pub(super) input: I,
}

impl<I: Input> Reader<I> {
    /// A reader of `input`.
    pub(super) fn new(input: I) -> Reader<I> {
        Reader { input }
    }

    pub(super) fn take(&mut self, count: usize) -> Option<&[u8]> {
        self.input.take(count)
    }

    /// `N` bytes as an array.
    pub(super) fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N)?.try_into().ok()
    }

    pub(super) fn byte(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    fn length_or_encoding(&mut self) -> Option<Length> {
        let first = self.byte()?;
        Some(match first >> 6 {
            0 => Length::Plain(u64::from(first & 0x3f)),
            1 => Length::Plain(u64::from(first & 0x3f) << 8 | u64::from(self.byte()?)),
            2 if first == 0x80 => Length::Plain(u64::from(u32::from_be_bytes(self.array()?))),
            2 if first == 0x81 => Length::Plain(u64::from_be_bytes(self.array()?)),
            2 => return None,
            _ => Length::Encoded(first & 0x3f),
        })
    }

    /// A length as the file declares it (a count, a database number, an id part).
    pub(super) fn length_u64(&mut self) -> Option<u64> {
        match self.length_or_encoding()? {
            Length::Plain(length) => Some(length),
            Length::Encoded(_) => None,
        }
    }

    /// A count or a length. Nothing is allocated by it: collections grow as their elements
    /// are read, and bytes are taken only as they are there.
    pub(super) fn length(&mut self) -> Option<usize> {
        usize::try_from(self.length_u64()?).ok()
    }

    pub(super) fn string(&mut self) -> Option<Vec<u8>> {
        match self.length_or_encoding()? {
            Length::Plain(length) => self.input.take_vec(usize::try_from(length).ok()?),
            Length::Encoded(0) => Some(i64::from(self.byte()? as i8).to_string().into_bytes()),
            Length::Encoded(1) => {
                let value = i16::from_le_bytes(self.array()?);
                Some(value.to_string().into_bytes())
            }
            Length::Encoded(2) => {
                let value = i32::from_le_bytes(self.array()?);
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
        let score = f64::from_le_bytes(self.array()?);
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
        let value_type = self.byte()?;
        self.value_of_type(value_type)
    }

    /// A value of RDB type `value_type` (its type byte already read); `None` for a type not
    /// read here, or a malformed value.
    pub(super) fn value_of_type(&mut self, value_type: u8) -> Option<RdbValue> {
        let value = match value_type {
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
            rdb_type::STREAM_LISTPACKS
            | rdb_type::STREAM_LISTPACKS_2
            | rdb_type::STREAM_LISTPACKS_3 => {
                RdbValue::Stream(Box::new(stream::read(self, value_type)?))
            }
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
    let mut out: Vec<u8> = Vec::with_capacity(length.min(input.len() * LZF_RESERVE_FACTOR));
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
        let count = run + 2;
        if out.len() + count > length {
            return None;
        }
        if back >= count {
            out.extend_from_within(start..start + count);
        } else {
            // The reference overlaps what it writes (a repeated pattern): byte by byte.
            for offset in 0..count {
                out.push(out[start + offset]);
            }
        }
    }
    (out.len() == length).then_some(out)
}

/// How many times its compressed size an LZF string's output is reserved up front, at most
/// (it then grows as it is produced): typical values compress 2 to 10 times.
const LZF_RESERVE_FACTOR: usize = 16;

/// The most an LZF input byte can expand to.
const LZF_EXPANSION_MAX: usize = 132;

/// The entries of a listpack (Redis's `listpack.c`), integers as their decimal text.
fn listpack(bytes: &[u8]) -> Option<Vec<Vec<u8>>> {
    let items = listpack_items(bytes)?;
    Some(items.into_iter().map(ListpackItem::into_bytes).collect())
}

/// A listpack entry: an integer, or bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ListpackItem<'a> {
    Integer(i64),
    Bytes(&'a [u8]),
}

impl ListpackItem<'_> {
    /// Its bytes, an integer as its decimal text (as Redis answers one).
    pub(super) fn into_bytes(self) -> Vec<u8> {
        match self {
            ListpackItem::Integer(value) => value.to_string().into_bytes(),
            ListpackItem::Bytes(bytes) => bytes.to_vec(),
        }
    }
}

/// The entries of a listpack: total bytes, count, entries (each with its back length), 0xFF.
pub(super) fn listpack_items(bytes: &[u8]) -> Option<Vec<ListpackItem<'_>>> {
    let mut input = bytes;
    let total = u32::from_le_bytes(split_front(&mut input, 4)?.try_into().ok()?);
    if usize::try_from(total).ok()? != bytes.len() {
        return None;
    }
    split_front(&mut input, 2)?;
    let mut elements = Vec::new();
    loop {
        let start_left = input.len();
        let first = split_front(&mut input, 1)?[0];
        let element = match first {
            0xff => break,
            b if b & 0x80 == 0 => ListpackItem::Integer(i64::from(b & 0x7f)),
            b if b & 0xc0 == 0x80 => {
                ListpackItem::Bytes(split_front(&mut input, usize::from(b & 0x3f))?)
            }
            b if b & 0xe0 == 0xc0 => {
                let raw = (i64::from(b & 0x1f) << 8) | i64::from(split_front(&mut input, 1)?[0]);
                ListpackItem::Integer(if raw >= 1 << 12 { raw - (1 << 13) } else { raw })
            }
            b if b & 0xf0 == 0xe0 => {
                let length =
                    (usize::from(b & 0x0f) << 8) | usize::from(split_front(&mut input, 1)?[0]);
                ListpackItem::Bytes(split_front(&mut input, length)?)
            }
            0xf0 => {
                let length = u32::from_le_bytes(split_front(&mut input, 4)?.try_into().ok()?);
                ListpackItem::Bytes(split_front(&mut input, usize::try_from(length).ok()?)?)
            }
            0xf1 => ListpackItem::Integer(le_integer(split_front(&mut input, 2)?)),
            0xf2 => ListpackItem::Integer(le_integer(split_front(&mut input, 3)?)),
            0xf3 => ListpackItem::Integer(le_integer(split_front(&mut input, 4)?)),
            0xf4 => ListpackItem::Integer(le_integer(split_front(&mut input, 8)?)),
            _ => return None,
        };
        let entry_bytes = start_left - input.len();
        split_front(&mut input, backlen_bytes(entry_bytes))?;
        elements.push(element);
    }
    input.is_empty().then_some(elements)
}

/// How many bytes a listpack entry's back length takes, for an entry of `entry_bytes`
/// (Redis's `lpEncodeBacklen`: its bounds are exclusive above 127).
fn backlen_bytes(entry_bytes: usize) -> usize {
    match entry_bytes {
        0..=127 => 1,
        128..16_383 => 2,
        16_383..2_097_151 => 3,
        2_097_151..268_435_455 => 4,
        _ => 5,
    }
}

/// A listpack of `items`, as Redis's `listpack.c` lays one out.
pub(super) fn write_listpack(items: &[ListpackItem<'_>]) -> Vec<u8> {
    let mut out = vec![0; LISTPACK_HEADER_BYTES];
    for item in items {
        let start = out.len();
        match *item {
            ListpackItem::Integer(value) => write_listpack_integer(&mut out, value),
            ListpackItem::Bytes(bytes) => write_listpack_bytes(&mut out, bytes),
        }
        let entry_bytes = out.len() - start;
        write_backlen(&mut out, entry_bytes);
    }
    out.push(0xff);
    let total = u32::try_from(out.len()).unwrap_or(u32::MAX);
    out[..4].copy_from_slice(&total.to_le_bytes());
    // Redis's count field saturates: 65535 means "count them".
    let count = u16::try_from(items.len()).unwrap_or(u16::MAX);
    out[4..6].copy_from_slice(&count.to_le_bytes());
    out
}

/// A listpack's header: its total bytes (4) and entry count (2).
const LISTPACK_HEADER_BYTES: usize = 6;

fn write_listpack_integer(out: &mut Vec<u8>, value: i64) {
    match value {
        0..=127 => out.push(value as u8),
        -4096..=4095 => {
            let raw = if value < 0 { value + (1 << 13) } else { value };
            out.push(0xc0 | (raw >> 8) as u8);
            out.push(raw as u8);
        }
        -32_768..=32_767 => {
            out.push(0xf1);
            out.extend_from_slice(&(value as i16).to_le_bytes());
        }
        -8_388_608..=8_388_607 => {
            out.push(0xf2);
            out.extend_from_slice(&(value as i32).to_le_bytes()[..3]);
        }
        -2_147_483_648..=2_147_483_647 => {
            out.push(0xf3);
            out.extend_from_slice(&(value as i32).to_le_bytes());
        }
        _ => {
            out.push(0xf4);
            out.extend_from_slice(&value.to_le_bytes());
        }
    }
}

fn write_listpack_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    let length = bytes.len();
    if length < 64 {
        out.push(0x80 | length as u8);
    } else if length < 4096 {
        out.push(0xe0 | (length >> 8) as u8);
        out.push(length as u8);
    } else {
        out.push(0xf0);
        out.extend_from_slice(&u32::try_from(length).unwrap_or(u32::MAX).to_le_bytes());
    }
    out.extend_from_slice(bytes);
}

/// An entry's back length, 7 bits a byte, most significant first (Redis's
/// `lpEncodeBacklen`).
fn write_backlen(out: &mut Vec<u8>, entry_bytes: usize) {
    let count = backlen_bytes(entry_bytes);
    for index in (0..count).rev() {
        let bits = ((entry_bytes >> (7 * index)) & 0x7f) as u8;
        out.push(if index == count - 1 {
            bits
        } else {
            bits | 0x80
        });
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
    let mut reader = Reader::new(bytes);
    let total = u32::from_le_bytes(reader.array()?);
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
                let length = u32::from_be_bytes(reader.array()?);
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

fn ziplist_integer(reader: &mut Reader<&[u8]>, encoding: u8) -> Option<i64> {
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
    let mut reader = Reader::new(bytes);
    let width = u32::from_le_bytes(reader.array()?);
    let count = u32::from_le_bytes(reader.array()?);
    if !matches!(width, 2 | 4 | 8) {
        return None;
    }
    let width = usize::try_from(width).ok()?;
    let count = usize::try_from(count).ok()?;
    if count.checked_mul(width)? != reader.input.len() {
        return None;
    }
    Some(
        reader
            .input
            .chunks_exact(width)
            .map(|member| le_integer(member).to_string().into_bytes())
            .collect(),
    )
}

mod stream;

pub use stream::{RdbConsumer, RdbGroup, RdbPending, RdbStream};

#[cfg(test)]
mod tests;
