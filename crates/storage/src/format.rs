//! The on-disk format: block headers, entries and where an entry lives ([`Location`]).
//!
//! A device is an array of write blocks. A block in use starts with a 32-byte header, followed
//! by entries, followed by an end marker (8 zero bytes) unless the block is full:
//!
//! ```text
//! header  0 u32 magic "OSPB"   4 u16 version   6 u16 0   8 u64 use_seq
//!        16 u32 block size    20 u32 0        24 u32 crc32c(bytes 0..24)   28 u32 0
//! entry   0 u32 crc32c         4 u32 length (bytes, unpadded; 0 = end marker)
//!         8 u64 seq           16 u8 kind      17 [u8; 20] digest          37 body, zero padding
//! ```
//!
//! All integers are little-endian. An entry's checksum covers the block's `use_seq` followed by
//! the entry's bytes from offset 4 to its length, so an entry left over from a block's previous
//! use fails it: a reused block never yields stale entries. Bodies by kind:
//!
//! ```text
//! record     u64 last_update_ms, u32 void_time, u16 generation, u8 set_len, set, data
//! tombstone  u64 shadow_seq: every version of the digest older than this was deleted
//! truncate   u64 before_ms, u8 set_len, set (empty = the whole namespace)
//! ```
//!
//! Invariants:
//! - Entries start on 16-byte boundaries (zero padding follows each) and are at most a block minus its header and end marker, so a
//!   [`Location`] (block, offset and length in 16-byte units) packs into a non-zero `u64`.
//! - Sequence numbers increase with every entry appended, across blocks; a block's `use_seq`
//!   is smaller than the seq of every entry in it, and no seq exceeds [`SEQ_MAX`]. The
//!   decoders refuse a header or an entry that breaks this, checksum or not.

use thiserror::Error;

/// Bytes of a digest (RIPEMD-160).
pub const DIGEST_SIZE_BYTES: usize = 20;
/// A record's digest as the storage layer sees it.
pub type DigestBytes = [u8; DIGEST_SIZE_BYTES];

/// Bytes of a block header.
pub const BLOCK_HEADER_SIZE_BYTES: usize = 32;
/// Bytes of an entry's header (checksum, length, seq, kind, digest).
pub const ENTRY_HEADER_SIZE_BYTES: usize = 37;
/// Bytes of the end marker that follows the last entry of a block that is not full.
pub const END_MARKER_SIZE_BYTES: usize = 8;
/// Entries start and end on multiples of this.
pub const ALIGN_BYTES: usize = 16;
/// Bytes of a record body before its set name.
pub const RECORD_BODY_FIXED_BYTES: usize = 15;

/// The largest seq a block header or an entry may carry. After recovery the writer continues
/// above the largest seq found, so that seq must leave room: half the range leaves 2^63 more
/// appends even after a forged entry at the limit. No writer gets near it (at ten million
/// appends a second, it takes 29,000 years); only a forged or corrupted block that passed its
/// checksum carries more.
pub const SEQ_MAX: u64 = u64::MAX >> 1;

const MAGIC: u32 = u32::from_le_bytes(*b"OSPB");
const VERSION: u16 = 1;

/// What an entry says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum EntryKind {
    /// A version of a record.
    Record = 1,
    /// The record was deleted.
    Tombstone = 2,
    /// Records of a set (or the namespace) last updated before a time were truncated.
    Truncate = 3,
}

impl EntryKind {
    fn from_byte(byte: u8) -> Option<EntryKind> {
        match byte {
            1 => Some(EntryKind::Record),
            2 => Some(EntryKind::Tombstone),
            3 => Some(EntryKind::Truncate),
            _ => None,
        }
    }
}

/// Where an entry lives: its block, its offset in the block and its length.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Location(u64);

const UNITS_BITS: u32 = 19;
const UNITS_MASK: u64 = (1 << UNITS_BITS) - 1;
/// Most blocks a storage may have (26 bits of a location).
pub const BLOCK_COUNT_MAX: u64 = 1 << (64 - 2 * UNITS_BITS);

impl Location {
    /// The location of `len_bytes` at `offset_bytes` of block `block`.
    ///
    /// # Panics
    /// If the values break the format's alignment or range (a bug of the caller).
    pub fn new(block: u32, offset_bytes: usize, len_bytes: usize) -> Location {
        assert!(
            offset_bytes >= BLOCK_HEADER_SIZE_BYTES && offset_bytes.is_multiple_of(ALIGN_BYTES)
        );
        assert!(len_bytes > 0 && len_bytes.is_multiple_of(ALIGN_BYTES));
        let offset_units = (offset_bytes / ALIGN_BYTES) as u64;
        let len_units = (len_bytes / ALIGN_BYTES) as u64;
        assert!(offset_units <= UNITS_MASK && len_units <= UNITS_MASK);
        assert!(u64::from(block) < BLOCK_COUNT_MAX);
        Location(offset_units | len_units << UNITS_BITS | u64::from(block) << (2 * UNITS_BITS))
    }

    /// The packed form (never 0), for an index entry to keep.
    pub fn to_bits(self) -> u64 {
        self.0
    }

    /// A location from [`Location::to_bits`]; `None` for 0 (no location).
    pub fn from_bits(bits: u64) -> Option<Location> {
        (bits != 0).then_some(Location(bits))
    }

    /// The block.
    pub fn block(self) -> u32 {
        (self.0 >> (2 * UNITS_BITS)) as u32
    }

    /// Offset of the entry in its block.
    pub fn offset_bytes(self) -> usize {
        ((self.0 & UNITS_MASK) as usize) * ALIGN_BYTES
    }

    /// Length of the entry.
    pub fn len_bytes(self) -> usize {
        (((self.0 >> UNITS_BITS) & UNITS_MASK) as usize) * ALIGN_BYTES
    }
}

/// A record's fields as an entry body holds them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordBody<'a> {
    /// Last write, Unix milliseconds.
    pub last_update_ms: u64,
    /// Void time, seconds since 2010 (0 = never).
    pub void_time: u32,
    /// Generation.
    pub generation: u16,
    /// Set name (empty = none).
    pub set_name: &'a [u8],
    /// Key and bins in the engine's record layout.
    pub data: &'a [u8],
}

/// An entry's body as it is encoded straight into a write block (no copy in between).
pub trait EntryBody {
    /// How many bytes [`EntryBody::encode`] appends.
    fn len_bytes(&self) -> usize;
    /// Appends exactly [`EntryBody::len_bytes`] bytes to `out`.
    fn encode(&self, out: &mut Vec<u8>);
}

impl EntryBody for [u8] {
    fn len_bytes(&self) -> usize {
        self.len()
    }

    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self);
    }
}

impl EntryBody for RecordBody<'_> {
    fn len_bytes(&self) -> usize {
        RECORD_BODY_FIXED_BYTES + self.set_name.len() + self.data.len()
    }

    /// # Panics
    /// If the set name is longer than 255 bytes (set names are at most 63).
    fn encode(&self, out: &mut Vec<u8>) {
        let set_len = u8::try_from(self.set_name.len()).expect("set names are short");
        out.extend_from_slice(&self.last_update_ms.to_le_bytes());
        out.extend_from_slice(&self.void_time.to_le_bytes());
        out.extend_from_slice(&self.generation.to_le_bytes());
        out.push(set_len);
        out.extend_from_slice(self.set_name);
        out.extend_from_slice(self.data);
    }
}

impl RecordBody<'_> {
    /// Decodes a body, or `None` when it is too short for what it declares.
    pub fn decode(body: &[u8]) -> Option<RecordBody<'_>> {
        let fixed = body.get(..RECORD_BODY_FIXED_BYTES)?;
        let set_len = usize::from(fixed[14]);
        let set_name = body.get(RECORD_BODY_FIXED_BYTES..RECORD_BODY_FIXED_BYTES + set_len)?;
        Some(RecordBody {
            last_update_ms: u64::from_le_bytes(fixed[0..8].try_into().ok()?),
            void_time: u32::from_le_bytes(fixed[8..12].try_into().ok()?),
            generation: u16::from_le_bytes(fixed[12..14].try_into().ok()?),
            set_name,
            data: &body[RECORD_BODY_FIXED_BYTES + set_len..],
        })
    }
}

/// A truncate entry's body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TruncateBody {
    /// Records last updated before this (Unix ms) are gone.
    pub before_ms: u64,
    /// The set (empty = the whole namespace).
    pub set_name: Vec<u8>,
}

impl TruncateBody {
    /// Appends the body's bytes to `out`.
    ///
    /// # Panics
    /// If the set name is longer than 255 bytes (set names are at most 63).
    pub fn encode(&self, out: &mut Vec<u8>) {
        let set_len = u8::try_from(self.set_name.len()).expect("set names are short");
        out.extend_from_slice(&self.before_ms.to_le_bytes());
        out.push(set_len);
        out.extend_from_slice(&self.set_name);
    }

    /// Decodes a body, or `None` when it is too short for what it declares.
    pub fn decode(body: &[u8]) -> Option<TruncateBody> {
        let before_ms = u64::from_le_bytes(body.get(..8)?.try_into().ok()?);
        let set_len = usize::from(*body.get(8)?);
        let set_name = body.get(9..9 + set_len)?.to_vec();
        Some(TruncateBody {
            before_ms,
            set_name,
        })
    }
}

/// Decodes a tombstone's body: its shadow seq.
pub fn decode_tombstone(body: &[u8]) -> Option<u64> {
    Some(u64::from_le_bytes(body.get(..8)?.try_into().ok()?))
}

/// The bytes an entry with a body of `body_len` occupies.
pub fn entry_len_bytes(body_len: usize) -> usize {
    (ENTRY_HEADER_SIZE_BYTES + body_len).next_multiple_of(ALIGN_BYTES)
}

/// Writes a block header for a block of `block_size_bytes` opened at `use_seq`.
pub fn encode_block_header(use_seq: u64, block_size_bytes: u32, out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&MAGIC.to_le_bytes());
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(&use_seq.to_le_bytes());
    out.extend_from_slice(&block_size_bytes.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    let crc = crc32c::crc32c(&out[start..]);
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    debug_assert_eq!(out.len() - start, BLOCK_HEADER_SIZE_BYTES);
}

/// Why a block header was not accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum HeaderError {
    /// Every byte is zero: the block was never written.
    #[error("never written")]
    Blank,
    /// Not a block header, or a torn or corrupted one.
    #[error("bad block header")]
    Bad,
}

/// Decodes a block header; returns its `use_seq`.
///
/// # Errors
/// [`HeaderError::Blank`] for zeros, [`HeaderError::Bad`] for anything else that fails.
pub fn decode_block_header(bytes: &[u8], block_size_bytes: u32) -> Result<u64, HeaderError> {
    let header = bytes
        .get(..BLOCK_HEADER_SIZE_BYTES)
        .ok_or(HeaderError::Bad)?;
    if header.iter().all(|&b| b == 0) {
        return Err(HeaderError::Blank);
    }
    let word = |at: usize| {
        u32::from_le_bytes([header[at], header[at + 1], header[at + 2], header[at + 3]])
    };
    let valid = word(0) == MAGIC
        && u16::from_le_bytes([header[4], header[5]]) == VERSION
        && word(16) == block_size_bytes
        && word(24) == crc32c::crc32c(&header[..24]);
    if !valid {
        return Err(HeaderError::Bad);
    }
    let mut use_seq = [0; 8];
    use_seq.copy_from_slice(&header[8..16]);
    let use_seq = u64::from_le_bytes(use_seq);
    if use_seq > SEQ_MAX {
        return Err(HeaderError::Bad);
    }
    Ok(use_seq)
}

/// Appends an entry to `out`, which holds a block from its first byte (so offsets in `out` are
/// offsets in the block); returns its location.
pub fn encode_entry(
    out: &mut Vec<u8>,
    block: u32,
    use_seq: u64,
    seq: u64,
    kind: EntryKind,
    digest: &DigestBytes,
    body: &(impl EntryBody + ?Sized),
) -> Location {
    let offset = out.len();
    let exact_len = ENTRY_HEADER_SIZE_BYTES + body.len_bytes();
    let len = entry_len_bytes(body.len_bytes());
    let len_field = u32::try_from(exact_len).expect("entries are smaller than a block");
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&len_field.to_le_bytes());
    out.extend_from_slice(&seq.to_le_bytes());
    out.push(kind as u8);
    out.extend_from_slice(digest);
    body.encode(out);
    assert_eq!(
        out.len(),
        offset + exact_len,
        "a body encodes to its declared length"
    );
    let crc = entry_crc(use_seq, &out[offset + 4..offset + exact_len]);
    out.resize(offset + len, 0);
    out[offset..offset + 4].copy_from_slice(&crc.to_le_bytes());
    Location::new(block, offset, len)
}

fn entry_crc(use_seq: u64, rest: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&use_seq.to_le_bytes()), rest)
}

/// One entry read back from a block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry<'a> {
    /// Where it is.
    pub location: Location,
    /// Its sequence number.
    pub seq: u64,
    /// What it says.
    pub kind: EntryKind,
    /// The record it is about (zeros for a truncate).
    pub digest: DigestBytes,
    /// Its body.
    pub body: &'a [u8],
}

/// How the walk of a block's entries ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockEnd {
    /// At an end marker or the end of the block: nothing was wrong.
    Clean,
    /// At an entry that failed its checksum or declared an impossible length: a torn write or
    /// corruption. Nothing from there on is used.
    Corrupt {
        /// Offset of the bad entry in the block.
        offset_bytes: usize,
    },
}

/// Walks the entries of `block_bytes` (a whole block whose header declared `use_seq`), calling
/// `visit` for each valid one in order; stops at the end marker or at the first bad entry.
pub fn walk_entries<'a>(
    block: u32,
    use_seq: u64,
    block_bytes: &'a [u8],
    mut visit: impl FnMut(Entry<'a>),
) -> BlockEnd {
    let mut offset = BLOCK_HEADER_SIZE_BYTES;
    while offset + END_MARKER_SIZE_BYTES <= block_bytes.len() {
        let word = |at: usize| {
            u32::from_le_bytes([
                block_bytes[at],
                block_bytes[at + 1],
                block_bytes[at + 2],
                block_bytes[at + 3],
            ])
        };
        let (crc, exact_len) = (word(offset), word(offset + 4) as usize);
        if crc == 0 && exact_len == 0 {
            return BlockEnd::Clean;
        }
        let Some(entry) = parse_entry(
            block,
            use_seq,
            &block_bytes[offset..],
            offset,
            crc,
            exact_len,
        ) else {
            return BlockEnd::Corrupt {
                offset_bytes: offset,
            };
        };
        visit(entry);
        offset += entry.location.len_bytes();
    }
    BlockEnd::Clean
}

/// Decodes the single entry at `location` from `bytes`, exactly its `len_bytes()` bytes read
/// back from a block whose use is `use_seq`; `None` if it fails its checksum or is not whole.
pub fn decode_entry_at(location: Location, use_seq: u64, bytes: &[u8]) -> Option<Entry<'_>> {
    let word = |at: usize| Some(u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?));
    let (crc, exact_len) = (word(0)?, word(4)? as usize);
    let entry = parse_entry(
        location.block(),
        use_seq,
        bytes,
        location.offset_bytes(),
        crc,
        exact_len,
    )?;
    (entry.location.len_bytes() == location.len_bytes()).then_some(Entry { location, ..entry })
}

/// The entry at the start of `from_entry`, which is at `offset` in `block`.
fn parse_entry(
    block: u32,
    use_seq: u64,
    from_entry: &[u8],
    offset: usize,
    crc: u32,
    exact_len: usize,
) -> Option<Entry<'_>> {
    if exact_len < ENTRY_HEADER_SIZE_BYTES {
        return None;
    }
    let len = exact_len.next_multiple_of(ALIGN_BYTES);
    from_entry.get(..len)?;
    let bytes = &from_entry[..exact_len];
    if entry_crc(use_seq, &bytes[4..]) != crc {
        return None;
    }
    let kind = EntryKind::from_byte(bytes[16])?;
    let mut seq = [0; 8];
    seq.copy_from_slice(&bytes[8..16]);
    let seq = u64::from_le_bytes(seq);
    // The writer gives every entry a seq above its block's use_seq; one that is not was not
    // written by it, whatever its checksum says.
    if seq <= use_seq || seq > SEQ_MAX {
        return None;
    }
    let mut digest = [0; DIGEST_SIZE_BYTES];
    digest.copy_from_slice(&bytes[17..ENTRY_HEADER_SIZE_BYTES]);
    Some(Entry {
        location: Location::new(block, offset, len),
        seq,
        kind,
        digest,
        body: &bytes[ENTRY_HEADER_SIZE_BYTES..],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const BLOCK: u32 = 64 * 1024;

    fn block_with(entries: &[(u64, EntryKind, &[u8])], use_seq: u64) -> (Vec<u8>, Vec<Location>) {
        let mut out = Vec::new();
        encode_block_header(use_seq, BLOCK, &mut out);
        let locations = entries
            .iter()
            .map(|(seq, kind, body)| {
                encode_entry(&mut out, 7, use_seq, *seq, *kind, &[9; 20], *body)
            })
            .collect();
        out.resize(BLOCK as usize, 0);
        (out, locations)
    }

    fn walk(bytes: &[u8], use_seq: u64) -> (Vec<(u64, Vec<u8>)>, BlockEnd) {
        let mut seen = Vec::new();
        let end = walk_entries(7, use_seq, bytes, |e| seen.push((e.seq, e.body.to_vec())));
        (seen, end)
    }

    #[test]
    fn location_round_trips_through_bits() {
        let location = Location::new(123_456, 1024 * 1024 - 32, 8 * 1024 * 1024 - 64);
        let back = Location::from_bits(location.to_bits()).expect("non-zero");
        assert_eq!(back.block(), 123_456);
        assert_eq!(back.offset_bytes(), 1024 * 1024 - 32);
        assert_eq!(back.len_bytes(), 8 * 1024 * 1024 - 64);
        assert_eq!(Location::from_bits(0), None);
    }

    #[test]
    fn entries_round_trip_and_stop_at_the_end_marker() {
        let (bytes, locations) = block_with(
            &[
                (11, EntryKind::Record, b"abc"),
                (12, EntryKind::Tombstone, &[1; 8]),
            ],
            10,
        );
        let (seen, end) = walk(&bytes, 10);
        assert_eq!(end, BlockEnd::Clean);
        assert_eq!(seen.len(), 2);
        assert_eq!((seen[0].0, &seen[0].1[..]), (11, &b"abc"[..]));
        assert_eq!(
            locations[1].offset_bytes(),
            locations[0].offset_bytes() + locations[0].len_bytes()
        );
        assert_eq!(decode_block_header(&bytes, BLOCK), Ok(10));
    }

    #[test]
    fn a_flipped_bit_stops_the_walk_at_that_entry() {
        let (mut bytes, locations) = block_with(
            &[
                (11, EntryKind::Record, b"first"),
                (12, EntryKind::Record, b"second"),
            ],
            10,
        );
        bytes[locations[1].offset_bytes() + 40] ^= 0x04;
        let (seen, end) = walk(&bytes, 10);
        assert_eq!(seen.len(), 1);
        assert_eq!(
            end,
            BlockEnd::Corrupt {
                offset_bytes: locations[1].offset_bytes()
            }
        );
    }

    #[test]
    fn entries_of_a_previous_use_of_the_block_fail_their_checksum() {
        let (bytes, _) = block_with(&[(11, EntryKind::Record, b"old")], 10);
        let (seen, end) = walk(&bytes, 20);
        assert!(seen.is_empty());
        assert!(matches!(end, BlockEnd::Corrupt { .. }));
    }

    #[test]
    fn impossible_lengths_are_corrupt_not_a_panic() {
        let (mut bytes, locations) = block_with(&[(11, EntryKind::Record, b"x")], 10);
        let at = locations[0].offset_bytes();
        for len in [1u32, 17, u32::MAX, BLOCK * 2, BLOCK - 8] {
            bytes[at + 4..at + 8].copy_from_slice(&len.to_le_bytes());
            assert!(matches!(walk(&bytes, 10).1, BlockEnd::Corrupt { .. }));
        }
    }

    #[test]
    fn seqs_out_of_block_order_or_at_the_top_of_the_range_are_corrupt() {
        // A cold start over a block whose checksummed entry carried seq u64::MAX set the next
        // seq to u64::MAX + 1: a panic with overflow checks, and without them a wrap to 0 that
        // would make every later write older than the entries already on the device (found by
        // the storage_record fuzz target). Entries the writer could not have written are now
        // refused like a bad checksum: a seq not above the block's use_seq, or above SEQ_MAX.
        for (use_seq, seq, valid) in [
            (10, 11, true),
            (10, 10, false),
            (10, 9, false),
            (10, SEQ_MAX, true),
            (10, u64::MAX, false),
        ] {
            let (bytes, _) = block_with(&[(seq, EntryKind::Record, b"x")], use_seq);
            let (seen, end) = walk(&bytes, use_seq);
            assert_eq!(
                seen.len(),
                usize::from(valid),
                "seq {seq} in a block of use {use_seq}"
            );
            assert_eq!(matches!(end, BlockEnd::Clean), valid);
        }
        let mut header = Vec::new();
        encode_block_header(u64::MAX, BLOCK, &mut header);
        assert_eq!(decode_block_header(&header, BLOCK), Err(HeaderError::Bad));
        let mut header = Vec::new();
        encode_block_header(SEQ_MAX, BLOCK, &mut header);
        assert_eq!(decode_block_header(&header, BLOCK), Ok(SEQ_MAX));
    }

    #[test]
    fn headers_detect_blank_and_bad() {
        let mut out = Vec::new();
        encode_block_header(5, BLOCK, &mut out);
        assert_eq!(decode_block_header(&out, BLOCK), Ok(5));
        assert_eq!(decode_block_header(&out, BLOCK * 2), Err(HeaderError::Bad));
        out[9] ^= 1;
        assert_eq!(decode_block_header(&out, BLOCK), Err(HeaderError::Bad));
        assert_eq!(
            decode_block_header(&[0; 32], BLOCK),
            Err(HeaderError::Blank)
        );
    }

    #[test]
    fn bodies_round_trip_and_short_ones_are_refused() {
        let body = RecordBody {
            last_update_ms: 1,
            void_time: 2,
            generation: 3,
            set_name: b"set",
            data: b"data",
        };
        let mut out = Vec::new();
        body.encode(&mut out);
        assert_eq!(RecordBody::decode(&out), Some(body));
        assert_eq!(RecordBody::decode(&out[..16]), None);
        let truncate = TruncateBody {
            before_ms: 9,
            set_name: b"s".to_vec(),
        };
        let mut out = Vec::new();
        truncate.encode(&mut out);
        assert_eq!(TruncateBody::decode(&out), Some(truncate));
        assert_eq!(TruncateBody::decode(&out[..9]), None);
    }
}
