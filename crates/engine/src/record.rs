//! A stored record: fixed metadata plus one allocation holding the user key and packed bins.
//!
//! Layout of `Record::data` (in memory only; the on-disk format is defined by `storage`):
//!
//! ```text
//! u8  key_particle_type          0 = no key stored
//! [varint key_len, key bytes]    only when key_particle_type != 0
//! bin*                           until the end of the buffer:
//!     u8 name_len, name bytes, u8 particle_type, varint value_len, value bytes
//! ```
//!
//! Varints are LEB128 (7 bits per byte, low bits first), so a 100-byte value costs one length
//! byte rather than four.
//!
//! A record may instead hold a *native* value ([`NativeValue`]): a live structure such as a
//! Redis list or sorted set, changed in place by the Redis front end so that a push costs
//! O(1) rather than a copy of the whole value. Its user key is kept in the same key layout as
//! above; its bins exist only when someone reads them ([`Record::bins`] renders them), so the
//! Aerospike protocol sees a native value as ordinary bins.
//!
//! A record of a namespace whose data stays on the device (`data-in-memory` false) holds no
//! data in the index: an empty packed buffer (which no encoded record is, since every one starts
//! with its key byte). Whoever reads its key or bins first reads it back from the device
//! ([`crate::persist`]'s `Namespace::load`), into a copy holding the data.
//!
//! Invariants:
//! - Packed `data` was produced by [`encode`] and is never modified in place; a write builds a
//!   new one. Only a native value changes in place, under the partition's write lock.
//! - Empty packed `data` means the data is on the device only; such a record has a location.
//! - Every bin has a name of 1..=15 bytes and a particle type other than NULL.

use std::any::Any;
use std::borrow::Cow;
use std::fmt::Debug;

use model::{Generation, VoidTime};

use crate::update::BinWriter;

/// The id of a set within its namespace; 0 means the record has no set.
pub type SetId = u16;

/// A record as the primary index holds it.
#[derive(Debug)]
pub struct Record {
    /// Last write, milliseconds since the Unix epoch; truncate removes records last updated
    /// before its cut-off.
    pub last_update_ms: u64,
    /// When the record expires.
    pub void_time: VoidTime,
    /// Write count, wrapping to 1.
    pub generation: Generation,
    /// The set it belongs to (0 = none).
    pub set_id: SetId,
    /// Where its current version is on the device ([`storage::Location`] bits); 0 when the
    /// namespace keeps records in memory only.
    pub(crate) location: u64,
    data: Data,
}

/// What a record holds: packed bins, or a native value.
#[derive(Debug)]
enum Data {
    Packed(Box<[u8]>),
    Native(Box<Native>),
}

#[derive(Debug)]
struct Native {
    /// The user key in the layout of packed data (a bare 0 byte when there is none).
    key: Box<[u8]>,
    value: Box<dyn NativeValue>,
}

/// A value a record holds as a live structure instead of packed bins (see the module docs).
/// Implementors keep `size_bytes` up to date as they change, in O(1).
pub trait NativeValue: Any + Send + Sync + Debug {
    /// Writes the bins an Aerospike client sees for this value.
    fn write_bins(&self, out: &mut BinWriter);
    /// Bytes it occupies (for `memory_used_bytes` and the set statistics).
    fn size_bytes(&self) -> usize;
}

/// The bins of a record: borrowed when packed, rendered when native.
#[derive(Debug)]
pub struct Bins<'a> {
    encoded: Cow<'a, [u8]>,
}

impl Bins<'_> {
    /// The bins in stored order.
    pub fn iter(&self) -> BinIter<'_> {
        BinIter {
            rest: &self.encoded,
        }
    }
}

/// One bin of a packed record, borrowed to change in place: its particle type, and its value
/// bytes (their length stays).
#[derive(Debug)]
pub struct PackedBinMut<'a> {
    /// Wire particle type; never set to NULL (0).
    pub particle_type: &'a mut u8,
    /// Value bytes in wire encoding.
    pub value: &'a mut [u8],
}

/// One bin of a record, borrowed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BinRef<'a> {
    /// Bin name, 1..=15 bytes.
    pub name: &'a [u8],
    /// Wire particle type.
    pub particle_type: u8,
    /// Value bytes in wire encoding.
    pub value: &'a [u8],
}

impl Record {
    /// Builds a record from its metadata and encoded data.
    pub fn new(meta: RecordHeader, data: Box<[u8]>) -> Record {
        assert!(
            meta.generation.0 != 0,
            "a stored record has generation >= 1"
        );
        Record {
            last_update_ms: meta.last_update_ms,
            void_time: meta.void_time,
            generation: meta.generation,
            set_id: meta.set_id,
            location: 0,
            data: Data::Packed(data),
        }
    }

    /// Whether its data is in memory (it is on the device only otherwise).
    pub(crate) fn has_data(&self) -> bool {
        !matches!(&self.data, Data::Packed(data) if data.is_empty())
    }

    /// Lets go of its data, which its location keeps on the device.
    pub(crate) fn drop_data(&mut self) {
        assert!(
            self.location != 0,
            "only a record stored on a device lets go of its data"
        );
        self.data = Data::Packed(Box::default());
    }

    /// A copy of its metadata and location holding `data` (read back from the device).
    pub(crate) fn with_data(&self, data: Box<[u8]>) -> Record {
        let mut copy = Record::new(self.header(), data);
        copy.location = self.location;
        copy
    }

    /// Its metadata.
    pub(crate) fn header(&self) -> RecordHeader {
        RecordHeader {
            last_update_ms: self.last_update_ms,
            void_time: self.void_time,
            generation: self.generation,
            set_id: self.set_id,
        }
    }

    /// Where its current version is on the device, if the namespace has one.
    pub(crate) fn location(&self) -> Option<storage::Location> {
        storage::Location::from_bits(self.location)
    }

    /// The user key and bins in the packed layout, rendering a native value.
    pub(crate) fn packed_data(&self) -> Cow<'_, [u8]> {
        match &self.data {
            Data::Packed(data) => Cow::Borrowed(data),
            Data::Native(native) => {
                let mut writer = BinWriter::default();
                native.value.write_bins(&mut writer);
                let mut data = native.key.to_vec();
                data.extend_from_slice(&writer.into_encoded());
                Cow::Owned(data)
            }
        }
    }

    /// Builds a record holding a native value, with the user key `key`.
    pub fn new_native(
        meta: RecordHeader,
        key: Option<(u8, &[u8])>,
        value: Box<dyn NativeValue>,
    ) -> Record {
        let mut encoded_key = Vec::new();
        write_key(&mut encoded_key, key);
        let mut record = Record::new(meta, Box::default());
        record.data = Data::Native(Box::new(Native {
            key: encoded_key.into_boxed_slice(),
            value,
        }));
        record
    }

    /// Bytes of key and bin data in memory, or of the key and native value (0 when the data
    /// is on the device only).
    pub fn data_size_bytes(&self) -> usize {
        match &self.data {
            Data::Packed(data) => data.len(),
            Data::Native(native) => native.key.len() + native.value.size_bytes(),
        }
    }

    /// The stored user key as (particle type, bytes), if the client sent one.
    pub fn user_key(&self) -> Option<(u8, &[u8])> {
        let (key, _) = split_key(self.key_and_packed_bins());
        key
    }

    /// The bins in stored order (rendered from a native value).
    pub fn bins(&self) -> Bins<'_> {
        match &self.data {
            Data::Packed(data) => Bins {
                encoded: Cow::Borrowed(split_key(data).1),
            },
            Data::Native(native) => {
                let mut writer = BinWriter::default();
                native.value.write_bins(&mut writer);
                Bins {
                    encoded: Cow::Owned(writer.into_encoded()),
                }
            }
        }
    }

    /// The native value, if the record holds one.
    pub fn native(&self) -> Option<&dyn NativeValue> {
        match &self.data {
            Data::Packed(_) => None,
            Data::Native(native) => Some(native.value.as_ref()),
        }
    }

    /// The native value, to change in place (under the partition's write lock).
    pub(crate) fn native_mut(&mut self) -> Option<&mut dyn NativeValue> {
        match &mut self.data {
            Data::Packed(_) => None,
            Data::Native(native) => Some(native.value.as_mut()),
        }
    }

    /// Bin `name` of a packed record, to change in place without changing its length.
    pub(crate) fn packed_bin_mut(&mut self, name: &[u8]) -> Option<PackedBinMut<'_>> {
        let Data::Packed(data) = &mut self.data else {
            return None;
        };
        let (_, bins) = split_key(data);
        let bin = BinIter { rest: bins }.find(|bin| bin.name == name)?;
        // Where the bin's type byte and value sit in `data` (the value follows its length).
        let value_start = bin.value.as_ptr() as usize - data.as_ptr() as usize;
        let value_end = value_start + bin.value.len();
        let type_at = bin.name.as_ptr() as usize - data.as_ptr() as usize + bin.name.len();
        let (head, value) = data[..value_end].split_at_mut(value_start);
        Some(PackedBinMut {
            particle_type: &mut head[type_at],
            value,
        })
    }

    /// Packed data, or a native record's key alone.
    fn key_and_packed_bins(&self) -> &[u8] {
        match &self.data {
            Data::Packed(data) => data,
            Data::Native(native) => &native.key,
        }
    }
}

/// The metadata of a record about to be stored.
#[derive(Clone, Copy, Debug)]
pub struct RecordHeader {
    /// Last write, milliseconds since the Unix epoch.
    pub last_update_ms: u64,
    /// When the record expires.
    pub void_time: VoidTime,
    /// Its generation after this write.
    pub generation: Generation,
    /// Its set.
    pub set_id: SetId,
}

/// Iterates over the packed bins of a record.
#[derive(Clone, Debug)]
pub struct BinIter<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for BinIter<'a> {
    type Item = BinRef<'a>;

    fn next(&mut self) -> Option<BinRef<'a>> {
        if self.rest.is_empty() {
            return None;
        }
        let (name, after_name) = take_short(self.rest);
        let (&particle_type, after_type) = after_name.split_first().expect("bin has a type");
        let (value_len, after_len) = read_varint(after_type);
        let (value, rest) = after_len.split_at(value_len);
        self.rest = rest;
        Some(BinRef {
            name,
            particle_type,
            value,
        })
    }
}

/// Exact size of the data buffer for this key and these bins.
pub fn encoded_size_bytes<'a>(
    key: Option<(u8, &[u8])>,
    bins: impl Iterator<Item = BinRef<'a>>,
) -> usize {
    let key_size = match key {
        Some((_, bytes)) => 1 + varint_size(bytes.len()) + bytes.len(),
        None => 1,
    };
    let bins_size: usize = bins
        .map(|bin| 1 + bin.name.len() + 1 + varint_size(bin.value.len()) + bin.value.len())
        .sum();
    key_size + bins_size
}

/// Encodes the data buffer of a record; `size_bytes` must come from [`encoded_size_bytes`].
pub fn encode<'a>(
    key: Option<(u8, &[u8])>,
    bins: impl Iterator<Item = BinRef<'a>>,
    size_bytes: usize,
) -> Box<[u8]> {
    let mut data = Vec::with_capacity(size_bytes);
    write_key(&mut data, key);
    for bin in bins {
        write_bin_header(&mut data, bin.name, bin.particle_type, bin.value.len());
        data.extend_from_slice(bin.value);
    }
    assert_eq!(
        data.len(),
        size_bytes,
        "encoded size matches the computed size"
    );
    data.into_boxed_slice()
}

/// Appends a bin's header (name and type and value length) in the layout above; the caller
/// appends exactly `value_len` value bytes next.
///
/// # Panics
/// On a name of 0 or more than 15 bytes, or particle type NULL.
pub fn write_bin_header(out: &mut Vec<u8>, name: &[u8], particle_type: u8, value_len: usize) {
    assert!(!name.is_empty() && name.len() <= model::BIN_NAME_BYTES_MAX);
    assert!(particle_type != 0, "a stored bin has a value");
    out.push(name.len() as u8);
    out.extend_from_slice(name);
    out.push(particle_type);
    write_varint(out, value_len);
}

/// The data buffer of a record from its key and bins already encoded by [`write_bin_header`]
/// and their values.
pub fn encode_prepared(key: Option<(u8, &[u8])>, encoded_bins: &[u8]) -> Box<[u8]> {
    let key_size = key.map_or(1, |(_, bytes)| 1 + varint_size(bytes.len()) + bytes.len());
    let mut data = Vec::with_capacity(key_size + encoded_bins.len());
    write_key(&mut data, key);
    data.extend_from_slice(encoded_bins);
    data.into_boxed_slice()
}

/// Whether `data` has the layout [`encode`] writes: a key byte (and, when it is not 0, a key
/// length and that many bytes), then whole bins, each with a name of 1..=15 bytes, a particle
/// type other than NULL and as many value bytes as its length says. Every reader of packed data
/// ([`Record::user_key`], [`BinIter`]) trusts this layout, so data that did not come from
/// [`encode`] in this process (read back from a device) is checked with this first: a checksum
/// shows that the bytes are the ones written, not that they were well formed.
pub(crate) fn is_well_formed(data: &[u8]) -> bool {
    let Some((&key_type, mut rest)) = data.split_first() else {
        return false;
    };
    if key_type != 0 {
        let Some((key_len, after_len)) = read_varint_checked(rest) else {
            return false;
        };
        let Some(after_key) = after_len.get(key_len..) else {
            return false;
        };
        rest = after_key;
    }
    while let Some((&name_len, after_name_len)) = rest.split_first() {
        let name_len = usize::from(name_len);
        if name_len == 0 || name_len > model::BIN_NAME_BYTES_MAX {
            return false;
        }
        let Some((&particle_type, after_type)) =
            after_name_len.get(name_len..).and_then(<[u8]>::split_first)
        else {
            return false;
        };
        let Some((value_len, after_len)) = read_varint_checked(after_type) else {
            return false;
        };
        let Some(after_value) = after_len.get(value_len..) else {
            return false;
        };
        if particle_type == 0 {
            return false;
        }
        rest = after_value;
    }
    true
}

fn write_key(data: &mut Vec<u8>, key: Option<(u8, &[u8])>) {
    match key {
        Some((particle_type, bytes)) => {
            assert!(particle_type != 0, "a stored key has a particle type");
            data.push(particle_type);
            write_varint(data, bytes.len());
            data.extend_from_slice(bytes);
        }
        None => data.push(0),
    }
}

fn split_key(data: &[u8]) -> (Option<(u8, &[u8])>, &[u8]) {
    let (&key_type, rest) = data
        .split_first()
        .expect("record data starts with a key byte");
    if key_type == 0 {
        return (None, rest);
    }
    let (key_len, rest) = read_varint(rest);
    let (key, bins) = rest.split_at(key_len);
    (Some((key_type, key)), bins)
}

fn take_short(bytes: &[u8]) -> (&[u8], &[u8]) {
    let (&len, rest) = bytes.split_first().expect("length byte present");
    rest.split_at(usize::from(len))
}

fn varint_size(mut value: usize) -> usize {
    let mut size = 1;
    while value >= 0x80 {
        value >>= 7;
        size += 1;
    }
    size
}

fn write_varint(out: &mut Vec<u8>, mut value: usize) {
    while value >= 0x80 {
        out.push((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Most bytes a varint of a length may take: 9 of them carry 63 bits, more than any length.
const VARINT_BYTES_MAX: usize = 9;

const _: () = assert!(7 * VARINT_BYTES_MAX < 64);

/// [`read_varint`] for bytes not known to be well formed: `None` when the varint runs past the
/// end, is longer than [`VARINT_BYTES_MAX`], or does not fit a `usize`.
fn read_varint_checked(bytes: &[u8]) -> Option<(usize, &[u8])> {
    let mut value = 0u64;
    for (position, &byte) in bytes.iter().enumerate().take(VARINT_BYTES_MAX) {
        value |= u64::from(byte & 0x7f) << (7 * position);
        if byte & 0x80 == 0 {
            return Some((usize::try_from(value).ok()?, &bytes[position + 1..]));
        }
    }
    None
}

fn read_varint(bytes: &[u8]) -> (usize, &[u8]) {
    let mut value = 0usize;
    for (position, &byte) in bytes.iter().enumerate() {
        value |= usize::from(byte & 0x7f) << (7 * position);
        if byte & 0x80 == 0 {
            return (value, &bytes[position + 1..]);
        }
    }
    panic!("varint runs past the end of record data");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bin<'a>(name: &'a [u8], particle_type: u8, value: &'a [u8]) -> BinRef<'a> {
        BinRef {
            name,
            particle_type,
            value,
        }
    }

    #[test]
    fn a_record_is_no_bigger_for_holding_native_values() {
        assert_eq!(
            std::mem::size_of::<Data>(),
            std::mem::size_of::<Box<[u8]>>()
        );
    }

    #[test]
    fn encode_then_iterate_returns_the_same_key_and_bins() {
        let long = vec![7u8; 300];
        let bins = [
            bin(b"a", 1, &[0, 0, 0, 0, 0, 0, 0, 42]),
            bin(b"long", 4, &long),
            bin(b"e", 3, b""),
        ];
        for key in [None, Some((3u8, &b"user-key"[..]))] {
            let size = encoded_size_bytes(key, bins.iter().copied());
            let header = RecordHeader {
                last_update_ms: 1,
                void_time: VoidTime::NEVER,
                generation: Generation::FIRST,
                set_id: 0,
            };
            let record = Record::new(header, encode(key, bins.iter().copied(), size));
            assert_eq!(record.user_key(), key);
            assert_eq!(record.bins().iter().collect::<Vec<_>>(), bins.to_vec());
            assert_eq!(record.data_size_bytes(), size);
        }
    }

    #[test]
    fn encoded_data_is_well_formed_and_no_strict_prefix_or_stray_byte_is() {
        // A record read back from a device once panicked the engine when its data, though it
        // passed its checksum, was not what `encode` writes (the fuzzer forged such an entry):
        // `BinIter` split at a value length past the end. Reads now check the layout first.
        let bins = [
            bin(b"a", 1, &[0, 0, 0, 0, 0, 0, 0, 42]),
            bin(b"long", 4, &[7; 300]),
        ];
        for key in [None, Some((3u8, &b"user-key"[..]))] {
            let size = encoded_size_bytes(key, bins.iter().copied());
            let data = encode(key, bins.iter().copied(), size);
            assert!(is_well_formed(&data));
            for prefix in 0..data.len() {
                // Only the key alone, or the key and the first bin, end where a bin may start.
                let at_bin_boundary = [size - 12 - 308, size - 308].contains(&prefix);
                assert_eq!(
                    is_well_formed(&data[..prefix]),
                    at_bin_boundary,
                    "prefix {prefix}"
                );
            }
            let mut stray = data.to_vec();
            stray.push(1);
            assert!(
                !is_well_formed(&stray),
                "a name length with no name after it"
            );
        }
        assert!(!is_well_formed(&[]), "no key byte");
        assert!(!is_well_formed(&[0, 0]), "an empty bin name");
        assert!(!is_well_formed(&[0, 1, b'a', 0, 0]), "a NULL bin");
        assert!(
            !is_well_formed(&[0, 1, b'a', 1, 0x80, 0x80]),
            "a varint past the end"
        );
        assert!(!is_well_formed(&[
            0, 1, b'a', 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01
        ]));
        assert!(!is_well_formed(&[3, 5, b'k']), "a key past the end");
    }

    #[test]
    fn varint_round_trips_boundaries() {
        for value in [
            0usize,
            1,
            127,
            128,
            16_383,
            16_384,
            1 << 30,
            usize::MAX >> 1,
        ] {
            let mut out = Vec::new();
            write_varint(&mut out, value);
            assert_eq!(out.len(), varint_size(value));
            out.push(0xaa);
            assert_eq!(read_varint(&out), (value, &[0xaa][..]));
        }
    }
}
