//! Appends, a restart, and what recovery reports.

use std::collections::HashMap;
use std::sync::Arc;

use storage::test_device::TestDevice;
use storage::{Device, Flushing, Location, RecordBody, Recovered, Storage, StorageConfig};

const BLOCK: u32 = 64 * 1024;

fn config() -> StorageConfig {
    let mut config = StorageConfig::with_defaults(vec!["d0".into()], u64::from(BLOCK) * 16);
    config.write_block_size_bytes = BLOCK;
    config.commit_to_device = true;
    config
}

#[derive(Default)]
struct Model {
    records: HashMap<[u8; 20], (Location, Vec<u8>)>,
}

fn body(data: &[u8]) -> RecordBody<'_> {
    RecordBody {
        last_update_ms: 1,
        void_time: 0,
        generation: 1,
        set_name: b"s",
        data,
    }
}

#[test]
fn writes_and_deletes_survive_a_restart() {
    let device = TestDevice::new("d0", u64::from(BLOCK) * 16, 1);
    let devices: Vec<Arc<dyn Device>> = vec![Arc::new(device)];
    let (storage, _) =
        Storage::open(config(), devices.clone(), Flushing::Background, &mut |_| {}).expect("opens");
    let mut locations = HashMap::new();
    for i in 0..500u32 {
        let digest = [
            i as u8,
            (i >> 8) as u8,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            1,
        ];
        let value = vec![i as u8; 300];
        let (location, _) = storage
            .write_record(&digest, &body(&value), None)
            .expect("written");
        locations.insert(digest, location);
    }
    let mut points = Vec::new();
    for i in 0..100u32 {
        let digest = [
            i as u8,
            (i >> 8) as u8,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            1,
        ];
        let point = storage
            .delete_record(&digest, locations.remove(&digest))
            .expect("deleted");
        points.extend(point);
    }
    for point in points {
        point.into_durable().wait().expect("durable");
    }
    let stats = storage.stats();
    assert!(stats.flushes >= 1);
    drop(storage);
    let raw = devices[0].clone();
    let mut model = Model::default();
    let (reopened, report) = Storage::open(
        config(),
        vec![raw],
        Flushing::Background,
        &mut |event| match event {
            Recovered::Record {
                digest,
                location,
                body,
            } => {
                model.records.insert(digest, (location, body.data.to_vec()));
            }
            Recovered::Deleted { digest } => {
                model.records.remove(&digest);
            }
            Recovered::Truncated { .. } => {}
        },
    )
    .expect("reopens");
    assert_eq!(report.corrupt_blocks, 0);
    assert_eq!(model.records.len(), 400);
    for (digest, (location, data)) in &model.records {
        assert_eq!(locations[digest], *location);
        assert_eq!(data[0], digest[0]);
    }
    assert_eq!(reopened.stats().tombstones, 100);
}
