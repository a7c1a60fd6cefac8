//! What the encoder writes, the decoder reads back equal: every bin and key type, names that
//! need escaping, random files in both modes, through zstd and through one-byte reads.

mod common;

use std::io::{BufReader, Read as _, Write as _};

use backup::{
    BackupKey, Bin, BinValue, BlobKind, DecodeErrorKind, Decoder, EncodeError, EncodeOptions,
    Encoder, Header, IndexCollection, IndexValueType, Item, Record, SecondaryIndex, Udf,
    zstd_reader, zstd_writer,
};
use common::{decode, encode, random_first_file, seeded_rng};
use model::{Digest, Generation, VoidTime};

const BOTH_MODES: [EncodeOptions; 2] = [
    EncodeOptions { compact: false },
    EncodeOptions { compact: true },
];

fn record(name: &[u8], user_key: Option<BackupKey>, bins: Vec<Bin>) -> Record {
    Record {
        namespace: b"test".to_vec(),
        digest: Digest([7; 20]),
        user_key,
        set: Some(name.to_vec()),
        generation: Generation(1),
        void_time: VoidTime(123),
        bins,
    }
}

fn bin(name: &[u8], value: BinValue) -> Bin {
    Bin {
        name: name.to_vec(),
        value,
    }
}

fn assert_round_trips(header: &Header, items: &[Item]) {
    for options in BOTH_MODES {
        let (bytes, _) = encode(header, items, options);
        let (decoded_header, decoded_items) = decode(&bytes)
            .unwrap_or_else(|error| panic!("{error} in {options:?}:\n{}", bytes.escape_ascii()));
        assert_eq!(&decoded_header, header);
        assert_eq!(decoded_items, items, "{options:?}");
    }
}

fn every_value() -> Vec<BinValue> {
    let mut values = vec![
        BinValue::Nil,
        BinValue::Bool(false),
        BinValue::Bool(true),
        BinValue::Integer(i64::MIN),
        BinValue::Integer(i64::MAX),
        BinValue::Float(f64::NAN),
        BinValue::Float(f64::INFINITY),
        BinValue::Float(f64::NEG_INFINITY),
        BinValue::Float(-0.0),
        BinValue::Float(1e300),
        BinValue::Float(-2.5e-310),
        BinValue::String(Vec::new()),
        BinValue::String(b"a b\nc\\d\0e\r\n".to_vec()),
        BinValue::GeoJson(
            br#"{"type":"Polygon","coordinates":[[[0,0],[1,0],[1,1],[0,0]]]}"#.to_vec(),
        ),
        BinValue::Hll(vec![0x0e, 0, 0, 0, 0xff]),
        BinValue::List(vec![0x90]),
        BinValue::Map(vec![0x80]),
        BinValue::List(vec![0x92, 0x01, 0xa2, 0x03, 0x61]),
        BinValue::Map(vec![0x81, 0xc7, 0x00, 0x03, 0xa2, 0x03, 0x6b, 0x07]),
    ];
    for kind in BlobKind::ALL {
        values.push(BinValue::Blob {
            kind,
            bytes: Vec::new(),
        });
        values.push(BinValue::Blob {
            kind,
            bytes: (0..=255).collect(),
        });
    }
    values
}

#[test]
fn every_bin_type_round_trips_in_both_modes() {
    let bins = every_value()
        .into_iter()
        .enumerate()
        .map(|(bin_index, value)| bin(format!("b{bin_index}").as_bytes(), value))
        .collect();
    let items = vec![Item::Record(record(b"s", None, bins))];
    assert_round_trips(&Header::new(b"test", false), &items);
}

#[test]
fn every_key_type_round_trips_in_both_modes() {
    let keys = [
        BackupKey::Integer(i64::MIN),
        BackupKey::Integer(0),
        BackupKey::Float(f64::NAN),
        BackupKey::Float(-0.0),
        BackupKey::Float(1e-300),
        BackupKey::Float(f64::NEG_INFINITY),
        BackupKey::String(Vec::new()),
        BackupKey::String(b"user 1\n\0\\".to_vec()),
        BackupKey::Bytes(Vec::new()),
        BackupKey::Bytes(b"k\0y\n".to_vec()),
    ];
    let items: Vec<Item> = keys
        .into_iter()
        .map(|key| Item::Record(record(b"s", Some(key), vec![bin(b"x", BinValue::Nil)])))
        .collect();
    assert_round_trips(&Header::new(b"test", false), &items);
}

#[test]
fn names_with_spaces_newlines_and_backslashes_round_trip() {
    let names: [&[u8]; 7] = [b" ", b"\n", b"\\", b"\\\\ \n", b"a b", b"end\\", b"\n\n\n"];
    let mut items = Vec::new();
    for name in names {
        items.push(Item::SecondaryIndex(SecondaryIndex {
            namespace: name.to_vec(),
            set: Some(name.to_vec()),
            name: name.to_vec(),
            collection: IndexCollection::MapKeys,
            bin: name.to_vec(),
            value_type: IndexValueType::Blob,
            context: None,
        }));
    }
    items.push(Item::Udf(Udf {
        file_name: b"my module\\v2\n.lua".to_vec(),
        content: b"-- a\n\n\0end".to_vec(),
    }));
    for name in names {
        let mut item = record(name, None, vec![bin(name, BinValue::Integer(1))]);
        item.namespace = name.to_vec();
        items.push(Item::Record(item));
    }
    assert_round_trips(&Header::new(b"name space\\\n", true), &items);
}

#[test]
fn empty_records_and_files_round_trip() {
    let items = vec![Item::Record(record(b"s", None, Vec::new()))];
    assert_round_trips(&Header::new(b"test", false), &items);
    assert_round_trips(&Header::new(b"test", true), &[]);
}

#[test]
fn random_files_round_trip_in_both_modes() {
    let mut rng = seeded_rng("random_files_round_trip_in_both_modes");
    for _ in 0..200 {
        let (header, items) = random_first_file(&mut rng, 5);
        assert_round_trips(&header, &items);
    }
}

/// A reader that hands over one byte at a time makes every value arrive in pieces, which is
/// how a slow pipe or a decompressor delivers it.
#[test]
fn random_files_decode_through_one_byte_reads() {
    let mut rng = seeded_rng("random_files_decode_through_one_byte_reads");
    for _ in 0..20 {
        let (header, items) = random_first_file(&mut rng, 5);
        let (bytes, _) = encode(&header, &items, EncodeOptions::default());
        let reader = BufReader::with_capacity(1, &bytes[..]);
        let decoder = Decoder::new(reader).expect("the header decodes");
        let decoded: Vec<Item> = decoder.map(|item| item.expect("items decode")).collect();
        assert_eq!(decoded, items);
    }
}

#[test]
fn zstd_stream_round_trips_and_carries_a_checksum() {
    let mut rng = seeded_rng("zstd_stream_round_trips_and_carries_a_checksum");
    let (header, items) = random_first_file(&mut rng, 50);
    let (plain, _) = encode(&header, &items, EncodeOptions::default());
    let mut writer = zstd_writer(Vec::new(), backup::ZSTD_LEVEL_DEFAULT).expect("level 3 is valid");
    writer.write_all(&plain).expect("a Vec takes every byte");
    let compressed = writer.finish().expect("a Vec flushes");
    assert!(compressed.starts_with(&backup::ZSTD_MAGIC));
    // Frame header descriptor, bit 2: the content checksum flag (RFC 8878, 3.1.1.1.1).
    assert_ne!(compressed[4] & 0b100, 0, "the checksum flag is set");

    let decoder = Decoder::new(zstd_reader(&compressed[..]).expect("a decoder")).expect("header");
    let decoded: Vec<Item> = decoder.map(|item| item.expect("items decode")).collect();
    assert_eq!(decoded, items);
}

/// asbackup's C writer sets no content checksum; its streams read all the same.
#[test]
fn zstd_stream_without_a_checksum_reads() {
    let mut rng = seeded_rng("zstd_stream_without_a_checksum_reads");
    let (header, items) = random_first_file(&mut rng, 10);
    let (plain, _) = encode(&header, &items, EncodeOptions::default());
    let compressed = zstd::stream::encode_all(&plain[..], 3).expect("in-memory compression");
    assert_eq!(compressed[4] & 0b100, 0, "no checksum flag");
    let decoder = Decoder::new(zstd_reader(&compressed[..]).expect("a decoder")).expect("header");
    let decoded: Vec<Item> = decoder.map(|item| item.expect("items decode")).collect();
    assert_eq!(decoded, items);
}

/// Corrupting the compressed bytes or cutting them short must fail the read, never yield a
/// different backup: the checksum and the frame structure catch what the text cannot.
#[test]
fn zstd_stream_cut_short_or_corrupted_fails_to_read() {
    let mut rng = seeded_rng("zstd_stream_cut_short_or_corrupted_fails_to_read");
    let (header, items) = random_first_file(&mut rng, 50);
    let (plain, _) = encode(&header, &items, EncodeOptions::default());
    let mut writer = zstd_writer(Vec::new(), 1).expect("level 1 is valid");
    writer.write_all(&plain).expect("a Vec takes every byte");
    let compressed = writer.finish().expect("a Vec flushes");

    let read_all = |bytes: &[u8]| {
        let mut out = Vec::new();
        zstd_reader(bytes)
            .expect("a decoder")
            .read_to_end(&mut out)
            .map(|_| out)
    };
    assert_eq!(read_all(&compressed).ok(), Some(plain.clone()));
    for cut in [
        compressed.len() - 1,
        compressed.len() - 4,
        compressed.len() / 2,
    ] {
        assert!(read_all(&compressed[..cut]).is_err(), "cut at {cut}");
    }
    // The last four bytes are the checksum; a byte in the middle is compressed content.
    for position in [compressed.len() - 2, compressed.len() / 2] {
        let mut corrupted = compressed.clone();
        corrupted[position] ^= 0x01;
        let outcome = read_all(&corrupted);
        assert!(outcome.is_err(), "flip at {position} read back");
    }
}

#[test]
fn encoder_refuses_invalid_items_and_writes_nothing_for_them() {
    let mut encoder = Encoder::new(
        Vec::new(),
        &Header::new(b"test", false),
        EncodeOptions::default(),
    )
    .expect("header");
    let before = encoder.bytes_written();
    let udf = Udf {
        file_name: b"a.lua".to_vec(),
        content: Vec::new(),
    };
    assert!(matches!(
        encoder.write_udf(&udf),
        Err(EncodeError::GlobalOutsideFirstFile)
    ));
    let invalid_names: [&[u8]; 3] = [b"", b"a\0b", b"sixteen bytes..."];
    for name in invalid_names {
        let item = record(b"s", None, vec![bin(name, BinValue::Nil)]);
        let result = encoder.write_record(&item);
        assert!(matches!(
            result,
            Err(EncodeError::InvalidName {
                field: "bin name",
                ..
            })
        ));
    }
    let invalid_sets = [
        Vec::new(),
        b"a\0b".to_vec(),
        vec![b'x'; backup::SET_BYTES_MAX + 1],
    ];
    for set in invalid_sets {
        let item = record(&set, None, Vec::new());
        let result = encoder.write_record(&item);
        assert!(matches!(
            result,
            Err(EncodeError::InvalidName { field: "set", .. })
        ));
    }
    assert_eq!(encoder.bytes_written(), before);
    assert_eq!(encoder.finish().expect("flush").len() as u64, before);
}

#[test]
fn encoder_refuses_global_lines_after_a_record_and_old_headers() {
    let mut encoder = Encoder::new(
        Vec::new(),
        &Header::new(b"test", true),
        EncodeOptions::default(),
    )
    .expect("header");
    encoder
        .write_record(&record(b"s", None, Vec::new()))
        .expect("valid record");
    let udf = Udf {
        file_name: b"a.lua".to_vec(),
        content: Vec::new(),
    };
    assert!(matches!(
        encoder.write_udf(&udf),
        Err(EncodeError::GlobalAfterRecord)
    ));
    let old = Header {
        version: backup::FormatVersion::V3_0,
        ..Header::new(b"test", false)
    };
    let result = Encoder::new(Vec::new(), &old, EncodeOptions::default());
    assert!(matches!(result, Err(EncodeError::InvalidHeader)));
    let empty_namespace = Header::new(b"", false);
    let result = Encoder::new(Vec::new(), &empty_namespace, EncodeOptions::default());
    assert!(matches!(
        result,
        Err(EncodeError::InvalidName {
            field: "namespace",
            ..
        })
    ));
}

/// Version 3.0 files predate escaping: a backslash is an ordinary byte, and there are no
/// global lines.
#[test]
fn version_3_0_reads_names_unescaped_and_refuses_global_lines() {
    let file = b"Version 3.0\n+ n te\\st\n+ d AAAAAAAAAAAAAAAAAAAAAAAAAAA=\n+ g 1\n+ t 0\n+ b 0\n";
    let (header, items) = decode(file).expect("a 3.0 file decodes");
    assert_eq!(header.version, backup::FormatVersion::V3_0);
    assert_eq!(header.namespace, None);
    let Item::Record(record) = &items[0] else {
        panic!("a record");
    };
    assert_eq!(record.namespace, b"te\\st");

    let file = b"Version 3.0\n# namespace test\n# first-file\n* u L a.lua 0 \n";
    let error = decode(file).expect_err("3.0 has no global lines");
    assert!(matches!(
        error.kind,
        DecodeErrorKind::GlobalOutsideFirstFile
    ));
    assert_eq!(error.line, 4);
}
