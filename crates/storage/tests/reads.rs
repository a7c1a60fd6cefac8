//! Reading records back by location: from the block being filled, from the cache of recent
//! blocks, from the device, and what a corrupt entry gets.

use std::sync::Arc;

use storage::test_device::TestDevice;
use storage::{Device, Flushing, Location, RecordBody, Storage, StorageConfig, StorageError};

const BLOCK: u32 = 64 * 1024;
const BLOCKS: u64 = 32;

fn open(device: &Arc<TestDevice>, post_write_queue_blocks: u32) -> Storage {
    let mut config = StorageConfig::with_defaults(vec!["d0".into()], u64::from(BLOCK) * BLOCKS);
    config.write_block_size_bytes = BLOCK;
    config.post_write_queue_blocks = post_write_queue_blocks;
    let devices: Vec<Arc<dyn Device>> = vec![device.clone()];
    let (storage, _) =
        Storage::open(config, devices, Flushing::Manual, &mut |_| {}).expect("opens");
    storage
}

fn digest(i: u32) -> [u8; 20] {
    let mut digest = [7; 20];
    digest[..4].copy_from_slice(&i.to_le_bytes());
    digest
}

fn value(i: u32) -> Vec<u8> {
    format!("value {i} ").repeat(40).into_bytes()
}

/// Writes records 0..count (about 400 bytes each, so 150 per block); returns their locations.
fn write(storage: &Storage, count: u32) -> Vec<Location> {
    (0..count)
        .map(|i| {
            let value = value(i);
            let body = RecordBody {
                last_update_ms: u64::from(i),
                void_time: 0,
                generation: 1,
                set_name: b"s",
                data: &value,
            };
            storage
                .write_record(&digest(i), &body, None)
                .expect("written")
                .0
        })
        .collect()
}

fn read_data(storage: &Storage, i: u32, location: Location) -> Result<Vec<u8>, StorageError> {
    let body = storage.read_record(&digest(i), location)?;
    let decoded = RecordBody::decode(&body).expect("a record body");
    assert_eq!(decoded.last_update_ms, u64::from(i));
    Ok(decoded.data.to_vec())
}

#[test]
fn records_read_back_from_memory_before_a_flush_and_from_the_device_after() {
    let device = Arc::new(TestDevice::new("d0", u64::from(BLOCK) * BLOCKS, 1));
    let storage = open(&device, 2);
    let device_reads_at_start = device.stats().reads;
    let locations = write(&storage, 1000);
    for (i, &location) in locations.iter().enumerate() {
        assert_eq!(read_data(&storage, i as u32, location), Ok(value(i as u32)));
    }
    let stats = storage.stats();
    assert_eq!(
        (stats.reads_from_memory, stats.reads_from_device),
        (1000, 0),
        "nothing was flushed: every read came from the write blocks in memory"
    );
    assert_eq!(
        device.stats().reads,
        device_reads_at_start,
        "unwritten blocks are not read from the device"
    );
    storage.flush().expect("flushed");
    for (i, &location) in locations.iter().enumerate() {
        assert_eq!(read_data(&storage, i as u32, location), Ok(value(i as u32)));
    }
    let stats = storage.stats();
    assert!(
        stats.reads_from_device > 0,
        "with 2 blocks cached, older blocks are read from the device"
    );
    assert!(
        stats.reads_from_memory > 1000,
        "the last blocks written are still served from memory"
    );
}

#[test]
fn a_record_read_from_a_restarted_storage_matches_what_was_written() {
    let device = Arc::new(TestDevice::new("d0", u64::from(BLOCK) * BLOCKS, 2));
    let storage = open(&device, 64);
    let locations = write(&storage, 600);
    storage.flush().expect("flushed");
    drop(storage);
    let device = Arc::new(device.crash());
    let storage = open(&device, 64);
    for (i, &location) in locations.iter().enumerate() {
        assert_eq!(read_data(&storage, i as u32, location), Ok(value(i as u32)));
    }
    assert_eq!(storage.stats().reads_from_device, 600);
}

#[test]
fn a_bit_flipped_in_transit_is_read_again_and_corruption_on_the_device_is_an_error() {
    let device = Arc::new(TestDevice::new("d0", u64::from(BLOCK) * BLOCKS, 3));
    let storage = open(&device, 0);
    let locations = write(&storage, 400);
    storage.flush().expect("flushed");
    // Every read flips one bit: the first read of each record fails its checksum, the second
    // one (also flipped) too, so flipping on every read must end in an error, never bad data.
    device.flip_bits_on_read(1.0);
    assert!(matches!(
        read_data(&storage, 0, locations[0]),
        Err(StorageError::Unreadable(_))
    ));
    // Flips now and then: the retry reads good bytes.
    device.flip_bits_on_read(0.3);
    let mut errors = 0;
    for (i, &location) in locations.iter().enumerate() {
        match read_data(&storage, i as u32, location) {
            Ok(data) => assert_eq!(data, value(i as u32), "a flipped bit was served"),
            Err(StorageError::Unreadable(_)) => errors += 1,
            Err(other) => panic!("unexpected {other}"),
        }
    }
    assert!(
        errors < 80,
        "a retry mostly reads good bytes: {errors} errors"
    );
    device.flip_bits_on_read(0.0);
    let victim = locations[200];
    let offset = u64::from(victim.block()) * u64::from(BLOCK) + victim.offset_bytes() as u64;
    device.corrupt(offset + 60, 4);
    assert!(matches!(
        read_data(&storage, 200, victim),
        Err(StorageError::Unreadable(_))
    ));
    assert_eq!(read_data(&storage, 201, locations[201]), Ok(value(201)));
    assert!(storage.stats().read_errors >= 2);
}

#[test]
fn a_location_read_for_another_digest_is_refused() {
    let device = Arc::new(TestDevice::new("d0", u64::from(BLOCK) * BLOCKS, 4));
    let storage = open(&device, 0);
    let locations = write(&storage, 10);
    for flushed in [false, true] {
        if flushed {
            storage.flush().expect("flushed");
        }
        assert!(matches!(
            storage.read_record(&digest(1), locations[0]),
            Err(StorageError::Unreadable(_))
        ));
    }
}

#[test]
fn defragmentation_waits_until_free_space_falls_below_its_start_threshold() {
    let device = Arc::new(TestDevice::new("d0", u64::from(BLOCK) * BLOCKS, 5));
    let storage = open(&device, 0);
    assert_eq!(storage.config().defrag_start_avail_pct, 50);
    // Each round overwrites the same 300 records (about 2 blocks): earlier blocks empty out.
    let mut locations: Vec<Option<Location>> = vec![None; 300];
    let mut rounds = 0;
    while storage.stats().available_pct() >= 50 {
        assert!(
            storage.defrag_candidates(64).is_empty(),
            "defragmentation started with {}% free",
            storage.stats().available_pct()
        );
        for (i, location) in locations.iter_mut().enumerate() {
            let value = value(i as u32);
            let body = RecordBody {
                last_update_ms: 0,
                void_time: 0,
                generation: 1,
                set_name: b"s",
                data: &value,
            };
            *location = Some(
                storage
                    .write_record(&digest(i as u32), &body, *location)
                    .expect("written")
                    .0,
            );
        }
        storage.flush().expect("flushed");
        rounds += 1;
    }
    assert!(rounds > 3);
    let candidates = storage.defrag_candidates(64);
    assert!(
        !candidates.is_empty(),
        "below 50% free, the emptied blocks are defragmented"
    );
}
