//! Without commit-to-device, sealed blocks are written at once but synced together, once per
//! flush window, while space is plentiful; once it is short, every flush syncs. Either way a
//! flush that is due leaves nothing unsynced.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use storage::test_device::TestDevice;
use storage::{Device, Flushing, Location, RecordBody, Recovered, Storage, StorageConfig};

const BLOCK: u32 = 64 * 1024;
const BLOCKS: u64 = 64;
/// About 400 bytes each: 1,000 of them fill six blocks and part of a seventh.
const RECORDS: u32 = 1_000;

fn config(flush_max_ms: u64, defrag_start_avail_pct: u8) -> StorageConfig {
    let mut config = StorageConfig::with_defaults(vec!["d0".into()], u64::from(BLOCK) * BLOCKS);
    config.write_block_size_bytes = BLOCK;
    config.commit_to_device = false;
    config.flush_max_ms = flush_max_ms;
    config.defrag_start_avail_pct = defrag_start_avail_pct;
    config
}

fn open(device: TestDevice, config: StorageConfig) -> (Storage, Arc<TestDevice>, HashSet<u32>) {
    let device = Arc::new(device);
    let devices: Vec<Arc<dyn Device>> = vec![device.clone()];
    let mut found = HashSet::new();
    let (storage, report) = Storage::open(config, devices, Flushing::Background, &mut |event| {
        if let Recovered::Record { body, .. } = event {
            found.insert(u32::from_le_bytes(
                body.data[..4].try_into().expect("4 bytes"),
            ));
        }
    })
    .expect("opens");
    assert_eq!(report.corrupt_blocks, 0);
    (storage, device, found)
}

fn write_records(storage: &Storage) -> Vec<Location> {
    write_versions(storage, RECORDS, b'v', None)
}

/// Writes records `0..count` with data `i` (4 bytes) then `fill` up to 360 bytes, replacing
/// the versions at `replaced` if given; returns the new locations.
fn write_versions(
    storage: &Storage,
    count: u32,
    fill: u8,
    replaced: Option<&[Location]>,
) -> Vec<Location> {
    (0..count)
        .map(|i| {
            let mut digest = [3; 20];
            digest[..4].copy_from_slice(&i.to_le_bytes());
            let mut data = i.to_le_bytes().to_vec();
            data.resize(360, fill);
            let body = RecordBody {
                last_update_ms: u64::from(fill),
                void_time: 0,
                generation: 1,
                set_name: b"",
                data: &data,
            };
            let replaced = replaced.map(|locations| locations[i as usize]);
            storage
                .write_record(&digest, &body, replaced)
                .expect("written")
                .0
        })
        .collect()
}

/// Polls `done` every 10 ms for up to 10 s.
fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The records whose block was sealed (every block but the one still being filled).
fn in_sealed_blocks(locations: &[Location]) -> HashSet<u32> {
    let last_block = locations.last().expect("some records").block();
    (0..RECORDS)
        .filter(|&i| locations[i as usize].block() != last_block)
        .collect()
}

/// Also the regression test of a lost wakeup: a block sealed while the flusher was busy used
/// to raise a notification nobody waited for, so it sat in the write queue until the flush
/// window ended (here: never), and a busy server could fill its write queue.
#[test]
fn with_space_plentiful_sealed_blocks_are_written_at_once_and_synced_when_the_flush_is_due() {
    let (storage, device, _) = open(TestDevice::new("d0", u64::from(BLOCK) * BLOCKS, 7), {
        // A window far longer than the test: only the explicit flush below is due.
        config(600_000, 50)
    });
    let locations = write_records(&storage);
    let sealed = in_sealed_blocks(&locations);
    assert!(sealed.len() > 700, "six blocks sealed: {}", sealed.len());
    wait_for("the sealed blocks to be written", || {
        device.stats().bytes_written >= 6 * u64::from(BLOCK - 512)
    });
    assert_eq!(
        device.stats().syncs,
        0,
        "written, not synced, before the window ends"
    );
    assert!(device.pending_write_count() >= 6);
    // A power loss now may lose them: that is the window relaxed durability allows.
    let (_, _, survivors) = open(device.crash_losing_all_unsynced(), config(600_000, 50));
    assert!(
        survivors.is_empty(),
        "nothing was synced: {}",
        survivors.len()
    );

    storage.flush().expect("flushed");
    assert_eq!(device.stats().syncs, 1, "one sync for every block written");
    assert_eq!(device.pending_write_count(), 0);
    let (_, _, survivors) = open(device.crash_losing_all_unsynced(), config(600_000, 50));
    assert_eq!(
        survivors.len(),
        RECORDS as usize,
        "every record after the due flush"
    );
}

#[test]
fn the_flush_window_syncs_what_was_written_without_a_sync() {
    let (storage, device, _) = open(
        TestDevice::new("d0", u64::from(BLOCK) * BLOCKS, 8),
        config(100, 50),
    );
    write_records(&storage);
    wait_for("the window's sync", || {
        device.stats().syncs >= 1 && device.pending_write_count() == 0
    });
    let (_, _, survivors) = open(device.crash_losing_all_unsynced(), config(100, 50));
    assert_eq!(survivors.len(), RECORDS as usize);
}

#[test]
fn with_space_short_every_sealed_block_is_synced_at_once() {
    // Defragmentation starts below 100% free: space counts as short from the first block on.
    let (storage, device, _) = open(
        TestDevice::new("d0", u64::from(BLOCK) * BLOCKS, 9),
        config(600_000, 100),
    );
    let locations = write_records(&storage);
    let sealed = in_sealed_blocks(&locations);
    // Every sealed block written, and nothing left unsynced: each flush synced its block.
    wait_for("the sealed blocks to be synced", || {
        device.stats().bytes_written >= 6 * u64::from(BLOCK - 512)
            && device.pending_write_count() == 0
    });
    let (_, _, survivors) = open(device.crash_losing_all_unsynced(), config(600_000, 100));
    assert!(
        sealed.is_subset(&survivors),
        "{} of {} records in sealed blocks survived",
        sealed.intersection(&survivors).count(),
        sealed.len()
    );
}

/// Power loss while sealed blocks were written but not synced: whatever part of them the
/// device kept (all, none, a torn prefix, some sectors), recovery succeeds, every record the
/// last due flush covered is there, and each record is one of the versions written.
#[test]
fn a_power_loss_between_syncs_loses_at_most_the_window_and_serves_no_torn_record() {
    for seed in 0..20u64 {
        let device = TestDevice::new("d0", u64::from(BLOCK) * BLOCKS, 100 + seed);
        let (storage, device, _) = open(device, config(600_000, 50));
        let first = write_records(&storage);
        storage.flush().expect("flushed");
        // Second versions of the first 600 records, with other bytes: four more blocks sealed.
        write_versions(&storage, 600, b'w', Some(&first));
        let syncs_before = device.stats().syncs;
        wait_for("the second versions' sealed blocks", || {
            device.pending_write_count() >= 3
        });
        assert_eq!(
            device.stats().syncs,
            syncs_before,
            "seed {seed}: no sync before the window"
        );
        let crashed = device.crash();
        drop(storage);
        let devices: Vec<Arc<dyn Device>> = vec![Arc::new(crashed)];
        let mut versions: std::collections::HashMap<u32, u8> = std::collections::HashMap::new();
        Storage::open(
            config(600_000, 50),
            devices,
            Flushing::Manual,
            &mut |event| {
                if let Recovered::Record { body, .. } = event {
                    let i = u32::from_le_bytes(body.data[..4].try_into().expect("4 bytes"));
                    let fill = body.data[359];
                    assert!(
                        body.data[4..].iter().all(|&byte| byte == fill),
                        "seed {seed}: record {i} is torn"
                    );
                    versions.insert(i, fill);
                }
            },
        )
        .unwrap_or_else(|e| panic!("seed {seed}: recovery failed: {e}"));
        assert_eq!(
            versions.len(),
            RECORDS as usize,
            "seed {seed}: a synced record was lost"
        );
        for (i, fill) in versions {
            let allowed: &[u8] = if i < 600 { b"vw" } else { b"v" };
            assert!(
                allowed.contains(&fill),
                "seed {seed}: record {i} has version {fill}"
            );
        }
    }
}
