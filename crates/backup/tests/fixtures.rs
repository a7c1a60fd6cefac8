//! The example files of the format, written from asbackup's documented grammar and read by
//! backup-go's own decoder, decoded here item by item, and written back.

use backup::{
    BackupKey, Bin, BinValue, BlobKind, DecodeError, Decoder, EncodeOptions, Encoder,
    FormatVersion, Header, IndexCollection, IndexValueType, Item, Record, SecondaryIndex, Udf,
};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use model::{Digest, Generation, UserKey, VoidTime};

const FIRST_FILE: &[u8] = include_bytes!("fixtures/test_00000.asb");
const LATER_FILE: &[u8] = include_bytes!("fixtures/test_00001.asb");
const COMPACT_FILE: &[u8] = include_bytes!("fixtures/compact.asb");

fn decode_all(file: &[u8]) -> (Header, Vec<Item>) {
    let decoder = Decoder::new(file).expect("the header decodes");
    let header = decoder.header().clone();
    let items: Result<Vec<Item>, DecodeError> = decoder.collect();
    (header, items.expect("every item decodes"))
}

fn encode_all(header: &Header, items: &[Item], options: EncodeOptions) -> Vec<u8> {
    let mut encoder = Encoder::new(Vec::new(), header, options).expect("the header encodes");
    for item in items {
        encoder.write_item(item).expect("the item encodes");
    }
    let length = encoder.bytes_written();
    let bytes = encoder.finish().expect("a Vec flushes");
    assert_eq!(bytes.len() as u64, length);
    bytes
}

fn digest(base64: &str) -> Digest {
    let bytes = STANDARD.decode(base64).expect("fixture digests are base64");
    Digest::from_slice(&bytes).expect("fixture digests are 20 bytes")
}

fn bin(name: &[u8], value: BinValue) -> Bin {
    Bin {
        name: name.to_vec(),
        value,
    }
}

fn index(set: Option<&[u8]>, name: &[u8], collection: IndexCollection) -> SecondaryIndex {
    SecondaryIndex {
        namespace: b"test".to_vec(),
        set: set.map(<[u8]>::to_vec),
        name: name.to_vec(),
        collection,
        bin: Vec::new(),
        value_type: IndexValueType::Numeric,
        context: None,
    }
}

fn first_file_indexes() -> Vec<Item> {
    let age = SecondaryIndex {
        bin: b"age".to_vec(),
        ..index(Some(b"demo"), b"idx_age", IndexCollection::Default)
    };
    let tags = SecondaryIndex {
        bin: b"tags".to_vec(),
        value_type: IndexValueType::String,
        ..index(None, b"idx_tags", IndexCollection::List)
    };
    let map_values = SecondaryIndex {
        bin: b"m".to_vec(),
        context: Some(vec![0x92, 0x22, 0xa2, 0x03, 0x61]),
        ..index(Some(b"demo"), b"idx_m", IndexCollection::MapValues)
    };
    let udf = Udf {
        file_name: b"hello.lua".to_vec(),
        content: b"function hello(rec)\n  return 1\nend\n".to_vec(),
    };
    vec![
        Item::SecondaryIndex(age),
        Item::SecondaryIndex(tags),
        Item::SecondaryIndex(map_values),
        Item::Udf(udf),
    ]
}

fn every_bin_type() -> Vec<Bin> {
    vec![
        bin(b"nothing", BinValue::Nil),
        bin(b"flag", BinValue::Bool(true)),
        bin(b"age", BinValue::Integer(-7)),
        bin(b"ratio", BinValue::Float(0.1)),
        bin(b"bad", BinValue::Float(f64::NAN)),
        bin(b"name", BinValue::String(b"Ann\nLee".to_vec())),
        bin(
            b"loc",
            BinValue::GeoJson(br#"{"type":"Point","coordinates":[1.5,2.5]}"#.to_vec()),
        ),
        bin(b"blob", blob(BlobKind::Bytes, &[0x00, 0x01, 0xff])),
        bin(b"jblob", blob(BlobKind::Java, &[0xac, 0xed])),
        bin(b"hll", BinValue::Hll(vec![0x0e, 0, 0, 0])),
        bin(b"tags", BinValue::List(vec![0x92, 0x01, 0xa2, 0x03, 0x61])),
        bin(b"m", BinValue::Map(vec![0x81, 0xa2, 0x03, 0x6b, 0x07])),
        bin(b"empty map", BinValue::Map(vec![0x80])),
        bin(b"a\\b", BinValue::List(vec![0x90])),
    ]
}

fn blob(kind: BlobKind, bytes: &[u8]) -> BinValue {
    BinValue::Blob {
        kind,
        bytes: bytes.to_vec(),
    }
}

fn first_file_records() -> Vec<Item> {
    let every_type = Record {
        namespace: b"test".to_vec(),
        digest: Digest::compute(b"demo", &UserKey::Integer(42)),
        user_key: Some(BackupKey::Integer(42)),
        set: Some(b"demo".to_vec()),
        generation: Generation(3),
        void_time: VoidTime::NEVER,
        bins: every_bin_type(),
    };
    let string_key = Record {
        namespace: b"test".to_vec(),
        digest: Digest::compute(b"my set", &UserKey::String(b"user 1")),
        user_key: Some(BackupKey::String(b"user 1".to_vec())),
        set: Some(b"my set".to_vec()),
        generation: Generation(1),
        void_time: VoidTime(520_000_000),
        bins: vec![bin(b"count", BinValue::Integer(1))],
    };
    let digest_only = Record {
        namespace: b"test".to_vec(),
        digest: Digest::compute(b"", &UserKey::Integer(7)),
        user_key: None,
        set: None,
        generation: Generation(u16::MAX),
        void_time: VoidTime::NEVER,
        bins: vec![bin(b"s", BinValue::String(Vec::new()))],
    };
    [every_type, string_key, digest_only]
        .map(Item::Record)
        .into()
}

#[test]
fn first_file_decodes_to_indexes_udf_and_every_bin_type() {
    let (header, items) = decode_all(FIRST_FILE);
    assert_eq!(header, Header::new(b"test", true));
    let mut expected = first_file_indexes();
    expected.extend(first_file_records());
    assert_eq!(items, expected);
}

#[test]
fn later_file_decodes_base64_key_and_legacy_base64_string() {
    let (header, items) = decode_all(LATER_FILE);
    assert_eq!(header.version, FormatVersion::V3_1);
    assert!(!header.first_file);
    let record = Record {
        namespace: b"test".to_vec(),
        digest: Digest::compute(b"", &UserKey::Blob(&[1, 2])),
        user_key: Some(BackupKey::Bytes(vec![1, 2])),
        set: None,
        generation: Generation(2),
        void_time: VoidTime::NEVER,
        bins: vec![bin(b"sx", BinValue::String(b"hi".to_vec()))],
    };
    assert_eq!(items, vec![Item::Record(record)]);
}

#[test]
fn compact_file_decodes_raw_bytes_with_newlines_and_nuls() {
    let (header, items) = decode_all(COMPACT_FILE);
    assert_eq!(header, Header::new(b"bar", true));
    let raw_key = Record {
        namespace: b"bar".to_vec(),
        digest: Digest::compute(b"s1", &UserKey::Blob(b"k\0y")),
        user_key: Some(BackupKey::Bytes(b"k\0y".to_vec())),
        set: Some(b"s1".to_vec()),
        generation: Generation(1),
        void_time: VoidTime::NEVER,
        bins: vec![
            bin(b"b", blob(BlobKind::Bytes, b"a\nb")),
            bin(b"m", BinValue::Map(vec![0x80])),
            bin(b"h", BinValue::Hll(vec![0x0e, 0x00])),
        ],
    };
    let float_key = Record {
        namespace: b"bar".to_vec(),
        digest: digest("pEPwXQXZYiArWau0Aq+uFzfb9mo="),
        user_key: Some(BackupKey::Float(2.5)),
        set: None,
        generation: Generation(1),
        void_time: VoidTime::NEVER,
        bins: vec![bin(b"x", BinValue::Float(f64::NEG_INFINITY))],
    };
    assert_eq!(items, vec![Item::Record(raw_key), Item::Record(float_key)]);
}

/// The compact file uses only forms the encoder writes, so writing its items back in compact
/// mode gives the same bytes.
#[test]
fn compact_file_encodes_back_byte_for_byte() {
    let (header, items) = decode_all(COMPACT_FILE);
    let compact = EncodeOptions { compact: true };
    assert_eq!(encode_all(&header, &items, compact), COMPACT_FILE);
}

/// The first file differs from the encoder's output in one place: the C tool's `%.17g` float
/// `0.10000000000000001`, which this crate writes as the shortest form `0.1`.
#[test]
fn first_file_encodes_back_but_for_its_c_float() {
    let (header, items) = decode_all(FIRST_FILE);
    let written = encode_all(&header, &items, EncodeOptions::default());
    let expected = String::from_utf8_lossy(FIRST_FILE).replace("0.10000000000000001", "0.1");
    assert_eq!(String::from_utf8_lossy(&written), expected);
}

/// The later file's legacy `X` forms are read as strings and written as `S`.
#[test]
fn later_file_encodes_its_legacy_string_as_raw() {
    let (header, items) = decode_all(LATER_FILE);
    let written = encode_all(&header, &items, EncodeOptions::default());
    let expected = String::from_utf8_lossy(LATER_FILE).replace("- X sx 4 aGk=", "- S sx 2 hi");
    assert_eq!(String::from_utf8_lossy(&written), expected);
}
