use super::*;
use crate::resp::rdb::{RdbGroup, RdbStream};
use crate::resp::streams::StreamId;

/// Every item of a file, or the refusal.
fn read_all(bytes: &[u8]) -> Result<Vec<Item>, RdbError> {
    let mut reader = RdbFileReader::new(bytes)?;
    let mut items = Vec::new();
    while let Some(item) = reader.next_item()? {
        items.push(item);
    }
    Ok(items)
}

fn keys_of(items: Vec<Item>) -> Vec<(u64, Vec<u8>, RdbValue, Option<i64>)> {
    items
        .into_iter()
        .filter_map(|item| match item {
            Item::Key(k) => Some((k.database, k.key, k.value, k.expire_at_ms)),
            _ => None,
        })
        .collect()
}

fn strings(words: &[&str]) -> Vec<Vec<u8>> {
    words.iter().map(|w| w.as_bytes().to_vec()).collect()
}

/// A file of every type Osprey writes, in two databases, one key with an expiry.
fn sample_file() -> Vec<u8> {
    let stream = RdbStream {
        entries: vec![(StreamId { ms: 1, seq: 1 }, strings(&["f", "v"]))],
        last_id: StreamId { ms: 1, seq: 1 },
        entries_added: 1,
        groups: vec![RdbGroup {
            name: b"g".to_vec(),
            ..RdbGroup::default()
        }],
        ..RdbStream::default()
    };
    let values = [
        RdbValue::String(b"hello".to_vec()),
        RdbValue::List(strings(&["a", "b"])),
        RdbValue::Set(strings(&["x"])),
        RdbValue::ZSet(vec![(b"m".to_vec(), 1.5)]),
        RdbValue::Hash(vec![(b"f".to_vec(), b"v".to_vec())]),
        RdbValue::Stream(Box::new(stream)),
    ];
    let mut writer = RdbFileWriter::new(Vec::new(), 1_700_000_000).expect("a Vec takes writes");
    writer
        .function(b"#!lua name=lib\n")
        .expect("a Vec takes writes");
    writer.select_database(0, 6).expect("a Vec takes writes");
    let mut records = Vec::new();
    for (index, value) in values.iter().enumerate() {
        let expiry = (index == 0).then_some(1_900_000_000_000);
        RdbFileWriter::<Vec<u8>>::encode_key(
            &mut records,
            format!("k{index}").as_bytes(),
            value,
            expiry,
        );
    }
    writer.write_encoded(&records).expect("a Vec takes writes");
    writer.select_database(3, 1).expect("a Vec takes writes");
    records.clear();
    RdbFileWriter::<Vec<u8>>::encode_key(&mut records, b"three", &values[0], None);
    writer.write_encoded(&records).expect("a Vec takes writes");
    writer.finish().expect("a Vec takes writes")
}

#[test]
fn a_written_file_reads_back_item_by_item() {
    let items = read_all(&sample_file()).expect("the file reads");
    assert!(
        matches!(&items[0], Item::Aux { name, value } if name == b"redis-ver" && value == b"7.0.15")
    );
    let functions: Vec<&Item> = items
        .iter()
        .filter(|i| matches!(i, Item::Function(_)))
        .collect();
    assert_eq!(functions.len(), 1);
    let keys = keys_of(items);
    assert_eq!(keys.len(), 7);
    assert_eq!(keys[0].1, b"k0");
    assert_eq!(keys[0].3, Some(1_900_000_000_000));
    assert_eq!(
        keys[6],
        (
            3,
            b"three".to_vec(),
            RdbValue::String(b"hello".to_vec()),
            None
        )
    );
    assert!(matches!(&keys[5].2, RdbValue::Stream(s) if s.groups[0].name == b"g"));
}

/// redis-server 7.0.15's SAVE of every type it has (strings plain, integer and long, a list,
/// an intset, a listpack set, a sorted set, a hash, a HyperLogLog, a bitmap, a geo key, a
/// stream with a deleted entry and a group with a pending entry, a key with an expiry, a key
/// in database 3, a function library).
#[test]
fn a_file_of_redis_server_reads() {
    let bytes = include_bytes!("redis-7.0.15-every-type.rdb");
    let items = read_all(bytes).expect("redis-server's file reads");
    let functions = items
        .iter()
        .filter(|i| matches!(i, Item::Function(_)))
        .count();
    assert_eq!(functions, 1);
    let keys = keys_of(items);
    assert_eq!(keys.len(), 14);
    let find = |name: &str| {
        keys.iter()
            .find(|k| k.1 == name.as_bytes())
            .unwrap_or_else(|| panic!("{name} is in the file"))
    };
    assert_eq!(find("i").2, RdbValue::String(b"12345".to_vec()));
    assert_eq!(find("l").2, RdbValue::List(strings(&["a", "b", "3", "4"])));
    assert_eq!(find("st").2, RdbValue::Set(strings(&["1", "2", "3"])));
    assert!(find("e").3.is_some());
    assert_eq!(find("three").0, 3);
    let RdbValue::Stream(stream) = &find("x").2 else {
        panic!("x is a stream");
    };
    assert_eq!(stream.entries.len(), 2);
    assert_eq!(stream.max_deleted_id, StreamId { ms: 1, seq: 2 });
    assert_eq!(stream.groups[0].pending[0].consumer, b"alice");
}

#[test]
fn every_truncation_is_refused_as_truncated() {
    let file = sample_file();
    for length in 9..file.len() {
        let error = read_all(&file[..length]).expect_err("a truncated file is refused");
        assert!(
            matches!(error.problem, Problem::Truncated),
            "length {length}: {error}"
        );
    }
    assert!(matches!(
        read_all(&file[..4]).map(|_| ()),
        Err(RdbError {
            problem: Problem::NotAnRdbFile,
            ..
        })
    ));
}

#[test]
fn a_flipped_byte_is_refused() {
    let file = sample_file();
    for position in 9..file.len() - 8 {
        let mut changed = file.clone();
        changed[position] ^= 0x20;
        assert!(read_all(&changed).is_err(), "byte {position}");
    }
    let mut changed = file.clone();
    let last_value_byte = file.len() - 10;
    changed[last_value_byte] ^= 1;
    let error = read_all(&changed).expect_err("a changed byte is refused");
    assert!(matches!(error.problem, Problem::Checksum { .. }), "{error}");
}

#[test]
fn a_zero_checksum_is_not_checked() {
    let mut file = sample_file();
    let at = file.len() - 8;
    file[at..].fill(0);
    assert!(read_all(&file).is_ok());
}

#[test]
fn newer_versions_and_other_files_are_refused() {
    let mut file = sample_file();
    file[5..9].copy_from_slice(b"0011");
    let error = read_all(&file).expect_err("version 11 is refused");
    assert!(matches!(error.problem, Problem::Version(11)));
    assert!(
        error.to_string().contains("RDB version 11 is newer"),
        "{error}"
    );
    file[..5].copy_from_slice(b"RODIS");
    assert!(matches!(
        read_all(&file).map(|_| ()),
        Err(RdbError {
            problem: Problem::NotAnRdbFile,
            ..
        })
    ));
}

/// A module id as Redis makes one: 9 characters of 6 bits, then 10 bits of version.
fn module_id(name: &str, version: u64) -> u64 {
    const CHARSET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let id = name.bytes().fold(0u64, |id, c| {
        let position = CHARSET
            .iter()
            .position(|x| *x == c)
            .expect("a module name character");
        (id << 6) | position as u64
    });
    (id << 10) | version
}

#[test]
fn a_module_value_is_refused_by_its_module_name() {
    let mut file = b"REDIS0010".to_vec();
    file.extend_from_slice(&[opcode::SELECTDB, 2, rdb_type::MODULE_2, 1, b'x', 0x81]);
    file.extend_from_slice(&module_id("ReJSON-RL", 3).to_be_bytes());
    let error = read_all(&file).expect_err("a module value is refused");
    assert_eq!(
        error.to_string(),
        "key \"x\" in db 2: module type 'ReJSON-RL' is not something Osprey stores (at byte 11)"
    );
}

#[test]
fn module_aux_data_and_old_function_records_are_refused() {
    let mut file = b"REDIS0010".to_vec();
    file.extend_from_slice(&[opcode::MODULE_AUX, 0x81]);
    file.extend_from_slice(&module_id("graphdata", 1).to_be_bytes());
    let error = read_all(&file).expect_err("module aux data is refused");
    assert!(matches!(&error.problem, Problem::ModuleAux(name) if name == "graphdata"));
    let file = b"REDIS0010\xf6".to_vec();
    assert!(matches!(
        read_all(&file).map(|_| ()),
        Err(RdbError {
            problem: Problem::FunctionPreGa,
            ..
        })
    ));
}

#[test]
fn a_declared_length_beyond_the_file_is_refused_without_allocating_it() {
    let mut file = b"REDIS0010".to_vec();
    file.extend_from_slice(&[rdb_type::STRING, 1, b'k', 0x81]);
    file.extend_from_slice(&(u64::MAX / 2).to_be_bytes());
    file.extend_from_slice(b"abc");
    let error = read_all(&file).expect_err("a string longer than the file is refused");
    assert!(matches!(error.problem, Problem::Truncated), "{error}");
}

/// Random files, and random changes to a valid one: the reader answers or refuses, never
/// panics. SEED= replays a run.
#[test]
fn random_files_never_panic() {
    let mut next = crate::test_seed::xorshift(crate::test_seed::seed("rdb files"));
    let valid = sample_file();
    let redis = include_bytes!("redis-7.0.15-every-type.rdb").to_vec();
    for round in 0..5_000 {
        let mut file = match round % 3 {
            0 => valid.clone(),
            1 => redis.clone(),
            _ => {
                let mut file = b"REDIS0010".to_vec();
                file.extend((0..next() % 256).map(|_| next() as u8));
                file
            }
        };
        for _ in 0..1 + next() % 4 {
            let position = 9 + (next() as usize) % (file.len() - 9).max(1);
            if let Some(byte) = file.get_mut(position) {
                *byte = next() as u8;
            }
        }
        if next().is_multiple_of(4) {
            file.truncate((next() as usize) % file.len());
        }
        let _ = read_all(&file);
    }
}
