//! Records on a device whose checksum passes but whose data is not what the engine writes.
//!
//! The fuzzer (target `storage_record`) forged such an entry within seconds: a write block with
//! a correct checksum over a record body whose packed bins declared a value longer than the
//! data. A cold start put it in the index, and the first read of it panicked in the engine's
//! bin iterator, with data in memory or read back from the device alike. A checksum proves the
//! bytes are the ones written, not that they were well formed (a bug in an older version, or a
//! corruption the checksum misses, writes them), so the engine now checks the layout where
//! data comes from a device: at cold start (the record is skipped, and logged) and on every
//! read back (the read fails with UNKNOWN).

use std::sync::Arc;

use engine::{BinRef, ManualClock, Namespace, NamespaceConfig, ReadRequest, ReplySink};
use model::{CITRUSLEAF_EPOCH_UNIX_SECONDS, Digest, OpCode, ResultCode, UserKey};
use storage::format::{encode_block_header, encode_entry};
use storage::test_device::TestDevice;
use storage::{Device, EntryKind, Flushing, RecordBody, StorageConfig};

const BLOCK_BYTES: u32 = storage::WRITE_BLOCK_SIZE_BYTES_MIN;
const BLOCKS: u64 = 4;
const START_UNIX_MS: u64 = (CITRUSLEAF_EPOCH_UNIX_SECONDS + 1_000_000) * 1000;

/// A bin as a read returned it: name, particle type, value.
type OwnedBin = (Vec<u8>, u8, Vec<u8>);

#[derive(Default)]
struct Collect(Vec<OwnedBin>);

impl ReplySink for Collect {
    fn bin(&mut self, _op_code: OpCode, bin: BinRef<'_>) {
        self.0
            .push((bin.name.to_vec(), bin.particle_type, bin.value.to_vec()));
    }
}

fn digest(key: i64) -> Digest {
    Digest::compute(b"s", &UserKey::Integer(key))
}

/// A device whose first block holds one record entry per `(key, data)`, each with a correct
/// checksum whatever its data.
fn device_with(records: &[(i64, &[u8])]) -> Arc<TestDevice> {
    let mut block = Vec::new();
    encode_block_header(1, BLOCK_BYTES, &mut block);
    for (seq, (key, data)) in (2..).zip(records) {
        let body = RecordBody {
            last_update_ms: START_UNIX_MS,
            void_time: 0,
            generation: 1,
            set_name: b"s",
            data,
        };
        encode_entry(
            &mut block,
            0,
            1,
            seq,
            EntryKind::Record,
            &digest(*key).0,
            &body,
        );
    }
    let device = Arc::new(TestDevice::new("d0", u64::from(BLOCK_BYTES) * BLOCKS, 1));
    device.write_at(0, &block).expect("the block fits");
    device.sync().expect("a test device syncs");
    device
}

fn open(device: &Arc<TestDevice>, data_in_memory: bool) -> Namespace {
    let mut storage =
        StorageConfig::with_defaults(vec!["d0".into()], u64::from(BLOCK_BYTES) * BLOCKS);
    storage.write_block_size_bytes = BLOCK_BYTES;
    storage.data_in_memory = data_in_memory;
    let config = NamespaceConfig {
        storage: Some(storage),
        ..NamespaceConfig::with_defaults("test")
    };
    let clock = Arc::new(ManualClock::new(START_UNIX_MS));
    let devices: Vec<Arc<dyn Device>> = vec![device.clone()];
    let (namespace, _) =
        Namespace::open(config, clock, devices, Flushing::Manual).expect("the device opens");
    namespace
}

fn read(namespace: &Namespace, key: i64) -> Result<Vec<OwnedBin>, ResultCode> {
    let request = ReadRequest {
        digest: digest(key),
        set_name: b"",
        key: None,
        respond_all_ops: false,
        read_all_bins: true,
        header_only: false,
        deadline: engine::Deadline::NONE,
        filter: None,
    };
    let mut sink = Collect::default();
    namespace.read(&request, std::iter::empty(), &mut sink)?;
    Ok(sink.0)
}

#[test]
fn a_record_whose_bins_run_past_its_data_is_skipped_at_cold_start_not_a_panic_on_read() {
    // Key 1: no user key, one bin "a" of type STRING that declares 5 value bytes but has 1.
    // Key 2: a well-formed record beside it, which must still read back.
    let malformed: &[u8] = &[0, 1, b'a', 3, 5, b'x'];
    let good: &[u8] = &[0, 1, b'a', 3, 1, b'x'];
    let device = device_with(&[(1, malformed), (2, good)]);
    for data_in_memory in [true, false] {
        let namespace = open(&device, data_in_memory);
        assert_eq!(
            read(&namespace, 1),
            Err(ResultCode::NotFound),
            "{data_in_memory}"
        );
        let bins = read(&namespace, 2).expect("the good record reads back");
        assert_eq!(bins, [(b"a".to_vec(), 3, b"x".to_vec())]);
        assert_eq!(namespace.summary().objects, 1);
        namespace.close();
    }
}

#[test]
fn malformed_keys_names_and_varints_are_all_refused_at_cold_start() {
    let cases: [&[u8]; 6] = [
        &[],                          // no key byte
        &[3, 9, b'k'],                // a user key longer than the data
        &[0, 0, 3, 1, b'x'],          // an empty bin name
        &[0, 16, b'a'],               // a bin name over 15 bytes, cut short
        &[0, 1, b'a', 0, 0],          // a NULL bin
        &[0, 1, b'a', 3, 0x80, 0x80], // a value length that never ends
    ];
    for (key, data) in (10..).zip(cases) {
        let device = device_with(&[(key, data)]);
        for data_in_memory in [true, false] {
            let namespace = open(&device, data_in_memory);
            assert_eq!(read(&namespace, key), Err(ResultCode::NotFound), "{data:?}");
            namespace.close();
        }
    }
}
