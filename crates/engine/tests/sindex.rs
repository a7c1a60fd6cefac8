//! Secondary indexes through the engine's public API, against a model.
//!
//! A seeded generator writes integer, string and float values into the indexed bin, deletes,
//! lets records expire, and creates the index part-way (so the build covers existing records).
//! After every round, queries over random ranges, walked in small pieces, must return exactly
//! the model's records whose value is an integer in the range (and whose set the index covers),
//! each once, in (value, digest) order per partition; and the index holds one entry per such
//! record still stored. The seed is printed; `SEED=<n> cargo test -p engine --test sindex`
//! replays a failure.

mod common;
#[path = "common/four_partitions.rs"]
mod four_partitions;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use engine::{
    Acks, Deadline, ExistsPolicy, GenerationPolicy, IndexCollection, IndexDefinition, IndexKey,
    IndexKind, IndexSource, KeyRange, ManualClock, Namespace, NamespaceConfig, QueryPieceEnd,
    SecondaryIndex, WriteRequest,
};
use model::{CITRUSLEAF_EPOCH_UNIX_SECONDS, Digest, Op, OpCode, PartitionId, TtlRequest};
use rand::rngs::SmallRng;
use rand::{Rng as _, SeedableRng as _};

use four_partitions::{NoSink, PARTITIONS_USED, delete_request, digest};

const START_UNIX_MS: u64 = (CITRUSLEAF_EPOCH_UNIX_SECONDS + 1_000_000) * 1000;
const KEY_COUNT: u64 = 400;
const ROUNDS: usize = 40;

/// Keys never change set: a third are in "other", which the index does not cover.
fn set_of(key: u64) -> &'static [u8] {
    if key.is_multiple_of(3) {
        b"other"
    } else {
        b"people"
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Value {
    Int(i64),
    Str,
    Float,
}

struct Harness {
    clock: Arc<ManualClock>,
    namespace: Namespace,
    /// Stored, visible records: key -> (value of bin "v", expires at unix ms).
    model: BTreeMap<u64, (Value, Option<u64>)>,
}

impl Harness {
    fn put(&mut self, key: u64, value: Value, ttl_seconds: Option<u32>) {
        let (particle_type, bytes) = match value {
            Value::Int(i) => (1, i.to_be_bytes().to_vec()),
            Value::Str => (3, b"text".to_vec()),
            Value::Float => (2, 1.5f64.to_be_bytes().to_vec()),
        };
        let ops = [
            Op {
                code: OpCode::Write,
                particle_type,
                bin_name: b"v",
                value: &bytes,
            },
            Op {
                code: OpCode::Write,
                particle_type: 1,
                bin_name: b"k",
                value: &key.to_be_bytes(),
            },
        ];
        let ttl = ttl_seconds.map_or(TtlRequest::NeverExpire, TtlRequest::Seconds);
        write_ops(&self.namespace, key, ttl, &ops);
        let expires = ttl_seconds.map(|s| (self.now_ms() / 1000 + u64::from(s)) * 1000);
        self.model.insert(key, (value, expires));
    }

    fn delete(&mut self, key: u64) {
        let request = delete_request(key);
        let _ = self.namespace.delete(&request, &mut Acks::default());
        self.model.remove(&key);
    }

    fn now_ms(&self) -> u64 {
        use engine::Clock as _;
        self.clock.now().unix_ms
    }

    fn advance_and_sweep(&mut self, ms: u64) {
        self.clock.advance_ms(ms);
        let now_ms = self.now_ms();
        self.model
            .retain(|_, (_, expires)| expires.is_none_or(|at| at > now_ms));
        self.namespace.sweep_expired();
    }

    /// Keys the index must return for `begin..=end`.
    fn expected(&self, begin: i64, end: i64) -> Vec<u64> {
        self.model
            .iter()
            .filter(|(key, (value, _))| {
                set_of(**key) == b"people"
                    && matches!(value, Value::Int(i) if (begin..=end).contains(i))
            })
            .map(|(key, _)| *key)
            .collect()
    }

    fn index_and_range(&self, begin: i64, end: i64) -> (Arc<SecondaryIndex>, KeyRange) {
        let index = self
            .namespace
            .index_named("by_v")
            .expect("the index exists");
        let range = KeyRange::inclusive(IndexKey::Int(begin), IndexKey::Int(end));
        (index, range)
    }

    /// Queries every used partition in pieces of `piece` entries; returns the keys found.
    fn query(&self, begin: i64, end: i64, piece: usize) -> Vec<u64> {
        let (index, range) = self.index_and_range(begin, end);
        let mut found = Vec::new();
        for partition in 0..PARTITIONS_USED {
            found.extend(in_pieces(|after, visit| {
                let partition = PartitionId(partition);
                self.namespace
                    .query_piece(partition, &index, &range, after, piece, visit)
            }));
        }
        found.sort_unstable();
        found
    }

    /// Queries the namespace-wide order in pieces of `piece` entries; returns the keys found,
    /// in the order found (sorted by value, then digest).
    fn query_ordered(&self, begin: i64, end: i64, piece: usize) -> Vec<u64> {
        let (index, range) = self.index_and_range(begin, end);
        in_pieces(|after, visit| {
            self.namespace
                .query_ordered_piece(&index, &range, after, piece, visit)
        })
    }
}

/// The numeric index on bin `v` of set "people" the model tests query.
fn by_v_definition() -> IndexDefinition {
    IndexDefinition {
        name: "by_v".to_owned(),
        set_name: Some(b"people".to_vec()),
        source: IndexSource::Bin(b"v".to_vec()),
        kind: IndexKind::Numeric,
        collection: IndexCollection::Default,
    }
}

/// Writes `ops` to key `key` (in its set, created or updated, no key stored).
fn write_ops(namespace: &Namespace, key: u64, ttl: TtlRequest, ops: &[Op<'_>]) {
    let request = WriteRequest {
        digest: digest(key),
        set_name: set_of(key),
        key: None,
        exists: ExistsPolicy::Update,
        generation: GenerationPolicy::None,
        ttl,
        respond_all_ops: false,
        deadline: Deadline::NONE,
        filter: None,
        read_all_bins: false,
    };
    namespace
        .write(
            &request,
            ops.iter().cloned(),
            &mut NoSink,
            &mut Acks::default(),
        )
        .expect("a plain write succeeds");
}

/// Runs `piece` (given where to resume and what to visit) until the walk is exhausted; returns
/// the `k` of every record visited, in order, asserting that (value, digest) grows.
fn in_pieces(
    mut piece: impl FnMut(
        Option<&(IndexKey, Digest)>,
        &mut dyn FnMut(&engine::ScannedRecord<'_>, &IndexKey) -> bool,
    ) -> QueryPieceEnd,
) -> Vec<u64> {
    let (mut found, mut after, mut previous) = (Vec::new(), None, None);
    loop {
        let end = piece(after.as_ref(), &mut |record, key| {
            found.push(in_order(&mut previous, record, key));
            true
        });
        after = end.last;
        if end.exhausted {
            return found;
        }
    }
}

/// The `k` bin of a record a query visited with `key`, asserting that (key, digest) grows.
fn in_order(
    previous: &mut Option<(IndexKey, Digest)>,
    record: &engine::ScannedRecord<'_>,
    key: &IndexKey,
) -> u64 {
    let entry = (key.clone(), *record.digest);
    assert!(previous.as_ref().is_none_or(|p| *p < entry), "out of order");
    *previous = Some(entry);
    k_of(record)
}

/// The `v` bin of a record (an integer).
fn v_of(record: &engine::ScannedRecord<'_>) -> i64 {
    record
        .bins()
        .iter()
        .find(|bin| bin.name == b"v")
        .map(|bin| i64::from_be_bytes(bin.value.try_into().expect("8 bytes")))
        .expect("the record has v")
}

/// The `k` bin of a record.
fn k_of(record: &engine::ScannedRecord<'_>) -> u64 {
    record
        .bins()
        .iter()
        .find(|bin| bin.name == b"k")
        .map(|bin| u64::from_be_bytes(bin.value.try_into().expect("8 bytes")))
        .expect("every record has k")
}

/// A namespace "test" that takes TTLs without an expiry thread, on a manual clock.
fn ttl_namespace() -> (Namespace, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(START_UNIX_MS));
    let config = NamespaceConfig {
        allow_ttl_without_nsup: true,
        ..NamespaceConfig::with_defaults("test")
    };
    (Namespace::new(config, clock.clone()), clock)
}

#[test]
fn queries_match_the_model_through_writes_deletes_expiry_and_a_late_build() {
    let seed = common::seed("sindex");
    let mut rng = SmallRng::seed_from_u64(seed);
    let (namespace, clock) = ttl_namespace();
    let mut harness = Harness {
        namespace,
        clock,
        model: BTreeMap::new(),
    };
    for round in 0..ROUNDS {
        for _ in 0..200 {
            let key = rng.random_range(0..KEY_COUNT);
            match rng.random_range(0..20) {
                0 => harness.delete(key),
                1 => harness.put(key, Value::Str, None),
                2 => harness.put(key, Value::Float, None),
                3 => harness.put(key, Value::Int(rng.random_range(0..100)), Some(2)),
                _ => harness.put(key, Value::Int(rng.random_range(-50..100)), None),
            }
        }
        if round == 3 {
            let definition = by_v_definition();
            let (index, created) = harness.namespace.create_index(definition).expect("created");
            assert!(created);
            harness.namespace.build_index(&index);
            assert!(index.is_ready());
        }
        if round % 7 == 6 {
            harness.advance_and_sweep(3_000);
        }
        if round < 3 {
            continue;
        }
        for _ in 0..5 {
            let begin = rng.random_range(-60..110);
            let end = begin + rng.random_range(0..40);
            let piece = rng.random_range(1..8);
            let expected = harness.expected(begin, end);
            assert_eq!(
                harness.query(begin, end, piece),
                expected,
                "seed {seed}, round {round}, range {begin}..={end}"
            );
            let mut ordered = harness.query_ordered(begin, end, piece);
            ordered.sort_unstable();
            assert_eq!(
                ordered, expected,
                "seed {seed}, round {round}, range {begin}..={end}, in index order"
            );
        }
        let index = harness.namespace.index_named("by_v").expect("exists");
        let stored = harness.expected(i64::MIN, i64::MAX).len() as u64;
        assert_eq!(
            harness.namespace.index_entry_count(&index),
            stored,
            "seed {seed}, round {round}: one entry per indexed record"
        );
        assert_eq!(
            index.ordered_entry_count(),
            stored,
            "seed {seed}, round {round}: the namespace-wide order holds the same entries"
        );
    }
    assert!(harness.namespace.drop_index("by_v"));
    assert!(harness.namespace.index_named("by_v").is_none());
}

/// A user-key index orders a set's records by their stored keys: a read from any start key,
/// with inclusive, exclusive or no bounds, returns the keys in byte order; records stored
/// without their key, or in another set, are not in it; a delete removes the key.
#[test]
fn user_key_index_reads_a_set_in_key_order_from_any_start_key() {
    let clock = Arc::new(ManualClock::new(START_UNIX_MS));
    let namespace = Namespace::new(NamespaceConfig::with_defaults("test"), clock);
    let put = |number: u64, set: &[u8], send_key: bool| {
        let mut key_field = vec![3u8];
        key_field.extend_from_slice(format!("user:{number:03}").as_bytes());
        let request = WriteRequest {
            digest: digest(number),
            set_name: set,
            key: send_key.then_some(key_field.as_slice()),
            exists: ExistsPolicy::Update,
            generation: GenerationPolicy::None,
            ttl: TtlRequest::NeverExpire,
            respond_all_ops: false,
            deadline: Deadline::NONE,
            filter: None,
            read_all_bins: false,
        };
        let op = Op {
            code: OpCode::Write,
            particle_type: 1,
            bin_name: b"k",
            value: &number.to_be_bytes(),
        };
        namespace
            .write(
                &request,
                std::iter::once(op),
                &mut NoSink,
                &mut Acks::default(),
            )
            .expect("a plain put succeeds");
    };
    for number in (0..120).rev() {
        match number % 10 {
            7 => put(number, b"other", true),
            8 => put(number, b"people", false),
            _ => put(number, b"people", true),
        }
    }
    let definition = IndexDefinition {
        name: "by_key".to_owned(),
        set_name: Some(b"people".to_vec()),
        source: IndexSource::UserKey,
        kind: IndexKind::String,
        collection: IndexCollection::Default,
    };
    let (index, _) = namespace.create_index(definition).expect("created");
    namespace.build_index(&index);
    let _ = namespace.delete(&delete_request(55), &mut Acks::default());
    let read = |begin: Bound<&str>, end: Bound<&str>, limit: usize| {
        let key = |text: &str| IndexKey::Str(text.as_bytes().into());
        let range = KeyRange {
            begin: begin.map(key),
            end: end.map(key),
        };
        let mut found = in_pieces(|after, visit| {
            namespace.query_ordered_piece(&index, &range, after, 3, visit)
        });
        found.truncate(limit);
        found
    };
    let indexed = |n: &u64| n % 10 != 7 && n % 10 != 8 && *n != 55;
    let expect =
        |from: u64, limit: usize| -> Vec<u64> { (from..120).filter(indexed).take(limit).collect() };
    assert_eq!(
        read(Bound::Included("user:050"), Bound::Unbounded, 10),
        expect(50, 10)
    );
    assert_eq!(
        read(Bound::Excluded("user:050"), Bound::Unbounded, 10),
        expect(51, 10)
    );
    assert_eq!(
        read(Bound::Included("user:05"), Bound::Unbounded, 3),
        expect(50, 3)
    );
    assert_eq!(
        read(Bound::Unbounded, Bound::Unbounded, 500),
        expect(0, 500)
    );
    assert_eq!(
        read(
            Bound::Included("user:010"),
            Bound::Excluded("user:020"),
            100
        ),
        expect(10, 100)
            .into_iter()
            .filter(|n| *n < 20)
            .collect::<Vec<_>>()
    );
    assert_eq!(
        read(Bound::Included("user:2"), Bound::Unbounded, 10),
        Vec::<u64>::new()
    );
    let entries = (0..120).filter(indexed).count() as u64;
    assert_eq!(index.ordered_entry_count(), entries);
    assert_eq!(namespace.index_entry_count(&index), entries);
}

/// Harness with `values` (key -> value of `v`) in set "people" and an index on `v` built.
fn indexed(values: &[(u64, i64)]) -> Harness {
    let clock = Arc::new(ManualClock::new(START_UNIX_MS));
    let mut harness = Harness {
        namespace: Namespace::new(NamespaceConfig::with_defaults("test"), clock.clone()),
        clock,
        model: BTreeMap::new(),
    };
    for (key, value) in values {
        harness.put(*key, Value::Int(*value), None);
    }
    let definition = by_v_definition();
    let (index, _) = harness.namespace.create_index(definition).expect("created");
    harness.namespace.build_index(&index);
    harness
}

/// Walks 0..=10 in index order in pieces of `piece` entries; while visiting the first record,
/// moves key `moved` to `to` (the keys are in distinct partitions, so the write does not wait
/// for the lock the walk holds). Returns (k, v) of the records visited, in visit order.
fn walk_while_moving(harness: &Harness, piece: usize, moved: u64, to: i64) -> Vec<(u64, i64)> {
    let (index, range) = harness.index_and_range(0, 10);
    let mut found = Vec::new();
    let mut after = None;
    loop {
        let end = harness.namespace.query_ordered_piece(
            &index,
            &range,
            after.as_ref(),
            piece,
            |record, key| {
                if found.is_empty() {
                    let op = Op {
                        code: OpCode::Write,
                        particle_type: 1,
                        bin_name: b"v",
                        value: &to.to_be_bytes(),
                    };
                    write_ops(&harness.namespace, moved, TtlRequest::NeverExpire, &[op]);
                }
                assert!(matches!(key, IndexKey::Int(_)), "a numeric index");
                found.push((k_of(record), v_of(record)));
                true
            },
        );
        after = end.last;
        if end.exhausted {
            return found;
        }
    }
}

/// The story: a query in index order collects its candidates under the index's lock, then
/// re-checks each against its record. A write that moved a record from 5 to 7 (both inside
/// the query's 0..=10) between the two made the re-check, which compared the record with the
/// entry's value 5, drop it: a record whose value satisfied the filter for the whole query was
/// missed. The re-check now asks whether the record's current value is in the range, and
/// returns the record (with its current bins) at the entry's place in the walk, which is also
/// where a client resuming the partition goes on.
#[test]
fn a_record_moving_within_the_range_during_an_ordered_query_is_returned() {
    let harness = indexed(&[(1, 1), (2, 5)]);
    assert_eq!(
        walk_while_moving(&harness, 10, 2, 7),
        vec![(1, 1), (2, 7)],
        "both records stayed in 0..=10; the moved one comes back with its current value"
    );
}

/// ... and once only: when the record moves beyond the piece's last candidate, the next piece
/// (which reads the index again after that candidate) returns it, and this one leaves it.
#[test]
fn a_record_moving_ahead_of_the_piece_is_returned_once() {
    let harness = indexed(&[(1, 1), (2, 5), (7, 6)]);
    assert_eq!(
        walk_while_moving(&harness, 2, 2, 8),
        vec![(1, 1), (7, 6), (2, 8)]
    );
    // A candidate moved back behind the walk: returned at once (no later piece would see it).
    let harness = indexed(&[(1, 1), (2, 5), (7, 6), (10, 9)]);
    assert_eq!(
        walk_while_moving(&harness, 3, 7, 0),
        vec![(1, 1), (2, 5), (7, 0), (10, 9)]
    );
}

/// Keys-only queries of a user-key index answer from the index's entries (their stamps: the
/// record's void time, set and last update), without looking up the records. Against a model,
/// through puts with and without TTLs, touches that set or clear a TTL, deletes, time passing
/// with and without expiry sweeps, and truncates of the set: every query returns exactly the
/// visible records' keys in range, in key order, the same as the walk that looks each record
/// up. Seeded (`SEED=<n>` replays).
#[test]
fn keys_only_queries_answer_from_user_key_entries_as_the_records_would() {
    let seed = common::seed("sindex-keys-only");
    let mut rng = SmallRng::seed_from_u64(seed);
    let (namespace, clock) = ttl_namespace();
    let now_ms = || {
        use engine::Clock as _;
        clock.now().unix_ms
    };
    // Visible records of "people": key -> expires at (unix ms).
    let mut model: BTreeMap<u64, Option<u64>> = BTreeMap::new();
    let write = |key: u64, ttl: TtlRequest, code: OpCode| {
        let mut key_field = vec![1u8];
        key_field.extend_from_slice(&key.to_be_bytes());
        let request = WriteRequest {
            digest: digest(key),
            set_name: set_of(key),
            key: Some(key_field.as_slice()),
            exists: if code == OpCode::Touch {
                ExistsPolicy::UpdateOnly
            } else {
                ExistsPolicy::Update
            },
            generation: GenerationPolicy::None,
            ttl,
            respond_all_ops: false,
            deadline: Deadline::NONE,
            filter: None,
            read_all_bins: false,
        };
        let op = Op {
            code,
            particle_type: 1,
            bin_name: b"k",
            value: &key.to_be_bytes(),
        };
        namespace.write(
            &request,
            std::iter::once(op),
            &mut NoSink,
            &mut Acks::default(),
        )
    };
    let definition = IndexDefinition {
        name: "by_key".to_owned(),
        set_name: Some(b"people".to_vec()),
        source: IndexSource::UserKey,
        kind: IndexKind::Numeric,
        collection: IndexCollection::Default,
    };
    let mut index = None;
    for round in 0..ROUNDS {
        for _ in 0..100 {
            let key = rng.random_range(0..KEY_COUNT);
            let ttl = match rng.random_range(0..3) {
                0 => TtlRequest::Seconds(rng.random_range(1..4)),
                _ => TtlRequest::NeverExpire,
            };
            let expires = match ttl {
                TtlRequest::Seconds(s) => Some((now_ms() / 1000 + u64::from(s)) * 1000),
                _ => None,
            };
            let people = set_of(key) == b"people";
            match rng.random_range(0..10) {
                0 => {
                    let _ = namespace.delete(&delete_request(key), &mut Acks::default());
                    model.remove(&key);
                }
                1 => {
                    let touched = write(key, ttl, OpCode::Touch).is_ok();
                    assert_eq!(touched && people, model.contains_key(&key), "seed {seed}");
                    if touched && people {
                        model.insert(key, expires);
                    }
                }
                _ => {
                    write(key, ttl, OpCode::Write).expect("a put succeeds");
                    if people {
                        model.insert(key, expires);
                    }
                }
            }
        }
        match rng.random_range(0..8) {
            0 => {
                clock.advance_ms(1);
                namespace
                    .truncate(Some(b"people"), None)
                    .expect("truncated");
                model.clear();
            }
            1 => {
                namespace.sweep_expired();
            }
            _ => {}
        }
        clock.advance_ms(rng.random_range(0..1500));
        let now = now_ms();
        model.retain(|_, expires| expires.is_none_or(|at| at > now));
        if round == 2 {
            let (created, _) = namespace.create_index(definition.clone()).expect("created");
            namespace.build_index(&created);
            index = Some(created);
        }
        let Some(index) = index.as_ref() else {
            continue;
        };
        for _ in 0..5 {
            let begin = rng.random_range(0..KEY_COUNT);
            let end = begin + rng.random_range(0..60);
            let piece = rng.random_range(1..8);
            let range = KeyRange::inclusive(IndexKey::Int(begin as i64), IndexKey::Int(end as i64));
            let expected: Vec<u64> = model.range(begin..=end).map(|(key, _)| *key).collect();
            let mut keys_only = Vec::new();
            let mut after = None;
            loop {
                let end =
                    namespace.query_ordered_keys(index, &range, after.as_ref(), piece, |key, _| {
                        let IndexKey::Int(key) = key else {
                            panic!("a numeric index holds integers");
                        };
                        keys_only.push(*key as u64);
                        true
                    });
                after = end.last;
                if end.exhausted {
                    break;
                }
            }
            let context = format!("seed {seed}, round {round}, keys {begin}..={end}");
            assert_eq!(keys_only, expected, "{context}: keys alone");
            let looked_up = in_pieces(|after, visit| {
                namespace.query_ordered_piece(index, &range, after, piece, visit)
            });
            assert_eq!(looked_up, expected, "{context}: records looked up");
            // A visitor that stops the walk: the keys before it, and the piece not exhausted.
            let limit = rng.random_range(0..8);
            let mut limited = Vec::new();
            let end = namespace.query_ordered_keys(index, &range, None, 64, |key, _| {
                let IndexKey::Int(key) = key else {
                    panic!("a numeric index holds integers");
                };
                limited.len() < limit && {
                    limited.push(*key as u64);
                    true
                }
            });
            let wanted = &expected[..limit.min(expected.len())];
            assert_eq!(limited, wanted, "{context}: keys alone, {limit} at most");
            assert_eq!(
                end.exhausted,
                expected.len() <= limit,
                "{context}: limit {limit}"
            );
        }
    }
    let index = index.expect("created in round 2");
    assert!(
        index.records_returned() > 0,
        "seed {seed}: the queries' records are counted"
    );
    assert!(index.lookups() >= index.records_returned(), "seed {seed}");
}

// ---- geo2dsphere indexes --------------------------------------------------------------------

/// What a geo model record's bin `g` holds.
#[derive(Clone, Copy, Debug)]
enum Geo {
    /// A point `(lng, lat)`, on a grid that keeps it well off every query's boundary.
    Point(f64, f64),
    /// The square `[lng, lng + 0.2] × [lat, lat + 0.2]`.
    Square(f64, f64),
    /// An integer: not GeoJSON, so not in the index.
    Int,
}

fn geo_point_json(lng: f64, lat: f64) -> String {
    format!(r#"{{"type":"Point","coordinates":[{lng:.6},{lat:.6}]}}"#)
}

fn geo_square_json(lng: f64, lat: f64) -> String {
    let (east, north) = (lng + 0.2, lat + 0.2);
    format!(
        r#"{{"type":"Polygon","coordinates":[[[{lng:.6},{lat:.6}],[{east:.6},{lat:.6}],[{east:.6},{north:.6}],[{lng:.6},{north:.6}],[{lng:.6},{lat:.6}]]]}}"#
    )
}

/// The Go client's test polygon (`geo_test.go`).
const GO_POLYGON: &str = r#"{"type":"Polygon","coordinates":[[[-122.5,37.0],[-121.0,37.0],[-121.0,38.08],[-122.5,38.08],[-122.5,37.0]]]}"#;
/// The Go client's circle: 50 km around (-122, 37.5).
const GO_CIRCLE: &str = r#"{"type":"AeroCircle","coordinates":[[-122.0,37.5],50000.0]}"#;

/// Great-circle distance in metres on Aerospike's sphere.
fn distance_m((lng1, lat1): (f64, f64), (lng2, lat2): (f64, f64)) -> f64 {
    let (p1, p2) = (lat1.to_radians(), lat2.to_radians());
    let dp = p2 - p1;
    let dl = (lng2 - lng1).to_radians();
    let a = (dp / 2.0).sin().powi(2) + p1.cos() * p2.cos() * (dl / 2.0).sin().powi(2);
    2.0 * 6_371_000.0 * a.sqrt().asin()
}

/// A GeoJSON particle as a client sends it: no flags, no cells, the JSON.
fn geo_wire(json: &str) -> Vec<u8> {
    let mut wire = vec![0, 0, 0];
    wire.extend_from_slice(json.as_bytes());
    wire
}

struct GeoHarness {
    clock: Arc<ManualClock>,
    namespace: Namespace,
    model: BTreeMap<u64, (Geo, Option<u64>)>,
}

impl GeoHarness {
    fn new() -> GeoHarness {
        let (namespace, clock) = ttl_namespace();
        GeoHarness {
            clock,
            namespace,
            model: BTreeMap::new(),
        }
    }

    fn put(&mut self, key: u64, value: Geo, ttl_seconds: Option<u32>) {
        let (particle_type, bytes) = match value {
            Geo::Point(lng, lat) => (23, geo_wire(&geo_point_json(lng, lat))),
            Geo::Square(lng, lat) => (23, geo_wire(&geo_square_json(lng, lat))),
            Geo::Int => (1, 7i64.to_be_bytes().to_vec()),
        };
        let ops = [
            Op {
                code: OpCode::Write,
                particle_type,
                bin_name: b"g",
                value: &bytes,
            },
            Op {
                code: OpCode::Write,
                particle_type: 1,
                bin_name: b"k",
                value: &key.to_be_bytes(),
            },
        ];
        let ttl = ttl_seconds.map_or(TtlRequest::NeverExpire, TtlRequest::Seconds);
        write_ops(&self.namespace, key, ttl, &ops);
        use engine::Clock as _;
        let now_ms = self.clock.now().unix_ms;
        let expires = ttl_seconds.map(|s| (now_ms / 1000 + u64::from(s)) * 1000);
        self.model.insert(key, (value, expires));
    }

    /// Keys of set "people" whose value `matches`.
    fn expected(&self, matches: impl Fn(Geo) -> bool) -> Vec<u64> {
        self.model
            .iter()
            .filter(|(key, (value, _))| set_of(**key) == b"people" && matches(*value))
            .map(|(key, _)| *key)
            .collect()
    }

    /// The keys a geo query for `json` finds, through the partitions and through the
    /// namespace-wide order, in pieces of `piece` entries; both must agree.
    fn query(&self, json: &str, piece: usize) -> Vec<u64> {
        let index = self
            .namespace
            .index_named("by_g")
            .expect("the index exists");
        let filter = engine::QueryFilter::geo(json.as_bytes()).expect("valid GeoJSON");
        let mut by_partition = Vec::new();
        for partition in 0..PARTITIONS_USED {
            by_partition.extend(in_pieces(|after, visit| {
                self.namespace.query_piece(
                    PartitionId(partition),
                    &index,
                    &filter,
                    after,
                    piece,
                    visit,
                )
            }));
        }
        by_partition.sort_unstable();
        let mut ordered = in_pieces(|after, visit| {
            self.namespace
                .query_ordered_piece(&index, &filter, after, piece, visit)
        });
        ordered.sort_unstable();
        assert_eq!(by_partition, ordered, "partition and ordered walks agree");
        ordered
    }

    fn check_queries(&self, piece: usize) {
        let in_polygon = |value| {
            matches!(value, Geo::Point(lng, lat)
                if (-122.5..=-121.0).contains(&lng) && (37.0..=38.08).contains(&lat))
        };
        assert_eq!(self.query(GO_POLYGON, piece), self.expected(in_polygon));
        let in_circle = |value| matches!(value, Geo::Point(lng, lat) if distance_m((lng, lat), (-122.0, 37.5)) < 50_000.0);
        assert_eq!(self.query(GO_CIRCLE, piece), self.expected(in_circle));
        for (lng, lat) in [(-121.95, 37.55), (-122.35, 37.05), (-121.15, 38.25)] {
            let holds = |value| {
                matches!(value, Geo::Square(west, south)
                    if (west..=west + 0.2).contains(&lng) && (south..=south + 0.2).contains(&lat))
            };
            let point = geo_point_json(lng, lat);
            assert_eq!(self.query(&point, piece), self.expected(holds), "{point}");
        }
    }
}

/// A grid point `.x5` (so at least 0.02° off the polygon's and squares' edges), and, for the
/// circle, at least 1 km off its boundary.
fn random_geo(rng: &mut SmallRng) -> Geo {
    match rng.random_range(0..10) {
        0..=5 => loop {
            let lng = -123.05 + 0.1 * f64::from(rng.random_range(0..30));
            let lat = 36.55 + 0.1 * f64::from(rng.random_range(0..20));
            let off_circle = (distance_m((lng, lat), (-122.0, 37.5)) - 50_000.0).abs() > 1_000.0;
            if off_circle {
                return Geo::Point(lng, lat);
            }
        },
        6..=8 => Geo::Square(
            -123.0 + 0.1 * f64::from(rng.random_range(0..25)),
            36.6 + 0.1 * f64::from(rng.random_range(0..17)),
        ),
        _ => Geo::Int,
    }
}

fn by_g_definition(collection: IndexCollection) -> IndexDefinition {
    IndexDefinition {
        name: "by_g".to_owned(),
        set_name: Some(b"people".to_vec()),
        source: IndexSource::Bin(b"g".to_vec()),
        kind: IndexKind::Geo2dSphere,
        collection,
    }
}

#[test]
fn geo_queries_match_the_model_through_writes_deletes_expiry_truncate_and_a_late_build() {
    let seed = common::seed("sindex-geo");
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut harness = GeoHarness::new();
    for round in 0..12 {
        for _ in 0..150 {
            let key = rng.random_range(0..300);
            match rng.random_range(0..20) {
                0..=1 => {
                    let _ = harness
                        .namespace
                        .delete(&delete_request(key), &mut Acks::default());
                    harness.model.remove(&key);
                }
                2 => {
                    let value = random_geo(&mut rng);
                    harness.put(key, value, Some(rng.random_range(1..30)));
                }
                _ => {
                    let value = random_geo(&mut rng);
                    harness.put(key, value, None);
                }
            }
        }
        if round == 2 {
            let definition = by_g_definition(IndexCollection::Default);
            let (index, _) = harness.namespace.create_index(definition).expect("created");
            harness.namespace.build_index(&index);
        }
        if round == 8 {
            harness.clock.advance_ms(1);
            harness.namespace.truncate(None, None).expect("truncated");
            harness.model.clear();
            harness.clock.advance_ms(1);
        }
        harness.clock.advance_ms(10_000);
        let now_ms = {
            use engine::Clock as _;
            harness.clock.now().unix_ms
        };
        harness
            .model
            .retain(|_, (_, expires)| expires.is_none_or(|at| at > now_ms));
        harness.namespace.sweep_expired();
        if round >= 2 {
            harness.check_queries(rng.random_range(1..8));
            let index = harness.namespace.index_named("by_g").expect("exists");
            assert_eq!(
                harness.namespace.index_entry_count(&index),
                index.ordered_entry_count(),
                "seed {seed}"
            );
        }
    }
    // Every point of the Go client's test (20 points on a diagonal): 6 in its polygon, 4 in
    // its circle.
    let mut harness = GeoHarness::new();
    let definition = by_g_definition(IndexCollection::Default);
    let (index, _) = harness.namespace.create_index(definition).expect("created");
    harness.namespace.build_index(&index);
    for i in 0..20u32 {
        let key = u64::from(i) * 3 + 1; // set "people"
        let (lng, lat) = (-122.0 + 0.1 * f64::from(i), 37.5 + 0.1 * f64::from(i));
        harness.put(key, Geo::Point(lng, lat), None);
    }
    assert_eq!(harness.query(GO_POLYGON, 4).len(), 6);
    assert_eq!(harness.query(GO_CIRCLE, 4).len(), 4);
    assert!(harness.query(&geo_point_json(-122.0, 37.5), 4).is_empty());
}

/// A msgpack list of GeoJSON items, as clients write them: a str whose first byte is 23.
fn geo_list(items: &[String]) -> Vec<u8> {
    let mut packed = vec![0x90 | u8::try_from(items.len()).expect("a few")];
    for json in items {
        let len = json.len() + 1;
        packed.push(0xd9);
        packed.push(u8::try_from(len).expect("short"));
        packed.push(23);
        packed.extend_from_slice(json.as_bytes());
    }
    packed
}

#[test]
fn a_list_geo_index_finds_records_by_their_elements() {
    let (namespace, _clock) = ttl_namespace();
    let definition = by_g_definition(IndexCollection::List);
    let (index, _) = namespace.create_index(definition).expect("created");
    namespace.build_index(&index);
    let lists: [(u64, Vec<String>); 3] = [
        (
            1,
            vec![geo_point_json(-122.0, 37.5), geo_point_json(0.0, 0.0)],
        ),
        (2, vec![geo_point_json(10.0, 10.0)]),
        (4, vec![geo_square_json(-122.1, 37.4)]),
    ];
    for (key, items) in &lists {
        let value = geo_list(items);
        let ops = [
            Op {
                code: OpCode::Write,
                particle_type: 20,
                bin_name: b"g",
                value: &value,
            },
            Op {
                code: OpCode::Write,
                particle_type: 1,
                bin_name: b"k",
                value: &key.to_be_bytes(),
            },
        ];
        write_ops(&namespace, *key, TtlRequest::NeverExpire, &ops);
    }
    let find = |json: &str| {
        let filter = engine::QueryFilter::geo(json.as_bytes()).expect("valid");
        let mut found = in_pieces(|after, visit| {
            namespace.query_ordered_piece(&index, &filter, after, 2, visit)
        });
        found.sort_unstable();
        found
    };
    assert_eq!(find(GO_POLYGON), vec![1]);
    assert_eq!(find(&geo_point_json(-122.0, 37.5)), vec![4]);
    assert_eq!(find(&geo_point_json(50.0, 50.0)), Vec::<u64>::new());
    // Rewriting the list without the point drops its entries.
    let value = geo_list(&[geo_point_json(0.0, 0.0)]);
    let ops = [Op {
        code: OpCode::Write,
        particle_type: 20,
        bin_name: b"g",
        value: &value,
    }];
    write_ops(&namespace, 1, TtlRequest::NeverExpire, &ops);
    assert!(find(GO_POLYGON).is_empty());
}

#[test]
fn invalid_geojson_is_refused_with_160() {
    let (namespace, _clock) = ttl_namespace();
    let request = WriteRequest {
        digest: digest(1),
        set_name: b"people",
        key: None,
        exists: ExistsPolicy::Update,
        generation: GenerationPolicy::None,
        ttl: TtlRequest::NeverExpire,
        respond_all_ops: false,
        deadline: Deadline::NONE,
        filter: None,
        read_all_bins: false,
    };
    for bad in [&b"{\"type\":\"LineString\"}"[..], b"not json", b"{"] {
        let wire = [&[0u8, 0, 0][..], bad].concat();
        let ops = [Op {
            code: OpCode::Write,
            particle_type: 23,
            bin_name: b"g",
            value: &wire,
        }];
        let result = namespace.write(&request, ops.into_iter(), &mut NoSink, &mut Acks::default());
        assert_eq!(result.err(), Some(model::ResultCode::GeoInvalidGeojson));
    }
}
