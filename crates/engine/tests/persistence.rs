//! A namespace on device storage, through the engine's own paths: what survives a crash and a
//! cold start, what stop-writes refuses, and defragmentation under the index.

mod common;

use std::collections::HashMap;
use std::sync::Arc;

use engine::{
    Acks, BinWriter, Clock, Decision, Expiry, ManualClock, Namespace, NamespaceConfig,
    RecordAddress,
};
use model::{CITRUSLEAF_EPOCH_UNIX_SECONDS, Digest, ResultCode, UserKey, VoidTime};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use storage::test_device::TestDevice;
use storage::{Device, Flushing, StorageConfig};

const START_UNIX_MS: u64 = (CITRUSLEAF_EPOCH_UNIX_SECONDS + 1_000_000) * 1000;
const STRING: u8 = 3;
const BLOCK_BYTES: u32 = 64 * 1024;
const BLOCKS: u64 = 16;

fn config() -> NamespaceConfig {
    config_evicting_above(0)
}

fn config_evicting_above(evict_used_pct: u8) -> NamespaceConfig {
    let mut storage =
        StorageConfig::with_defaults(vec!["d0".into()], u64::from(BLOCK_BYTES) * BLOCKS);
    storage.write_block_size_bytes = BLOCK_BYTES;
    storage.stop_writes_avail_pct = 10;
    storage.defrag_sleep_us = 0;
    storage.defrag_start_avail_pct = 100;
    NamespaceConfig {
        allow_ttl_without_nsup: true,
        storage: Some(storage),
        evict_used_pct,
        evict_tenths_pct: 100,
        ..NamespaceConfig::with_defaults("test")
    }
}

fn open(device: &Arc<TestDevice>, clock: &Arc<ManualClock>) -> Namespace {
    open_with(config(), device, clock)
}

fn open_with(
    config: NamespaceConfig,
    device: &Arc<TestDevice>,
    clock: &Arc<ManualClock>,
) -> Namespace {
    let devices: Vec<Arc<dyn Device>> = vec![device.clone()];
    let (namespace, report) =
        Namespace::open(config, clock.clone(), devices, Flushing::Manual).expect("opens");
    assert!(
        report.is_some(),
        "a namespace with storage reports its cold start"
    );
    namespace
}

fn key(i: usize) -> Vec<u8> {
    format!("key-{i}").into_bytes()
}

fn address<'a>(set: &'a [u8], key: &'a [u8]) -> RecordAddress<'a> {
    RecordAddress {
        digest: Digest::compute(set, &UserKey::String(key)),
        set_name: set,
        key: Some((STRING, key)),
    }
}

fn put(
    ns: &Namespace,
    set: &[u8],
    key: &[u8],
    value: &[u8],
    expiry: Expiry,
) -> Result<(), ResultCode> {
    ns.update(
        &address(set, key),
        &mut BinWriter::default(),
        &mut Acks::default(),
        |_, out| {
            out.bin(b"value", STRING, value);
            Ok((Decision::Store(expiry), ()))
        },
    )
}

fn delete(ns: &Namespace, set: &[u8], key: &[u8]) -> Result<(), ResultCode> {
    ns.update(
        &address(set, key),
        &mut BinWriter::default(),
        &mut Acks::default(),
        |_, _| Ok((Decision::Delete, ())),
    )
}

/// (value, generation, void time) of a visible record.
fn get(ns: &Namespace, set: &[u8], key: &[u8]) -> Option<(Vec<u8>, u16, u32)> {
    ns.view(&address(set, key), |current| {
        current.map(|c| {
            let bins = c.bins();
            let value = bins.iter().next().expect("one bin").value.to_vec();
            (value, c.generation.0, c.void_time.0)
        })
    })
    .expect("same set")
}

#[test]
fn data_generations_ttls_deletes_and_truncates_survive_a_crash() {
    let clock = Arc::new(ManualClock::new(START_UNIX_MS));
    let device = Arc::new(TestDevice::new("d0", u64::from(BLOCK_BYTES) * BLOCKS, 7));
    let ns = open(&device, &clock);
    let void_time = VoidTime(clock.now().epoch_seconds() + 3600);
    for i in 0..50 {
        put(&ns, b"a", &key(i), b"first", Expiry::Never).expect("stored");
        put(
            &ns,
            b"a",
            &key(i),
            format!("second-{i}").as_bytes(),
            Expiry::At(void_time),
        )
        .expect("stored");
        put(&ns, b"b", &key(i), b"in b", Expiry::Never).expect("stored");
    }
    for i in 0..10 {
        delete(&ns, b"a", &key(i)).expect("deleted");
    }
    clock.advance_ms(5);
    assert!(ns.truncate(Some(b"b"), None).expect("truncated"));
    clock.advance_ms(5);
    put(&ns, b"b", &key(0), b"after truncate", Expiry::Never).expect("stored");
    ns.flush_storage().expect("flushed");
    drop(ns);

    let ns = open(&Arc::new(device.crash_losing_all_unsynced()), &clock);
    for i in 0..10 {
        assert_eq!(get(&ns, b"a", &key(i)), None, "deleted key {i} came back");
    }
    for i in 10..50 {
        let expected = (format!("second-{i}").into_bytes(), 2, void_time.0);
        assert_eq!(get(&ns, b"a", &key(i)), Some(expected));
    }
    assert_eq!(
        get(&ns, b"b", &key(0)).map(|r| r.0),
        Some(b"after truncate".to_vec())
    );
    for i in 1..50 {
        assert_eq!(get(&ns, b"b", &key(i)), None, "truncated key {i} came back");
    }
}

#[test]
fn expired_records_stay_gone_after_their_newer_versions_are_defragmented() {
    let clock = Arc::new(ManualClock::new(START_UNIX_MS));
    let device = Arc::new(TestDevice::new("d0", u64::from(BLOCK_BYTES) * BLOCKS, 8));
    let ns = open(&device, &clock);
    let soon = VoidTime(clock.now().epoch_seconds() + 10);
    put(&ns, b"a", b"k", b"old, never expires", Expiry::Never).expect("stored");
    put(&ns, b"a", b"k", b"new, expires soon", Expiry::At(soon)).expect("stored");
    clock.advance_ms(20_000);
    assert_eq!(ns.sweep_expired(), 1);
    churn(&ns, 400);
    ns.flush_storage().expect("flushed");
    while ns.defragment(64) > 0 {
        ns.flush_storage().expect("flushed");
    }
    ns.flush_storage().expect("flushed");
    drop(ns);
    let ns = open(&Arc::new(device.crash_losing_all_unsynced()), &clock);
    assert_eq!(
        get(&ns, b"a", b"k"),
        None,
        "an expired record's older version came back"
    );
}

/// Overwrites a few keys many times with 1 KiB values, so that blocks empty out.
fn churn(ns: &Namespace, writes: usize) {
    let value = vec![b'x'; 1024];
    for i in 0..writes {
        put(ns, b"churn", &key(i % 8), &value, Expiry::Never).expect("stored");
        if i % 50 == 0 {
            ns.flush_storage().expect("flushed");
            ns.defragment(4);
        }
    }
}

#[test]
fn stop_writes_refuses_writes_but_not_reads_or_deletes() {
    let clock = Arc::new(ManualClock::new(START_UNIX_MS));
    let ns = open(
        &Arc::new(TestDevice::new("d0", u64::from(BLOCK_BYTES) * BLOCKS, 9)),
        &clock,
    );
    let value = vec![b'v'; 2000];
    let mut written = 0;
    let refused = loop {
        match put(&ns, b"a", &key(written), &value, Expiry::Never) {
            Ok(()) => written += 1,
            Err(code) => break code,
        }
        assert!(written < 10_000, "stop-writes never came");
    };
    assert_eq!(refused, ResultCode::OutOfSpace);
    assert!(ns.stop_writes());
    assert_eq!(get(&ns, b"a", &key(0)).map(|r| r.0), Some(value.clone()));
    assert_eq!(
        put(&ns, b"a", &key(0), b"refused", Expiry::Never),
        Err(ResultCode::OutOfSpace)
    );
    assert_eq!(
        get(&ns, b"a", &key(0)).map(|r| (r.0, r.1)),
        Some((value, 1)),
        "a refused write changed nothing"
    );
    delete(&ns, b"a", &key(0)).expect("deletes go on under stop-writes");
    assert_eq!(get(&ns, b"a", &key(0)), None);
}

#[test]
fn eviction_removes_the_soonest_to_expire_and_they_stay_gone() {
    let clock = Arc::new(ManualClock::new(START_UNIX_MS));
    let device = Arc::new(TestDevice::new("d0", u64::from(BLOCK_BYTES) * BLOCKS, 10));
    let ns = open_with(config_evicting_above(30), &device, &clock);
    let now = clock.now().epoch_seconds();
    let value = vec![b'e'; 1000];
    for i in 0..400 {
        let expiry = match i % 4 {
            0 => Expiry::Never,
            _ => Expiry::At(VoidTime(now + 1000 + i as u32)),
        };
        put(&ns, b"a", &key(i), &value, expiry).expect("stored");
    }
    assert!(ns.should_evict(), "400 KB of a 1 MiB device is above 30%");
    let mut evicted = 0;
    while ns.should_evict() {
        let round = ns.evict_if_needed();
        assert!(round > 0, "each round above the threshold evicts something");
        evicted += round;
    }
    assert_eq!(ns.summary().evicted_objects, evicted);
    let survivors: Vec<usize> = (0..400)
        .filter(|&i| get(&ns, b"a", &key(i)).is_some())
        .collect();
    assert!(
        (0..400).step_by(4).all(|i| survivors.contains(&i)),
        "a record without a TTL was evicted"
    );
    let soonest_survivor = survivors
        .iter()
        .copied()
        .find(|i| i % 4 != 0)
        .expect("some TTL record remains");
    let gone: Vec<usize> = (0..400).filter(|i| !survivors.contains(i)).collect();
    assert!(
        gone.iter().all(|&i| i < soonest_survivor),
        "evicted {gone:?} but kept {soonest_survivor}, which expires sooner"
    );
    ns.flush_storage().expect("flushed");
    drop(ns);
    let ns = open(&Arc::new(device.crash_losing_all_unsynced()), &clock);
    for i in gone {
        assert_eq!(get(&ns, b"a", &key(i)), None, "evicted key {i} came back");
    }
}

/// What a key may hold after a crash: its last flushed state, or any state written after it.
#[derive(Clone, Debug, Default)]
struct History {
    acked: Option<Vec<u8>>,
    later: Vec<Option<Vec<u8>>>,
}

#[test]
fn random_workloads_survive_random_power_losses() {
    let seed = common::seed("random_workloads_survive_random_power_losses");
    let cases = std::env::var("OSPREY_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(60);
    let mut blocks_freed = 0;
    for case in 0..cases {
        blocks_freed += run_case(seed.wrapping_add(case), case);
    }
    assert!(
        blocks_freed > 0,
        "defragmentation never freed a block: the test lost its point"
    );
}

/// Runs one case; returns how many blocks defragmentation freed in it.
fn run_case(seed: u64, case: u64) -> u64 {
    let mut rng = SmallRng::seed_from_u64(seed);
    let clock = Arc::new(ManualClock::new(START_UNIX_MS));
    let mut device = Arc::new(TestDevice::new("d0", u64::from(BLOCK_BYTES) * BLOCKS, seed));
    let mut history: HashMap<usize, History> = HashMap::new();
    let mut version = 0u64;
    let mut blocks_freed = 0;
    // Odd cases keep data in memory too; even ones read every record back from the device.
    let mut config = config();
    if let Some(storage) = config.storage.as_mut() {
        storage.data_in_memory = case % 2 == 1;
    }
    for round in 0..3 {
        let ns = open_with(config.clone(), &device, &clock);
        check(&ns, &history, seed, case, round);
        // What survived is the new starting point.
        for (k, entry) in history.iter_mut() {
            let found = get(&ns, b"s", &key(*k)).map(|r| r.0);
            *entry = History {
                acked: found,
                later: Vec::new(),
            };
        }
        let steps = rng.random_range(20..200);
        for _ in 0..steps {
            let k = rng.random_range(0..30);
            match rng.random_range(0..100) {
                0..60 => {
                    version += 1;
                    let size = rng.random_range(1..3000);
                    let value = format!("{k}:{version}:{}", "v".repeat(size)).into_bytes();
                    if put(&ns, b"s", &key(k), &value, Expiry::Never).is_ok() {
                        history.entry(k).or_default().later.push(Some(value));
                    }
                }
                60..72 => {
                    if delete(&ns, b"s", &key(k)).is_ok() {
                        history.entry(k).or_default().later.push(None);
                    }
                }
                72..80 => {
                    let entry = history.entry(k).or_default();
                    let latest = entry.later.last().unwrap_or(&entry.acked);
                    let found = get(&ns, b"s", &key(k)).map(|r| r.0);
                    assert!(
                        found == *latest,
                        "seed {seed} (case {case}, round {round}): key {k} read back wrong"
                    );
                }
                80..90 => {
                    ns.defragment(4);
                }
                _ => {
                    if ns.flush_storage().is_ok() {
                        for entry in history.values_mut() {
                            if let Some(last) = entry.later.pop() {
                                entry.acked = last;
                                entry.later.clear();
                            }
                        }
                    }
                }
            }
        }
        blocks_freed += ns.storage_stats().map_or(0, |stats| stats.blocks_freed);
        drop(ns);
        device = Arc::new(device.crash());
    }
    let ns = open_with(config, &device, &clock);
    check(&ns, &history, seed, case, 3);
    blocks_freed
}

fn check(ns: &Namespace, history: &HashMap<usize, History>, seed: u64, case: u64, round: u32) {
    for (k, entry) in history {
        let found = get(ns, b"s", &key(*k)).map(|r| r.0);
        let allowed = found == entry.acked || entry.later.contains(&found);
        assert!(
            allowed,
            "seed {seed} case {case} round {round}: key {k} holds {:?}, expected {:?} or one of {} later states",
            found.map(|v| String::from_utf8_lossy(&v[..v.len().min(20)]).into_owned()),
            entry
                .acked
                .as_ref()
                .map(|v| String::from_utf8_lossy(&v[..v.len().min(20)]).into_owned()),
            entry.later.len()
        );
    }
}
