//! A cold start over entries whose checksums pass but whose seqs no writer could have given.
//!
//! The fuzzer (target `storage_record`) forged a block holding an entry with seq `u64::MAX`.
//! Recovery set the next seq to the largest seq found plus one: a panic with overflow checks,
//! and in a release build a wrap to 0, after which every write would carry a seq below the
//! entries already on the device, so a later cold start would prefer the old versions. Such
//! entries are now refused like a bad checksum, and the writer continues above every seq kept.

use std::sync::Arc;

use storage::format::{SEQ_MAX, encode_block_header, encode_entry};
use storage::test_device::TestDevice;
use storage::{
    Device, EntryKind, Flushing, RecordBody, Recovered, Storage, StorageConfig,
    WRITE_BLOCK_SIZE_BYTES_MIN,
};

const BLOCK: u32 = WRITE_BLOCK_SIZE_BYTES_MIN;

fn config() -> StorageConfig {
    let mut config = StorageConfig::with_defaults(vec!["d0".into()], u64::from(BLOCK) * 4);
    config.write_block_size_bytes = BLOCK;
    config
}

/// Opens storage on a device whose first block (of use `use_seq`) holds one record entry per
/// seq; returns the seqs recovery reported and how many blocks it found corrupt.
fn recover(use_seq: u64, seqs: &[u64]) -> (Vec<u64>, u64) {
    let mut block = Vec::new();
    encode_block_header(use_seq, BLOCK, &mut block);
    let body = RecordBody {
        last_update_ms: 1,
        void_time: 0,
        generation: 1,
        set_name: b"",
        data: &[0],
    };
    for (index, &seq) in seqs.iter().enumerate() {
        let digest = [u8::try_from(index).expect("few entries"); 20];
        encode_entry(
            &mut block,
            0,
            use_seq,
            seq,
            EntryKind::Record,
            &digest,
            &body,
        );
    }
    let device = Arc::new(TestDevice::new("d0", u64::from(BLOCK) * 4, 1));
    device.write_at(0, &block).expect("the block fits");
    let devices: Vec<Arc<dyn Device>> = vec![device];
    let mut recovered = Vec::new();
    let (storage, report) = Storage::open(config(), devices, Flushing::Manual, &mut |event| {
        if let Recovered::Record { body, .. } = event {
            recovered.push(body.last_update_ms);
        }
    })
    .expect("a forged seq does not stop the cold start");
    storage.close();
    let seqs_kept = seqs.iter().copied().take(recovered.len()).collect();
    (seqs_kept, report.corrupt_blocks)
}

#[test]
fn an_entry_with_the_largest_seq_is_refused_instead_of_wrapping_the_next_seq() {
    assert_eq!(recover(1, &[2, u64::MAX]), (vec![2], 1));
    assert_eq!(recover(1, &[2, SEQ_MAX]), (vec![2, SEQ_MAX], 0));
}

#[test]
fn an_entry_not_above_its_blocks_use_seq_is_refused() {
    assert_eq!(recover(10, &[11, 10]), (vec![11], 1));
    assert_eq!(recover(10, &[5]), (vec![], 1));
}
