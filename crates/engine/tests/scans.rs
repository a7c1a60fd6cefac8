//! Scans, set indexes and truncate through the engine's public API, against a model.
//!
//! Records are placed in four partitions (digests are built, not hashed) so that partitions
//! hold hundreds of records and the engine really chooses between the set index and the
//! partition walk. A seeded generator writes, deletes, expires and truncates records, enables
//! and disables set indexes, and scans in small pieces while mutating between pieces.
//! After every scan: every record visible for the whole scan was visited exactly once, nothing
//! was visited twice, and a scan with no concurrent change returns exactly the model's records.
//! The seed is printed; `SEED=<n> cargo test -p engine --test scans` replays a failure.

mod common;
#[path = "common/four_partitions.rs"]
mod four_partitions;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;

use engine::{
    Acks, Deadline, ExistsPolicy, GenerationPolicy, ManualClock, Namespace, NamespaceConfig,
    ScanScope, WriteRequest,
};
use model::{
    CITRUSLEAF_EPOCH_UNIX_SECONDS, Digest, Op, OpCode, PartitionId, ResultCode, TtlRequest,
};
use rand::rngs::SmallRng;
use rand::{Rng as _, SeedableRng as _};

use four_partitions::{NoSink, PARTITIONS_USED, delete_request, digest};

const START_UNIX_MS: u64 = (CITRUSLEAF_EPOCH_UNIX_SECONDS + 1_000_000) * 1000;
const KEY_COUNT: u64 = 2_000;
const ROUNDS: usize = 60;
const SETS: [&[u8]; 3] = [b"small", b"large", b""];

/// A key's set never changes (Aerospike refuses to move a record between sets): about 5%
/// of keys are in "small", 60% in "large", the rest in no set.
fn set_of(key: u64) -> &'static [u8] {
    match key % 20 {
        0 => SETS[0],
        1..=12 => SETS[1],
        _ => SETS[2],
    }
}

struct Harness {
    clock: Arc<ManualClock>,
    namespace: Namespace,
    /// Visible records: key -> set.
    model: BTreeMap<u64, &'static [u8]>,
    /// Records with a TTL, and when they expire (unix ms).
    expiring: BTreeMap<u64, u64>,
}

impl Harness {
    fn new() -> Harness {
        let clock = Arc::new(ManualClock::new(START_UNIX_MS));
        let config = NamespaceConfig {
            allow_ttl_without_nsup: true,
            ..NamespaceConfig::with_defaults("test")
        };
        let namespace = Namespace::new(config, clock.clone());
        Harness {
            clock,
            namespace,
            model: BTreeMap::new(),
            expiring: BTreeMap::new(),
        }
    }

    fn now_ms(&self) -> u64 {
        use engine::Clock as _;
        self.clock.now().unix_ms
    }

    fn put(&mut self, key: u64, ttl_seconds: Option<u32>) {
        let set = set_of(key);
        let request = WriteRequest {
            digest: digest(key),
            set_name: set,
            key: None,
            exists: ExistsPolicy::Update,
            generation: GenerationPolicy::None,
            ttl: ttl_seconds.map_or(TtlRequest::NeverExpire, TtlRequest::Seconds),
            respond_all_ops: false,
            deadline: Deadline::NONE,
            filter: None,
            read_all_bins: false,
        };
        let value = key.to_be_bytes();
        let op = Op {
            code: OpCode::Write,
            particle_type: 1,
            bin_name: b"v",
            value: &value,
        };
        self.namespace
            .write(
                &request,
                [op].into_iter(),
                &mut NoSink,
                &mut Acks::default(),
            )
            .expect("a plain put succeeds");
        self.model.insert(key, set);
        match ttl_seconds {
            Some(seconds) => {
                // Void times have one-second resolution: expiry is at the next whole second.
                let expires_ms = (self.now_ms() / 1000 + u64::from(seconds)) * 1000;
                self.expiring.insert(key, expires_ms);
            }
            None => {
                self.expiring.remove(&key);
            }
        }
    }

    fn delete(&mut self, key: u64) {
        let request = delete_request(key);
        let result = self.namespace.delete(&request, &mut Acks::default());
        let expected = if self.model.remove(&key).is_some() {
            Ok(())
        } else {
            Err(ResultCode::NotFound)
        };
        assert_eq!(result.map(|_| ()), expected, "delete of key {key}");
        self.expiring.remove(&key);
    }

    fn advance(&mut self, ms: u64) {
        self.clock.advance_ms(ms);
        let now_ms = self.now_ms();
        let expired: Vec<u64> = self
            .expiring
            .iter()
            .filter(|(_, expires_ms)| **expires_ms <= now_ms)
            .map(|(key, _)| *key)
            .collect();
        for key in expired {
            self.expiring.remove(&key);
            self.model.remove(&key);
        }
    }

    fn truncate(&mut self, set: Option<&'static [u8]>) {
        self.namespace
            .truncate(set, None)
            .expect("a truncate up to now succeeds");
        self.model
            .retain(|_, record_set| set.is_some_and(|s| s != *record_set));
        self.expiring.retain(|key, _| self.model.contains_key(key));
    }

    /// Every visible record of `scope`, walking each partition in pieces of `piece` entries.
    fn scan(&self, scope: ScanScope, piece: usize) -> Vec<u64> {
        let mut keys = Vec::new();
        for partition in 0..PARTITIONS_USED {
            let mut after = None;
            loop {
                let end = self.namespace.scan_piece(
                    PartitionId(partition),
                    scope,
                    after.as_ref(),
                    piece,
                    |record| {
                        keys.push(key_of(record.digest));
                        true
                    },
                );
                after = end.last;
                if end.exhausted {
                    break;
                }
            }
        }
        keys
    }

    fn expected(&self, set: Option<&[u8]>) -> BTreeSet<u64> {
        self.model
            .iter()
            .filter(|(_, record_set)| set.is_none_or(|s| s == **record_set))
            .map(|(key, _)| *key)
            .collect()
    }

    fn check_scans(&self) {
        for set in [None, Some(SETS[0]), Some(SETS[1])] {
            let scope = self.namespace.scan_scope(set.unwrap_or(b""));
            let keys = self.scan(scope, 7);
            let unique: BTreeSet<u64> = keys.iter().copied().collect();
            assert_eq!(unique.len(), keys.len(), "a record was visited twice");
            assert_eq!(unique, self.expected(set), "scan of {set:?}");
        }
    }
}

fn key_of(digest: &Digest) -> u64 {
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&digest.0[2..10]);
    // Inverse of the multiplication in `digest` (the constant is odd, so invertible mod 2^64).
    u64::from_be_bytes(bytes).wrapping_mul(inverse(0x9e37_79b9_7f4a_7c15))
}

fn inverse(odd: u64) -> u64 {
    let mut x = odd;
    for _ in 0..6 {
        x = x.wrapping_mul(2u64.wrapping_sub(odd.wrapping_mul(x)));
    }
    x
}

fn mutate(harness: &mut Harness, rng: &mut SmallRng) {
    let key = rng.random_range(0..KEY_COUNT);
    match rng.random_range(0..100) {
        0..=59 => harness.put(key, None),
        60..=69 => harness.put(key, Some(rng.random_range(1..4))),
        70..=89 => {
            if harness.model.contains_key(&key) {
                harness.delete(key);
            }
        }
        _ => harness.advance(rng.random_range(0..700)),
    }
}

#[test]
fn scans_match_the_model_with_and_without_set_indexes() {
    let seed = common::seed("scans");
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut harness = Harness::new();
    let mut indexed_partition_seen = false;
    if let Some(build) = harness.namespace.enable_set_index(SETS[0]).unwrap() {
        harness.namespace.build_set_index(build);
    }
    for round in 0..ROUNDS {
        for _ in 0..200 {
            mutate(&mut harness, &mut rng);
        }
        match rng.random_range(0..10) {
            0 => harness.truncate(Some(SETS[rng.random_range(0..2)])),
            1 if round % 7 == 0 => harness.truncate(None),
            2..=4 => {
                let set = SETS[rng.random_range(0..2)];
                if let Some(build) = harness.namespace.enable_set_index(set).unwrap() {
                    harness.namespace.build_set_index(build);
                }
            }
            5 => harness
                .namespace
                .disable_set_index(SETS[rng.random_range(0..2)]),
            6 => {
                harness.namespace.sweep_expired();
                harness.namespace.reclaim_truncated();
            }
            _ => {}
        }
        harness.check_scans();
        let small = harness.namespace.scan_scope(SETS[0]);
        indexed_partition_seen |= (0..PARTITIONS_USED).any(|partition| {
            harness
                .namespace
                .scan_uses_set_index(PartitionId(partition), small)
        });
        let summary = harness.namespace.summary();
        let sets = harness.namespace.sets();
        let set_objects: u64 = sets.iter().map(|s| s.objects).sum();
        assert!(summary.objects >= harness.model.len() as u64);
        assert!(set_objects <= summary.objects);
    }
    assert!(
        indexed_partition_seen,
        "the small set's index was never chosen: the test does not cover the indexed walk"
    );
    harness.namespace.sweep_expired();
    harness.namespace.reclaim_truncated();
    let summary = harness.namespace.summary();
    assert_eq!(
        summary.objects,
        harness.model.len() as u64,
        "after reclaiming"
    );
}

#[test]
fn records_present_throughout_a_scan_are_visited_exactly_once_despite_writes() {
    let seed = common::seed("scans");
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut harness = Harness::new();
    for key in 0..KEY_COUNT {
        harness.put(key, None);
    }
    if let Some(build) = harness.namespace.enable_set_index(SETS[0]).unwrap() {
        harness.namespace.build_set_index(build);
    }
    for set in [None, Some(SETS[0]), Some(SETS[1])] {
        let scope = harness.namespace.scan_scope(set.unwrap_or(b""));
        let at_start = harness.expected(set);
        let mut touched = HashSet::new();
        let mut visited = Vec::new();
        for partition in 0..PARTITIONS_USED {
            let mut after = None;
            loop {
                let end = harness.namespace.scan_piece(
                    PartitionId(partition),
                    scope,
                    after.as_ref(),
                    5,
                    |record| {
                        visited.push(key_of(record.digest));
                        true
                    },
                );
                after = end.last;
                if end.exhausted {
                    break;
                }
                for _ in 0..3 {
                    let key = rng.random_range(0..KEY_COUNT * 2);
                    touched.insert(key);
                    if rng.random_range(0..2) == 0 && harness.model.contains_key(&key) {
                        harness.delete(key);
                    } else {
                        harness.put(key, None);
                    }
                }
            }
        }
        let unique: BTreeSet<u64> = visited.iter().copied().collect();
        assert_eq!(unique.len(), visited.len(), "a record was visited twice");
        for key in at_start.difference(&touched.iter().copied().collect()) {
            assert!(
                unique.contains(key),
                "key {key} present throughout was missed"
            );
        }
        for key in &unique {
            assert!(
                set.is_none_or(|s| s == set_of(*key)),
                "key {key} is not in the scanned set"
            );
        }
    }
}

#[test]
fn truncate_hides_at_once_and_later_writes_survive() {
    let mut harness = Harness::new();
    for key in 0..100 {
        harness.put(key, None);
    }
    harness.truncate(Some(SETS[1]));
    // Same millisecond: a write after the truncate survives it.
    harness.put(1, None);
    harness.check_scans();
    assert!(harness.model.contains_key(&1));
    // A second truncate in the same millisecond takes the write made after the first.
    harness.truncate(Some(SETS[1]));
    harness.check_scans();
    assert!(!harness.model.contains_key(&1));
    harness.put(1, None);
    let future = harness.now_ms() + 10_000;
    assert!(harness.namespace.truncate(None, Some(future)).is_err());
    // An older cut-off than the set's own is ignored.
    assert_eq!(
        harness.namespace.truncate(Some(SETS[1]), Some(1)),
        Ok(false)
    );
    let removed = harness.namespace.reclaim_truncated();
    let large_before = (0..100).filter(|k| set_of(*k) == SETS[1]).count() as u64;
    // Key 1's truncated version was replaced by the later write, which counted it.
    assert_eq!(
        removed,
        large_before - 1,
        "every truncated record reclaimed"
    );
    assert_eq!(
        harness.namespace.summary().truncated_objects,
        large_before + 1
    );
    harness.check_scans();
}
