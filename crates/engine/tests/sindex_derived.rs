//! Secondary indexes whose values are not a bin's own: on an element inside a list or map (a
//! CDT context), on an expression, and on blobs, through the engine's public API against a
//! model.
//!
//! A seeded generator writes records with a list bin `l` (integers), a map bin `m` (string
//! keys to integers), integer bins `x` and `y` and a blob bin `b`, rewrites and deletes them,
//! and creates the indexes part-way (so the build covers existing records). After every round
//! each index, queried over random ranges, returns exactly the model's records with a value in
//! the range, each once however many of its values are (collection indexes), and holds exactly
//! one entry per distinct value. The seed is
//! printed; `SEED=<n> cargo test -p engine --test sindex_derived` replays a failure.

mod common;
#[path = "common/four_partitions.rs"]
mod four_partitions;

use std::collections::BTreeMap;
use std::sync::Arc;

use engine::collection::{List, Map, MapOrder, Value, pack};
use engine::{
    Acks, Deadline, ExistsPolicy, GenerationPolicy, IndexCollection, IndexDefinition, IndexError,
    IndexKey, IndexKind, IndexSource, KeyRange, ManualClock, Namespace, NamespaceConfig,
    WriteRequest,
};
use model::{CITRUSLEAF_EPOCH_UNIX_SECONDS, Op, OpCode, PartitionId, TtlRequest};
use rand::rngs::SmallRng;
use rand::{Rng as _, SeedableRng as _};

use four_partitions::{NoSink, PARTITIONS_USED, delete_request, digest};

const START_UNIX_MS: u64 = (CITRUSLEAF_EPOCH_UNIX_SECONDS + 1_000_000) * 1000;
const KEY_COUNT: u64 = 300;
const ROUNDS: usize = 30;

/// One record of the model.
#[derive(Clone, Debug)]
struct Row {
    list: Vec<i64>,
    /// Map `m`: key -> value.
    map: BTreeMap<String, i64>,
    x: i64,
    y: Option<i64>,
    blob: Vec<u8>,
}

/// A context step reaching a list element by index (`LIST_INDEX`, 0x10).
fn list_index_context(index: i64) -> Vec<u8> {
    pack(&list(vec![Value::Int(0x10), Value::Int(index)]))
}

/// A context step reaching a map value by key (`MAP_KEY`, 0x22).
fn map_key_context(key: &str) -> Vec<u8> {
    pack(&list(vec![Value::Int(0x22), Value::string(key.as_bytes())]))
}

fn list(items: Vec<Value>) -> Value {
    Value::List(List {
        ordered: false,
        items,
    })
}

/// `BIN(int, name)`: `[81, 2, name]` with the name as a plain msgpack str.
fn int_bin(name: &str) -> Vec<u8> {
    let mut packed = vec![0x93, 0x51, 0x02, 0xa0 | name.len() as u8];
    packed.extend_from_slice(name.as_bytes());
    packed
}

/// `ADD(a, b)`: `[20, a, b]`.
fn add(a: &[u8], b: &[u8]) -> Vec<u8> {
    let mut packed = vec![0x93, 20];
    packed.extend_from_slice(a);
    packed.extend_from_slice(b);
    packed
}

fn definition(name: &str, source: IndexSource, kind: IndexKind) -> IndexDefinition {
    IndexDefinition {
        name: name.to_owned(),
        set_name: None,
        source,
        kind,
        collection: IndexCollection::Default,
    }
}

/// What an index under test holds for a row.
type KeysOf = fn(&Row) -> Vec<IndexKey>;

/// The indexes under test, with what each holds for a row.
fn indexes() -> Vec<(IndexDefinition, KeysOf)> {
    vec![
        (
            definition(
                "first_of_l",
                IndexSource::BinContext {
                    bin: b"l".to_vec(),
                    context: list_index_context(0),
                },
                IndexKind::Numeric,
            ),
            |row| {
                row.list
                    .first()
                    .map(|&v| IndexKey::Int(v))
                    .into_iter()
                    .collect()
            },
        ),
        (
            definition(
                "m_at_a",
                IndexSource::BinContext {
                    bin: b"m".to_vec(),
                    context: map_key_context("a"),
                },
                IndexKind::Numeric,
            ),
            |row| {
                row.map
                    .get("a")
                    .map(|&v| IndexKey::Int(v))
                    .into_iter()
                    .collect()
            },
        ),
        (
            definition(
                "x_plus_y",
                IndexSource::Expression(add(&int_bin("x"), &int_bin("y"))),
                IndexKind::Numeric,
            ),
            |row| {
                row.y
                    .map(|y| IndexKey::Int(row.x + y))
                    .into_iter()
                    .collect()
            },
        ),
        (
            IndexDefinition {
                collection: IndexCollection::List,
                ..definition(
                    "items_of_l",
                    IndexSource::Bin(b"l".to_vec()),
                    IndexKind::Numeric,
                )
            },
            |row| distinct(row.list.iter().map(|&v| IndexKey::Int(v))),
        ),
        (
            // `[81, LIST (4), "l"]`: the same items through an expression.
            IndexDefinition {
                collection: IndexCollection::List,
                ..definition(
                    "items_of_l_by_expression",
                    IndexSource::Expression(vec![0x93, 0x51, 0x04, 0xa1, b'l']),
                    IndexKind::Numeric,
                )
            },
            |row| distinct(row.list.iter().map(|&v| IndexKey::Int(v))),
        ),
        (
            definition("by_blob", IndexSource::Bin(b"b".to_vec()), IndexKind::Blob),
            |row| vec![IndexKey::Str(row.blob.as_slice().into())],
        ),
        (
            IndexDefinition {
                collection: IndexCollection::MapKeys,
                ..definition(
                    "keys_of_m",
                    IndexSource::Expression(vec![0x93, 0x51, 0x05, 0xa1, b'm']),
                    IndexKind::String,
                )
            },
            |row| {
                row.map
                    .keys()
                    .map(|key| IndexKey::Str(key.as_bytes().into()))
                    .collect()
            },
        ),
    ]
}

/// The distinct values of `keys`, sorted: what a collection index holds of one record.
fn distinct(keys: impl Iterator<Item = IndexKey>) -> Vec<IndexKey> {
    let mut keys: Vec<IndexKey> = keys.collect();
    keys.sort_unstable();
    keys.dedup();
    keys
}

fn random_row(rng: &mut SmallRng) -> Row {
    let list = (0..rng.random_range(0..6))
        .map(|_| rng.random_range(-20..20))
        .collect();
    let mut map = BTreeMap::new();
    for key in ["a", "b", "c"] {
        if rng.random_bool(0.6) {
            map.insert(key.to_owned(), rng.random_range(-20..20));
        }
    }
    Row {
        list,
        map,
        x: rng.random_range(-20..20),
        y: rng.random_bool(0.8).then(|| rng.random_range(-20..20)),
        blob: vec![rng.random_range(0..4u8), 0xff],
    }
}

fn write_row(namespace: &Namespace, key: u64, row: &Row) {
    let list_bytes = pack(&list(row.list.iter().map(|&v| Value::Int(v)).collect()));
    let map_bytes = pack(&Value::Map(Map {
        order: MapOrder::Unordered,
        entries: row
            .map
            .iter()
            .map(|(k, &v)| (Value::string(k.as_bytes()), Value::Int(v)))
            .collect(),
    }));
    let (x, key_bytes) = (row.x.to_be_bytes(), key.to_be_bytes());
    let y = row.y.map(i64::to_be_bytes);
    let mut ops = vec![
        op(b"l", 20, &list_bytes),
        op(b"m", 19, &map_bytes),
        op(b"x", 1, &x),
        op(b"b", 4, &row.blob),
        op(b"k", 1, &key_bytes),
    ];
    match &y {
        Some(y) => ops.push(op(b"y", 1, y)),
        // A delete of the bin: a write of nil.
        None => ops.push(op(b"y", 0, &[])),
    }
    let request = WriteRequest {
        digest: digest(key),
        set_name: b"",
        key: None,
        exists: ExistsPolicy::Update,
        generation: GenerationPolicy::None,
        ttl: TtlRequest::NeverExpire,
        respond_all_ops: false,
        deadline: Deadline::NONE,
        filter: None,
        read_all_bins: false,
    };
    namespace
        .write(&request, ops.into_iter(), &mut NoSink, &mut Acks::default())
        .expect("a plain write succeeds");
}

fn op<'a>(bin_name: &'a [u8], particle_type: u8, value: &'a [u8]) -> Op<'a> {
    Op {
        code: OpCode::Write,
        particle_type,
        bin_name,
        value,
    }
}

/// The `k` of every record `index` returns for `range`, over every partition, sorted.
fn query(namespace: &Namespace, name: &str, range: &KeyRange) -> Vec<u64> {
    let index = namespace.index_named(name).expect("the index exists");
    let mut found = Vec::new();
    for partition in 0..PARTITIONS_USED {
        let mut after = None;
        loop {
            let end = namespace.query_piece(
                PartitionId(partition),
                &index,
                range,
                after.as_ref(),
                7,
                |record, _| {
                    let k = record
                        .bins()
                        .iter()
                        .find(|bin| bin.name == b"k")
                        .map(|bin| u64::from_be_bytes(bin.value.try_into().expect("8 bytes")));
                    found.push(k.expect("every record has k"));
                    true
                },
            );
            after = end.last;
            if end.exhausted {
                break;
            }
        }
    }
    found.sort_unstable();
    found
}

fn namespace() -> Namespace {
    let clock = Arc::new(ManualClock::new(START_UNIX_MS));
    Namespace::new(NamespaceConfig::with_defaults("test"), clock)
}

fn random_range(rng: &mut SmallRng, kind: IndexKind) -> KeyRange {
    match kind {
        IndexKind::Numeric => {
            let begin = rng.random_range(-45..45);
            KeyRange::inclusive(
                IndexKey::Int(begin),
                IndexKey::Int(begin + rng.random_range(0..30)),
            )
        }
        IndexKind::Blob => {
            let blob = [rng.random_range(0..4u8), 0xff];
            KeyRange::inclusive(
                IndexKey::Str(blob[..].into()),
                IndexKey::Str(blob[..].into()),
            )
        }
        _ => {
            let key = ["a", "b", "c", "d"][rng.random_range(0..4)].as_bytes();
            KeyRange::inclusive(IndexKey::Str(key.into()), IndexKey::Str(key.into()))
        }
    }
}

#[test]
fn derived_indexes_match_the_model_through_writes_deletes_and_a_late_build() {
    let seed = common::seed("derived_indexes");
    let mut rng = SmallRng::seed_from_u64(seed);
    let namespace = namespace();
    let indexes = indexes();
    let mut model: BTreeMap<u64, Row> = BTreeMap::new();
    for round in 0..ROUNDS {
        for _ in 0..KEY_COUNT / 3 {
            let key = rng.random_range(0..KEY_COUNT);
            if rng.random_bool(0.15) {
                let _ = namespace.delete(&delete_request(key), &mut Acks::default());
                model.remove(&key);
            } else {
                let row = random_row(&mut rng);
                write_row(&namespace, key, &row);
                model.insert(key, row);
            }
        }
        if round == ROUNDS / 3 {
            for (definition, _) in &indexes {
                let (index, created) = namespace
                    .create_index(definition.clone())
                    .expect("a valid definition");
                assert!(created);
                namespace.build_index(&index);
            }
        }
        if round < ROUNDS / 3 {
            continue;
        }
        for (definition, keys_of) in &indexes {
            let index = namespace.index_named(&definition.name).expect("created");
            let entries: u64 = model.values().map(|row| keys_of(row).len() as u64).sum();
            assert_eq!(
                namespace.index_entry_count(&index),
                entries,
                "seed {seed}, round {round}: entries of {}",
                definition.name
            );
            for _ in 0..4 {
                let range = random_range(&mut rng, definition.kind);
                // Each matching record once, however many of its values match.
                let expected: Vec<u64> = model
                    .iter()
                    .filter(|(_, row)| keys_of(row).iter().any(|value| range.contains(value)))
                    .map(|(key, _)| *key)
                    .collect();
                assert_eq!(
                    query(&namespace, &definition.name, &range),
                    expected,
                    "seed {seed}, round {round}: {} over {range:?}",
                    definition.name
                );
            }
        }
    }
}

#[test]
fn an_index_expression_that_reads_the_clock_or_yields_another_type_is_refused() {
    let namespace = namespace();
    // TTL `[69]` and since-update `[67]` change with no write.
    for clock_op in [69u8, 67] {
        let refused = namespace.create_index(definition(
            "by_ttl",
            IndexSource::Expression(vec![0x91, clock_op]),
            IndexKind::Numeric,
        ));
        assert!(
            matches!(refused, Err(IndexError::Invalid(_))),
            "{refused:?}"
        );
    }
    // A string index on an integer expression.
    let refused = namespace.create_index(definition(
        "by_x",
        IndexSource::Expression(int_bin("x")),
        IndexKind::String,
    ));
    assert!(
        matches!(refused, Err(IndexError::Invalid(_))),
        "{refused:?}"
    );
    // A context that is not a list of (type, value) pairs.
    let refused = namespace.create_index(definition(
        "by_nothing",
        IndexSource::BinContext {
            bin: b"l".to_vec(),
            context: pack(&list(vec![Value::Int(0x10)])),
        },
        IndexKind::Numeric,
    ));
    assert!(
        matches!(refused, Err(IndexError::Invalid(_))),
        "{refused:?}"
    );
    // Last-update time is the version's own: allowed.
    let (_, created) = namespace
        .create_index(definition(
            "by_update",
            IndexSource::Expression(vec![0x91, 66]),
            IndexKind::Numeric,
        ))
        .expect("last-update time is allowed");
    assert!(created);
}

#[test]
fn a_query_names_a_context_or_expression_in_any_encoding_of_it() {
    // 0x10 as an int64 (0xd3 and eight bytes) rather than a fixint: the same context.
    let wide = [0x92, 0xd3, 0, 0, 0, 0, 0, 0, 0, 0x10, 0x00];
    assert_eq!(
        engine::sindex_canonical(&wide).expect("one msgpack value"),
        list_index_context(0)
    );
    assert!(engine::sindex_canonical(&[0x92, 0x10]).is_err());
}
