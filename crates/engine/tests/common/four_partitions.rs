//! Records placed in four partitions (digests built, not hashed), so that each partition holds
//! hundreds of records; shared by the scan and secondary-index model tests.

use engine::{BinRef, Deadline, DeleteRequest, GenerationPolicy, ReplySink};
use model::{Digest, OpCode};

/// Partitions the keys fall in: 0..4.
pub const PARTITIONS_USED: u16 = 4;

/// A reply sink that drops what it is given.
pub struct NoSink;

impl ReplySink for NoSink {
    fn bin(&mut self, _: OpCode, _: BinRef<'_>) {}
}

/// Key `k`'s digest: partition `k % 4`, unique bytes after the partition id.
pub fn digest(key: u64) -> Digest {
    let mut bytes = [0u8; 20];
    let partition = u16::try_from(key % u64::from(PARTITIONS_USED)).expect("below 4");
    bytes[..2].copy_from_slice(&partition.to_le_bytes());
    bytes[2..10].copy_from_slice(&key.wrapping_mul(0x9e37_79b9_7f4a_7c15).to_be_bytes());
    Digest(bytes)
}

/// A plain delete of key `key`, with no set name and no generation check.
pub fn delete_request(key: u64) -> DeleteRequest<'static> {
    DeleteRequest {
        digest: digest(key),
        set_name: b"",
        key: None,
        generation: GenerationPolicy::None,
        deadline: Deadline::NONE,
        filter: None,
    }
}
