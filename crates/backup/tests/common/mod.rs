//! Shared by the integration tests: the seed, a random item generator, and encode/decode
//! helpers.
//!
//! `SEED=<n>` replays a randomized test; every randomized test prints the seed it used.

#![allow(dead_code)]

use backup::{
    BackupKey, Bin, BinValue, BlobKind, DecodeError, DecodeLimits, Decoder, EncodeOptions, Encoder,
    Header, IndexCollection, IndexValueType, Item, Record, SecondaryIndex, Udf,
};
use model::{Digest, Generation, VoidTime};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// The seed from `SEED`, or a fresh one; printed so that a failure can be replayed.
pub fn seeded_rng(test: &str) -> SmallRng {
    let seed = std::env::var("SEED")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or_else(|| {
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
            now.map_or(0, |elapsed| elapsed.as_nanos() as u64)
        });
    println!("{test}: SEED={seed}");
    SmallRng::seed_from_u64(seed)
}

/// Writes `items` after `header` and returns the bytes and the offset after each item.
pub fn encode(header: &Header, items: &[Item], options: EncodeOptions) -> (Vec<u8>, Vec<u64>) {
    let mut encoder = Encoder::new(Vec::new(), header, options).expect("the header encodes");
    let mut boundaries = vec![encoder.bytes_written()];
    for item in items {
        encoder.write_item(item).expect("generated items are valid");
        boundaries.push(encoder.bytes_written());
    }
    (encoder.finish().expect("a Vec flushes"), boundaries)
}

/// Decodes a whole file: the header and items, or the first error.
pub fn decode(bytes: &[u8]) -> Result<(Header, Vec<Item>), DecodeError> {
    decode_with(bytes, DecodeLimits::default())
}

pub fn decode_with(bytes: &[u8], limits: DecodeLimits) -> Result<(Header, Vec<Item>), DecodeError> {
    let decoder = Decoder::with_limits(bytes, limits)?;
    let header = decoder.header().clone();
    let items = decoder.collect::<Result<Vec<Item>, DecodeError>>()?;
    Ok((header, items))
}

/// The 1-based line of byte `offset`: one more than the LFs before it.
pub fn line_at(bytes: &[u8], offset: usize) -> u64 {
    1 + bytes[..offset]
        .iter()
        .filter(|&&byte| byte == b'\n')
        .count() as u64
}

/// The offset of the first occurrence of `needle`.
pub fn find(bytes: &[u8], needle: &[u8]) -> usize {
    bytes
        .windows(needle.len())
        .position(|window| window == needle)
        .expect("the needle is in the file")
}

/// `bytes` with the first `old` replaced by `new`.
pub fn replace(bytes: &[u8], old: &[u8], new: &[u8]) -> Vec<u8> {
    let at = find(bytes, old);
    [&bytes[..at], new, &bytes[at + old.len()..]].concat()
}

/// Bytes that are hard to escape or frame, and some ordinary ones.
const TRICKY_BYTES: &[u8] = b" \n\\\r\t+-*#!=/aZ09\xff\x80\x01";

/// A name of 1 to `max_bytes` bytes drawn mostly from the tricky bytes; never NUL.
pub fn random_name(rng: &mut SmallRng, max_bytes: usize) -> Vec<u8> {
    let length = rng.random_range(1..=max_bytes);
    (0..length)
        .map(|_| {
            if rng.random_bool(0.7) {
                TRICKY_BYTES[rng.random_range(0..TRICKY_BYTES.len())]
            } else {
                rng.random_range(1..=u8::MAX)
            }
        })
        .collect()
}

/// Up to `max_bytes` arbitrary bytes, NUL and LF included.
pub fn random_bytes(rng: &mut SmallRng, max_bytes: usize) -> Vec<u8> {
    let length = rng.random_range(0..=max_bytes);
    (0..length).map(|_| rng.random()).collect()
}

pub fn random_float(rng: &mut SmallRng) -> f64 {
    const SPECIAL: [f64; 9] = [
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        0.0,
        -0.0,
        f64::MIN_POSITIVE,
        f64::MAX,
        5e-324,
        0.1,
    ];
    if rng.random_bool(0.3) {
        SPECIAL[rng.random_range(0..SPECIAL.len())]
    } else {
        f64::from_bits(rng.random())
    }
}

pub fn random_key(rng: &mut SmallRng) -> BackupKey {
    match rng.random_range(0..4) {
        0 => BackupKey::Integer(rng.random()),
        1 => BackupKey::Float(random_float(rng)),
        2 => BackupKey::String(random_bytes(rng, 40)),
        _ => BackupKey::Bytes(random_bytes(rng, 40)),
    }
}

pub fn random_value(rng: &mut SmallRng) -> BinValue {
    match rng.random_range(0..10) {
        0 => BinValue::Nil,
        1 => BinValue::Bool(rng.random()),
        2 => BinValue::Integer(rng.random()),
        3 => BinValue::Float(random_float(rng)),
        4 => BinValue::String(random_bytes(rng, 60)),
        5 => BinValue::GeoJson(random_bytes(rng, 60)),
        6 => BinValue::Blob {
            kind: BlobKind::ALL[rng.random_range(0..BlobKind::ALL.len())],
            bytes: random_bytes(rng, 60),
        },
        7 => BinValue::Hll(random_bytes(rng, 60)),
        8 => BinValue::List(random_bytes(rng, 60)),
        _ => BinValue::Map(random_bytes(rng, 60)),
    }
}

pub fn random_record(rng: &mut SmallRng) -> Record {
    let bin_count = rng.random_range(0..8);
    Record {
        namespace: random_name(rng, backup::NAMESPACE_BYTES_MAX),
        digest: Digest(rng.random()),
        user_key: rng.random_bool(0.5).then(|| random_key(rng)),
        set: rng
            .random_bool(0.5)
            .then(|| random_name(rng, backup::SET_BYTES_MAX)),
        generation: Generation(rng.random()),
        void_time: VoidTime(rng.random()),
        bins: (0..bin_count)
            .map(|_| Bin {
                name: random_name(rng, backup::BIN_NAME_BYTES_MAX),
                value: random_value(rng),
            })
            .collect(),
    }
}

pub fn random_secondary_index(rng: &mut SmallRng) -> SecondaryIndex {
    SecondaryIndex {
        namespace: random_name(rng, backup::NAMESPACE_BYTES_MAX),
        set: rng
            .random_bool(0.5)
            .then(|| random_name(rng, backup::SET_BYTES_MAX)),
        name: random_name(rng, 40),
        collection: IndexCollection::ALL[rng.random_range(0..4)],
        bin: random_name(rng, backup::BIN_NAME_BYTES_MAX),
        value_type: IndexValueType::ALL[rng.random_range(0..4)],
        context: rng.random_bool(0.5).then(|| {
            let mut context = random_bytes(rng, 20);
            context.push(0x91);
            context
        }),
    }
}

pub fn random_udf(rng: &mut SmallRng) -> Udf {
    Udf {
        file_name: random_name(rng, 30),
        content: random_bytes(rng, 200),
    }
}

/// A random first file: some indexes and UDFs, then records.
pub fn random_first_file(rng: &mut SmallRng, record_count: usize) -> (Header, Vec<Item>) {
    let header = Header::new(&random_name(rng, backup::NAMESPACE_BYTES_MAX), true);
    let mut items: Vec<Item> = (0..rng.random_range(0..3))
        .map(|_| Item::SecondaryIndex(random_secondary_index(rng)))
        .collect();
    items.extend((0..rng.random_range(0..3)).map(|_| Item::Udf(random_udf(rng))));
    items.extend((0..record_count).map(|_| Item::Record(random_record(rng))));
    (header, items)
}
