//! The target over on-disk record decoding: a write block as the storage reads it back, walked
//! by the format's decoders and then recovered by a namespace on a cold start.
//!
//! Checksums guard every block header and entry, so random bytes would almost never get past
//! them. The target therefore seals its input first, as a writer would: it recomputes the
//! header checksum and the checksum of every entry whose length is plausible, so the fuzzer
//! reaches the structure behind the checksums. Inputs whose first byte asks for it are left
//! unsealed, to exercise the paths that refuse a bad checksum.
//!
//! Invariants the target asserts, beyond "no panic":
//! - [`format::walk_entries`] yields, in order, exactly the sealed entries up to the first one whose
//!   kind is unknown or whose seq the writer could not have given, each inside the block and
//!   16-byte aligned, and [`format::decode_entry_at`] decodes each again from its location alone.
//! - Record and truncate bodies that decode re-encode to the same bytes.
//! - A namespace opened on a device holding the block answers a read of every record in it
//!   with its bins, NOT_FOUND or UNKNOWN (a record it cannot read), never a panic.

use std::sync::Arc;

use engine::{ManualClock, Namespace, NamespaceConfig};
use model::Digest;
use storage::format::{
    self, ALIGN_BYTES, BLOCK_HEADER_SIZE_BYTES, END_MARKER_SIZE_BYTES, ENTRY_HEADER_SIZE_BYTES,
    EntryBody, TruncateBody,
};
use storage::test_device::TestDevice;
use storage::{Device, Entry, EntryKind, Flushing, RecordBody, StorageConfig};

use crate::fixture;

/// The write block size the target uses: the smallest the storage accepts.
pub const BLOCK_SIZE_BYTES: u32 = storage::WRITE_BLOCK_SIZE_BYTES_MIN;

/// Blocks on the target's device: the fewest a storage accepts.
const BLOCK_COUNT: u64 = 4;

/// Block 0 holds the input; the others stay blank.
const INPUT_BLOCK: u32 = 0;

/// Bit of the first input byte that leaves the block unsealed.
const UNSEALED: u8 = 0x01;

/// Bit of the first input byte that keeps record data in memory on the cold start.
const DATA_IN_MEMORY: u8 = 0x02;

/// Target `storage_record`: a flags byte, then the first bytes of a write block (the rest of
/// the block is zeros).
pub fn storage_record(data: &[u8]) {
    let Some((&flags, image)) = data.split_first() else {
        return;
    };
    let block_size_bytes = BLOCK_SIZE_BYTES as usize;
    let mut block = image[..image.len().min(block_size_bytes)].to_vec();
    block.resize(block_size_bytes, 0);
    let sealed = if flags & UNSEALED == 0 {
        Some(seal(&mut block))
    } else {
        None
    };
    let use_seq = format::decode_block_header(&block, BLOCK_SIZE_BYTES).ok();
    let entries = use_seq.map_or_else(Vec::new, |use_seq| walk(&block, use_seq));
    if let (Some(sealed), Some(_)) = (sealed, use_seq) {
        assert_eq!(
            entries.len(),
            sealed,
            "entries walked versus entries sealed"
        );
    }
    for entry in &entries {
        check_body(entry);
    }
    cold_start(&block, &entries, flags & DATA_IN_MEMORY != 0);
}

/// Recomputes the header checksum and every plausible entry's checksum, as the writer
/// computed them; returns how many entries precede the first that the format refuses anyway:
/// an unknown kind, or a seq not above the block's use_seq or above [`format::SEQ_MAX`].
fn seal(block: &mut [u8]) -> usize {
    let header_crc = crc32c::crc32c(&block[..24]);
    block[24..28].copy_from_slice(&header_crc.to_le_bytes());
    let use_seq = u64::from_le_bytes(block[8..16].try_into().expect("8 bytes"));
    let mut offset = BLOCK_HEADER_SIZE_BYTES;
    let mut accepted = 0;
    let mut refused = false;
    while offset + END_MARKER_SIZE_BYTES <= block.len() {
        let word = |at: usize| u32::from_le_bytes(block[at..at + 4].try_into().expect("4 bytes"));
        let exact_len = word(offset + 4) as usize;
        if word(offset) == 0 && exact_len == 0 {
            break;
        }
        let len = exact_len.next_multiple_of(ALIGN_BYTES);
        if exact_len < ENTRY_HEADER_SIZE_BYTES || offset + len > block.len() {
            break;
        }
        let seq_crc = crc32c::crc32c(&use_seq.to_le_bytes());
        let crc = crc32c::crc32c_append(seq_crc, &block[offset + 4..offset + exact_len]);
        block[offset..offset + 4].copy_from_slice(&crc.to_le_bytes());
        let seq = u64::from_le_bytes(block[offset + 8..offset + 16].try_into().expect("8 bytes"));
        let seq_valid = seq > use_seq && seq <= format::SEQ_MAX;
        refused |= !seq_valid || !(1..=3).contains(&block[offset + 16]);
        if !refused {
            accepted += 1;
        }
        offset += len;
    }
    accepted
}

/// The entries [`format::walk_entries`] yields, each checked against its location.
fn walk(block: &[u8], use_seq: u64) -> Vec<Entry<'_>> {
    let mut entries: Vec<Entry<'_>> = Vec::new();
    format::walk_entries(INPUT_BLOCK, use_seq, block, |entry| entries.push(entry));
    let mut next_offset = BLOCK_HEADER_SIZE_BYTES;
    for entry in &entries {
        let location = entry.location;
        assert_eq!(location.block(), INPUT_BLOCK);
        assert_eq!(
            location.offset_bytes(),
            next_offset,
            "entries are back to back"
        );
        let end = location.offset_bytes() + location.len_bytes();
        assert!(end <= block.len(), "an entry ends inside its block");
        assert!(ENTRY_HEADER_SIZE_BYTES + entry.body.len() <= location.len_bytes());
        let again =
            format::decode_entry_at(location, use_seq, &block[location.offset_bytes()..end]);
        assert_eq!(
            again,
            Some(*entry),
            "an entry decodes again from its location"
        );
        next_offset = end;
    }
    entries
}

fn check_body(entry: &Entry<'_>) {
    match entry.kind {
        EntryKind::Record => {
            if let Some(body) = RecordBody::decode(entry.body) {
                let mut encoded = Vec::new();
                body.encode(&mut encoded);
                assert_eq!(encoded.len(), body.len_bytes());
                assert_eq!(encoded, entry.body, "a record body re-encodes to itself");
            }
        }
        EntryKind::Truncate => {
            if let Some(body) = TruncateBody::decode(entry.body) {
                let mut encoded = Vec::new();
                body.encode(&mut encoded);
                assert_eq!(
                    encoded,
                    entry.body[..encoded.len()],
                    "a truncate body re-encodes"
                );
            }
        }
        EntryKind::Tombstone => {
            let shadow_seq = format::decode_tombstone(entry.body);
            assert_eq!(shadow_seq.is_some(), entry.body.len() >= 8);
        }
    }
}

/// Opens a namespace on a device whose first block is `block`, and reads every record an
/// entry names.
fn cold_start(block: &[u8], entries: &[Entry<'_>], data_in_memory: bool) {
    let device_size_bytes = u64::from(BLOCK_SIZE_BYTES) * BLOCK_COUNT;
    let device = Arc::new(TestDevice::new("fuzz", device_size_bytes, 0));
    device
        .write_at(0, block)
        .expect("the block fits the device");
    device.sync().expect("a test device syncs");
    let mut storage = StorageConfig::with_defaults(vec!["fuzz".into()], device_size_bytes);
    storage.write_block_size_bytes = BLOCK_SIZE_BYTES;
    storage.data_in_memory = data_in_memory;
    let config = NamespaceConfig {
        storage: Some(storage),
        allow_ttl_without_nsup: true,
        ..NamespaceConfig::with_defaults("fuzz")
    };
    let clock = Arc::new(ManualClock::new(fixture::START_UNIX_MS));
    let devices: Vec<Arc<dyn Device>> = vec![device];
    let Ok((namespace, _report)) = Namespace::open(config, clock, devices, Flushing::Manual) else {
        return;
    };
    for entry in entries {
        read_back(&namespace, Digest(entry.digest));
    }
    namespace.close();
}

fn read_back(namespace: &Namespace, digest: Digest) {
    if let Ok((meta, bins)) = fixture::read_all(namespace, digest) {
        assert_ne!(meta.generation.0, 0, "a record read back has a generation");
        for (name, particle_type, _) in &bins {
            assert!(
                (1..=model::BIN_NAME_BYTES_MAX).contains(&name.len()),
                "bin name {name:?}"
            );
            assert_ne!(*particle_type, 0, "a stored bin has a value");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_block_of_one_record_walks_and_recovers() {
        let mut block = Vec::new();
        format::encode_block_header(1, BLOCK_SIZE_BYTES, &mut block);
        let body = RecordBody {
            last_update_ms: fixture::START_UNIX_MS,
            void_time: 0,
            generation: 1,
            set_name: b"fuzz",
            // No key, one bin "a" holding the string "x".
            data: &[0, 1, b'a', 3, 1, b'x'],
        };
        let digest = fixture::digest(0).0;
        format::encode_entry(&mut block, 0, 1, 2, EntryKind::Record, &digest, &body);
        let mut data = vec![0];
        data.extend_from_slice(&block);
        storage_record(&data);
        data[0] = UNSEALED | DATA_IN_MEMORY;
        storage_record(&data);
    }
}
