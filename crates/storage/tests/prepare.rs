//! The flusher readies a block (`Device::prepare`) when its first flush writes only part of it,
//! so that the group commits filling the rest sync data alone; a block written whole in one
//! flush needs nothing readied.

use std::collections::BTreeSet;
use std::sync::Arc;

use storage::test_device::TestDevice;
use storage::{Device, Flushing, Location, RecordBody, Storage, StorageConfig};

const BLOCK: u32 = 64 * 1024;
const BLOCKS: u64 = 16;
const RECORDS: u32 = 500;

fn open(commit_to_device: bool) -> (Storage, Arc<TestDevice>) {
    let size_bytes = u64::from(BLOCK) * BLOCKS;
    let mut config = StorageConfig::with_defaults(vec!["d0".into()], size_bytes);
    config.write_block_size_bytes = BLOCK;
    config.commit_to_device = commit_to_device;
    let device = Arc::new(TestDevice::new("d0", size_bytes, 11));
    let devices: Vec<Arc<dyn Device>> = vec![device.clone()];
    let (storage, _) =
        Storage::open(config, devices, Flushing::Manual, &mut |_| {}).expect("opens");
    (storage, device)
}

/// Writes record `i` (about 400 bytes), flushing after it when `flush_each`.
fn write(storage: &Storage, i: u32, flush_each: bool) -> Location {
    let mut digest = [5; 20];
    digest[..4].copy_from_slice(&i.to_le_bytes());
    let data = vec![b'r'; 400];
    let body = RecordBody {
        last_update_ms: 1,
        void_time: 0,
        generation: 1,
        set_name: b"",
        data: &data,
    };
    let location = storage
        .write_record(&digest, &body, None)
        .expect("written")
        .0;
    if flush_each {
        storage.flush().expect("flushed");
    }
    location
}

/// Writes every record (flushing after each when `flush_each`); returns the blocks they went to.
fn write_all(storage: &Storage, flush_each: bool) -> BTreeSet<u32> {
    let blocks: BTreeSet<u32> = (0..RECORDS)
        .map(|i| write(storage, i, flush_each).block())
        .collect();
    assert!(blocks.len() >= 3, "the records span blocks: {blocks:?}");
    blocks
}

#[test]
fn each_block_filled_by_group_commits_is_readied_once_at_its_first_flush() {
    let (storage, device) = open(true);
    let blocks = write_all(&storage, true);
    let stats = device.stats();
    assert_eq!(
        stats.syncs,
        u64::from(RECORDS),
        "one group commit per record"
    );
    assert_eq!(
        stats.prepares,
        blocks.len() as u64,
        "one per block: {blocks:?}"
    );
}

#[test]
fn blocks_sealed_before_their_first_flush_are_written_whole_without_readying() {
    let (storage, device) = open(false);
    write_all(&storage, false);
    storage.flush().expect("flushed");
    assert_eq!(
        device.stats().prepares,
        1,
        "only the block still being filled, whose later flushes write after this one"
    );
}
