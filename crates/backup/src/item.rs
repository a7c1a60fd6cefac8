//! What a backup file holds: its header, secondary-index definitions, UDF modules and records.
//!
//! Names (namespaces, sets, bins, indexes, UDF files) and strings are bytes, not `String`s:
//! the format and the server treat them as bytes with no encoding, and a backup must restore
//! exactly what it saved.

use model::{Digest, Generation, ParticleType, UserKey, VoidTime};

/// The format version on a file's first line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FormatVersion {
    /// `Version 3.0`: the legacy form, read only. Names are not escaped and there is no global
    /// section.
    V3_0,
    /// `Version 3.1`: what asbackup writes and what the encoder writes.
    V3_1,
}

/// The lines before the first element: the version and the `#` meta lines.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// The version line.
    pub version: FormatVersion,
    /// The namespace from `# namespace`: always present in a 3.1 file, optional in a 3.0 one.
    pub namespace: Option<Vec<u8>>,
    /// `# first-file`: this is the one file of a backup set that holds the global lines.
    pub first_file: bool,
}

impl Header {
    /// The header of a 3.1 file of `namespace`; `first_file` marks the one file of a backup set
    /// that carries the secondary indexes and UDFs.
    pub fn new(namespace: &[u8], first_file: bool) -> Header {
        Header {
            version: FormatVersion::V3_1,
            namespace: Some(namespace.to_vec()),
            first_file,
        }
    }
}

/// One element of a backup file after its header, in file order.
#[derive(Clone, Debug, PartialEq)]
pub enum Item {
    /// A `* i` line.
    SecondaryIndex(SecondaryIndex),
    /// A `* u` line.
    Udf(Udf),
    /// A record: its `+` lines and its bin lines.
    Record(Record),
}

/// What a secondary index indexes in its bin (the `itype` letter).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IndexCollection {
    /// `N`: the bin's value itself.
    Default,
    /// `L`: each element of a list.
    List,
    /// `K`: each key of a map.
    MapKeys,
    /// `V`: each value of a map.
    MapValues,
}

impl IndexCollection {
    /// Every collection type, for tests and exhaustive tables.
    pub const ALL: [IndexCollection; 4] = [
        IndexCollection::Default,
        IndexCollection::List,
        IndexCollection::MapKeys,
        IndexCollection::MapValues,
    ];

    /// The letter the format writes.
    pub fn letter(self) -> u8 {
        match self {
            IndexCollection::Default => b'N',
            IndexCollection::List => b'L',
            IndexCollection::MapKeys => b'K',
            IndexCollection::MapValues => b'V',
        }
    }

    /// The collection type for a letter, or `None` for any other byte (`I` included).
    pub fn from_letter(letter: u8) -> Option<IndexCollection> {
        IndexCollection::ALL
            .into_iter()
            .find(|collection| collection.letter() == letter)
    }
}

/// The type of value a secondary index holds (the `ptype` letter).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IndexValueType {
    /// `S`: strings.
    String,
    /// `N`: integers.
    Numeric,
    /// `G`: GeoJSON regions and points.
    Geo2dSphere,
    /// `B`: blobs.
    Blob,
}

impl IndexValueType {
    /// Every value type, for tests and exhaustive tables.
    pub const ALL: [IndexValueType; 4] = [
        IndexValueType::String,
        IndexValueType::Numeric,
        IndexValueType::Geo2dSphere,
        IndexValueType::Blob,
    ];

    /// The letter the format writes.
    pub fn letter(self) -> u8 {
        match self {
            IndexValueType::String => b'S',
            IndexValueType::Numeric => b'N',
            IndexValueType::Geo2dSphere => b'G',
            IndexValueType::Blob => b'B',
        }
    }

    /// The value type for a letter, or `None` for any other byte (`I` included).
    pub fn from_letter(letter: u8) -> Option<IndexValueType> {
        IndexValueType::ALL
            .into_iter()
            .find(|value_type| value_type.letter() == letter)
    }
}

/// A secondary-index definition (`* i` line). It has exactly one bin path: every writer writes
/// one and the server supports no other count.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecondaryIndex {
    /// The namespace it indexes.
    pub namespace: Vec<u8>,
    /// The set it is limited to; `None` (an empty field) for the whole namespace.
    pub set: Option<Vec<u8>>,
    /// The index's name.
    pub name: Vec<u8>,
    /// What in the bin is indexed.
    pub collection: IndexCollection,
    /// The indexed bin.
    pub bin: Vec<u8>,
    /// The type of the indexed values.
    pub value_type: IndexValueType,
    /// The msgpack-packed CDT context that locates the values inside the bin, if any (written
    /// as base64).
    pub context: Option<Vec<u8>>,
}

/// A UDF module (`* u` line). Lua (`L`) is the only type the format has.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Udf {
    /// The module's file name, such as `hello.lua`.
    pub file_name: Vec<u8>,
    /// The module's source, byte for byte.
    pub content: Vec<u8>,
}

/// A record as a backup holds it.
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    /// The namespace from `+ n`. Not compared with the header's: neither tool does, and a
    /// restore that maps namespaces decides.
    pub namespace: Vec<u8>,
    /// The digest from `+ d`; neither the format nor this crate checks it against the key.
    pub digest: Digest,
    /// The user key, present only when the record was written with `sendKey`.
    pub user_key: Option<BackupKey>,
    /// The set, `None` for a record in no set. Never empty when present.
    pub set: Option<Vec<u8>>,
    /// The record's generation (`+ g`).
    pub generation: Generation,
    /// When the record expires, in seconds since 2010-01-01 UTC; [`VoidTime::NEVER`] is 0.
    /// Absolute, not a TTL: both tools' restores skip a record whose void time has passed
    /// ([`VoidTime::is_expired_at`]) and give the others the TTL left.
    pub void_time: VoidTime,
    /// The bins in file order (asbackup keeps the server's order).
    pub bins: Vec<Bin>,
}

/// A stored user key. Unlike [`UserKey`] it owns its bytes and has a float form, which the
/// format allows (`+ k D`) though Aerospike's current clients no longer send one.
#[derive(Clone, Debug)]
pub enum BackupKey {
    /// `+ k I`.
    Integer(i64),
    /// `+ k D`.
    Float(f64),
    /// `+ k S` (or the legacy base64 `+ k X`).
    String(Vec<u8>),
    /// `+ k B` (base64) or `+ k B!` (raw, compact mode).
    Bytes(Vec<u8>),
}

impl BackupKey {
    /// The key as the model names it, or `None` for a float key, which has no particle form a
    /// current server accepts as a key.
    pub fn as_user_key(&self) -> Option<UserKey<'_>> {
        match self {
            BackupKey::Integer(value) => Some(UserKey::Integer(*value)),
            BackupKey::Float(_) => None,
            BackupKey::String(bytes) => Some(UserKey::String(bytes)),
            BackupKey::Bytes(bytes) => Some(UserKey::Blob(bytes)),
        }
    }
}

impl From<UserKey<'_>> for BackupKey {
    fn from(key: UserKey<'_>) -> BackupKey {
        match key {
            UserKey::Integer(value) => BackupKey::Integer(value),
            UserKey::String(bytes) => BackupKey::String(bytes.to_vec()),
            UserKey::Blob(bytes) => BackupKey::Bytes(bytes.to_vec()),
        }
    }
}

/// Floats compare as the format sees them: equal bits, or both NaN (every NaN is written
/// `nan`, so the sign and payload of a NaN do not survive a backup).
impl PartialEq for BackupKey {
    fn eq(&self, other: &BackupKey) -> bool {
        match (self, other) {
            (BackupKey::Integer(a), BackupKey::Integer(b)) => a == b,
            (BackupKey::Float(a), BackupKey::Float(b)) => floats_equal_as_written(*a, *b),
            (BackupKey::String(a), BackupKey::String(b)) => a == b,
            (BackupKey::Bytes(a), BackupKey::Bytes(b)) => a == b,
            _ => false,
        }
    }
}

/// One bin: its name and value.
#[derive(Clone, Debug, PartialEq)]
pub struct Bin {
    /// The bin's name.
    pub name: Vec<u8>,
    /// The bin's value.
    pub value: BinValue,
}

/// The language-specific blob types, each with its own particle type and bin letter. A
/// separate enum from [`ParticleType`] so that a blob cannot claim a non-blob type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlobKind {
    /// `B`: plain bytes.
    Bytes,
    /// `J`: a serialized Java object.
    Java,
    /// `C`: a serialized C# object.
    Csharp,
    /// `P`: a pickled Python object.
    Python,
    /// `R`: a serialized Ruby object.
    Ruby,
    /// `H`: a serialized PHP object.
    Php,
    /// `E`: a serialized Erlang term.
    Erlang,
}

impl BlobKind {
    /// Every blob kind, for tests and exhaustive tables.
    pub const ALL: [BlobKind; 7] = [
        BlobKind::Bytes,
        BlobKind::Java,
        BlobKind::Csharp,
        BlobKind::Python,
        BlobKind::Ruby,
        BlobKind::Php,
        BlobKind::Erlang,
    ];

    /// The bin letter the format writes.
    pub fn letter(self) -> u8 {
        match self {
            BlobKind::Bytes => b'B',
            BlobKind::Java => b'J',
            BlobKind::Csharp => b'C',
            BlobKind::Python => b'P',
            BlobKind::Ruby => b'R',
            BlobKind::Php => b'H',
            BlobKind::Erlang => b'E',
        }
    }

    /// The blob kind for a bin letter, or `None` for a letter that is no blob's.
    pub fn from_letter(letter: u8) -> Option<BlobKind> {
        BlobKind::ALL
            .into_iter()
            .find(|kind| kind.letter() == letter)
    }

    /// The particle type the server stores this blob as.
    pub fn particle_type(self) -> ParticleType {
        match self {
            BlobKind::Bytes => ParticleType::Blob,
            BlobKind::Java => ParticleType::JavaBlob,
            BlobKind::Csharp => ParticleType::CsharpBlob,
            BlobKind::Python => ParticleType::PythonBlob,
            BlobKind::Ruby => ParticleType::RubyBlob,
            BlobKind::Php => ParticleType::PhpBlob,
            BlobKind::Erlang => ParticleType::ErlangBlob,
        }
    }

    /// The blob kind stored as `particle_type`, or `None` for a type that is no blob.
    pub fn from_particle_type(particle_type: ParticleType) -> Option<BlobKind> {
        BlobKind::ALL
            .into_iter()
            .find(|kind| kind.particle_type() == particle_type)
    }
}

/// A bin's value, one variant per family of bin letters.
#[derive(Clone, Debug)]
pub enum BinValue {
    /// `N`: no value.
    Nil,
    /// `Z`: `T` or `F`.
    Bool(bool),
    /// `I`: a signed 64-bit integer.
    Integer(i64),
    /// `D`: a double, NaN and infinities included.
    Float(f64),
    /// `S` (or the legacy base64 `X`): string bytes, not checked for UTF-8.
    String(Vec<u8>),
    /// `G`: GeoJSON text.
    GeoJson(Vec<u8>),
    /// `B J C P R H E`: a blob with its language-specific type.
    Blob {
        /// Which blob type.
        kind: BlobKind,
        /// The blob's bytes.
        bytes: Vec<u8>,
    },
    /// `Y`: HyperLogLog bytes, opaque.
    Hll(Vec<u8>),
    /// `L`: the server's msgpack list particle, opaque and never re-encoded.
    List(Vec<u8>),
    /// `M`: the server's msgpack map particle, opaque and never re-encoded.
    Map(Vec<u8>),
}

impl BinValue {
    /// The particle type the server stores this value as.
    pub fn particle_type(&self) -> ParticleType {
        match self {
            BinValue::Nil => ParticleType::Null,
            BinValue::Bool(_) => ParticleType::Bool,
            BinValue::Integer(_) => ParticleType::Integer,
            BinValue::Float(_) => ParticleType::Float,
            BinValue::String(_) => ParticleType::String,
            BinValue::GeoJson(_) => ParticleType::GeoJson,
            BinValue::Blob { kind, .. } => kind.particle_type(),
            BinValue::Hll(_) => ParticleType::Hll,
            BinValue::List(_) => ParticleType::List,
            BinValue::Map(_) => ParticleType::Map,
        }
    }
}

/// Floats compare as the format sees them: equal bits, or both NaN.
impl PartialEq for BinValue {
    fn eq(&self, other: &BinValue) -> bool {
        match (self, other) {
            (BinValue::Nil, BinValue::Nil) => true,
            (BinValue::Bool(a), BinValue::Bool(b)) => a == b,
            (BinValue::Integer(a), BinValue::Integer(b)) => a == b,
            (BinValue::Float(a), BinValue::Float(b)) => floats_equal_as_written(*a, *b),
            (BinValue::String(a), BinValue::String(b)) => a == b,
            (BinValue::GeoJson(a), BinValue::GeoJson(b)) => a == b,
            (
                BinValue::Blob { kind, bytes },
                BinValue::Blob {
                    kind: other_kind,
                    bytes: other_bytes,
                },
            ) => kind == other_kind && bytes == other_bytes,
            (BinValue::Hll(a), BinValue::Hll(b)) => a == b,
            (BinValue::List(a), BinValue::List(b)) => a == b,
            (BinValue::Map(a), BinValue::Map(b)) => a == b,
            _ => false,
        }
    }
}

/// Whether two floats are the same once written: the same bits (so `0.0` and `-0.0` differ),
/// or both NaN.
fn floats_equal_as_written(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn letters_round_trip_for_every_table() {
        for kind in BlobKind::ALL {
            assert_eq!(BlobKind::from_letter(kind.letter()), Some(kind));
            assert_eq!(
                BlobKind::from_particle_type(kind.particle_type()),
                Some(kind)
            );
        }
        for collection in IndexCollection::ALL {
            assert_eq!(
                IndexCollection::from_letter(collection.letter()),
                Some(collection)
            );
        }
        for value_type in IndexValueType::ALL {
            assert_eq!(
                IndexValueType::from_letter(value_type.letter()),
                Some(value_type)
            );
        }
        assert_eq!(IndexCollection::from_letter(b'I'), None);
        assert_eq!(IndexValueType::from_letter(b'I'), None);
        assert_eq!(BlobKind::from_particle_type(ParticleType::String), None);
    }

    #[test]
    fn floats_compare_as_written_nan_equal_signed_zero_distinct() {
        assert_eq!(BinValue::Float(f64::NAN), BinValue::Float(-f64::NAN));
        assert_ne!(BinValue::Float(0.0), BinValue::Float(-0.0));
        assert_eq!(BackupKey::Float(1.5), BackupKey::Float(1.5));
        assert_ne!(BackupKey::Float(1.5), BackupKey::Integer(1));
    }

    #[test]
    fn user_keys_convert_both_ways_except_float() {
        let key = BackupKey::from(UserKey::String(b"abc"));
        assert_eq!(key.as_user_key(), Some(UserKey::String(b"abc")));
        assert_eq!(BackupKey::Float(2.5).as_user_key(), None);
    }
}
