//! Storage: records appended to log-structured write blocks on files or block devices.
//!
//! Layer 1: depends on std, `parking_lot`, `crc32c`, `tracing`, `rand` (the test device) and
//! `thiserror` only; knows nothing of namespaces or transactions. The engine hands it encoded
//! records under each record's partition lock and keeps, in its index, the [`Location`] each
//! one was appended at; it calls back for defragmentation. Read `docs/internals/on-disk-format.md`
//! first: the format, group commit, defragmentation, tombstones and cold start, with the why.
//!
//! Modules: `format` (bytes on disk), `blocks` (block states and live bytes), `store` (appends
//! and the engine's calls), `flusher` (writes and syncs), `durability` (waiting for a sync),
//! `tombstones` (deletes that survive restarts), `recovery` (cold start), devices.

mod blocks;
mod config;
mod device;
mod durability;
mod file_device;
mod flusher;
pub mod format;
mod reads;
mod recovery;
mod store;
pub mod test_device;
mod tombstones;

pub use config::{
    POST_WRITE_QUEUE_BLOCKS_MAX, StorageConfig, WRITE_BLOCK_SIZE_BYTES_MAX,
    WRITE_BLOCK_SIZE_BYTES_MIN,
};
pub use device::Device;
pub use durability::{Durable, DurablePoint};
pub use file_device::FileDevice;
pub use format::{DigestBytes, Entry, EntryKind, Location, RecordBody};
pub use recovery::{BlockImage, Recovered};
pub use store::{Flushing, RecoveryReport, Storage};

/// Why the storage refused or failed an operation.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StorageError {
    /// Free space fell below `stop-writes-avail-pct`, or no block is free.
    #[error("device storage is full (stop-writes)")]
    OutOfSpace,
    /// Too many full write blocks wait for the device.
    #[error("device overloaded: the write queue is full")]
    Overloaded,
    /// The entry would not fit one write block.
    #[error("record larger than a write block")]
    TooBig,
    /// A device call failed; the storage accepts no more writes.
    #[error("device failure: {0}")]
    Failed(String),
    /// A record read back failed its checksum twice, or was not the record asked for.
    #[error("record unreadable: {0}")]
    Unreadable(String),
    /// The configuration does not fit the devices.
    #[error("{0}")]
    Config(String),
}

/// Statistics of one storage.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StorageStats {
    /// Bytes of every block.
    pub total_bytes: u64,
    /// Bytes of current entries.
    pub used_bytes: u64,
    /// Blocks holding nothing current.
    pub free_blocks: u64,
    /// Every block.
    pub total_blocks: u64,
    /// Full blocks waiting for the device.
    pub write_queue_blocks: u64,
    /// Blocks in use below `defrag-lwm-pct`, waiting for defragmentation.
    pub defrag_queue_blocks: u64,
    /// Bytes of entries clients wrote (records and tombstones).
    pub client_write_bytes: u64,
    /// Bytes of entries defragmentation copied, and truncate marks.
    pub internal_write_bytes: u64,
    /// Flushes (each ends with a sync).
    pub flushes: u64,
    /// Blocks defragmentation read.
    pub defrag_blocks_read: u64,
    /// Entries defragmentation copied.
    pub defrag_entries_copied: u64,
    /// Blocks defragmentation freed.
    pub blocks_freed: u64,
    /// Tombstones kept so that deleted records stay deleted.
    pub tombstones: u64,
    /// Tombstones let go because nothing older was left to shadow.
    pub tombstones_dropped: u64,
    /// Record reads served from memory (the block being filled, or the cache of recent blocks).
    pub reads_from_memory: u64,
    /// Record reads that went to the device.
    pub reads_from_device: u64,
    /// Record reads that failed their checksum.
    pub read_errors: u64,
    /// Every entry up to this seq is durable.
    pub durable_seq: u64,
    /// Why writes stopped, if a device call failed.
    pub failure: Option<String>,
}

impl StorageStats {
    /// Bytes written for every byte clients wrote (1.0 without defragmentation).
    pub fn write_amplification(&self) -> f64 {
        if self.client_write_bytes == 0 {
            return 1.0;
        }
        (self.client_write_bytes + self.internal_write_bytes) as f64
            / self.client_write_bytes as f64
    }

    /// Percentage of record reads served from memory (Aerospike's `cache_read_pct`).
    pub fn cache_read_pct(&self) -> u64 {
        (self.reads_from_memory * 100)
            .checked_div(self.reads_from_memory + self.reads_from_device)
            .unwrap_or(0)
    }

    /// Percentage of blocks free.
    pub fn available_pct(&self) -> u64 {
        (self.free_blocks * 100)
            .checked_div(self.total_blocks)
            .unwrap_or(0)
    }
}
