//! Settings of one namespace's device storage (the server maps its config file onto this).

use std::path::PathBuf;

/// Smallest write block: records must fit one, and the block header takes part of it.
pub const WRITE_BLOCK_SIZE_BYTES_MIN: u32 = 64 * 1024;
/// Largest write block (Aerospike's limit, 8 MiB).
pub const WRITE_BLOCK_SIZE_BYTES_MAX: u32 = 8 * 1024 * 1024;

/// How a namespace stores records on devices.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StorageConfig {
    /// Files (or block devices) holding the data; at least one.
    pub files: Vec<PathBuf>,
    /// Bytes each file holds.
    pub file_size_bytes: u64,
    /// Size of a write block, a power of two (records are appended into one, then it is flushed).
    pub write_block_size_bytes: u32,
    /// A partly filled write block is flushed after this long (the loss window without
    /// `commit_to_device`).
    pub flush_max_ms: u64,
    /// Acknowledge a write only once its block is durable (group commit).
    pub commit_to_device: bool,
    /// Blocks whose live data fell below this percentage are defragmented.
    pub defrag_lwm_pct: u8,
    /// Defragmentation runs only while fewer than this percentage of blocks are free: copying
    /// live records out early costs writes and CPU and buys nothing while space is plentiful.
    /// 100 defragments whenever a block falls below `defrag_lwm_pct`, as Aerospike does. It
    /// starts at least 10 points above `stop_writes_avail_pct` whatever this says
    /// ([`StorageConfig::defrag_start_pct`]).
    pub defrag_start_avail_pct: u8,
    /// Pause between two defragmented blocks, microseconds (bounds defragmentation's rate).
    pub defrag_sleep_us: u64,
    /// Most sealed write blocks waiting to be flushed; beyond it writes fail with
    /// DEVICE_OVERLOAD (Aerospike's `max-write-cache`, in blocks).
    pub write_queue_blocks_max: u32,
    /// Writes stop when fewer than this percentage of blocks are free (Aerospike's
    /// `stop-writes-avail-pct`).
    pub stop_writes_avail_pct: u8,
    /// Keep every record's data in memory too, so that reads never touch the device. When
    /// false, memory holds only the index and reads go to the device (Aerospike's
    /// `data-in-memory`).
    pub data_in_memory: bool,
    /// Written blocks kept in memory to serve reads of recent writes (Aerospike's
    /// `post-write-queue`).
    pub post_write_queue_blocks: u32,
}

/// Most blocks `post-write-queue` may keep (Aerospike's limit).
pub const POST_WRITE_QUEUE_BLOCKS_MAX: u32 = 4096;

impl StorageConfig {
    /// Aerospike's defaults for device storage on `files`, each `file_size_bytes` long.
    pub fn with_defaults(files: Vec<PathBuf>, file_size_bytes: u64) -> StorageConfig {
        StorageConfig {
            files,
            file_size_bytes,
            write_block_size_bytes: 1024 * 1024,
            flush_max_ms: 1000,
            commit_to_device: false,
            defrag_lwm_pct: 50,
            defrag_start_avail_pct: 50,
            defrag_sleep_us: 1000,
            write_queue_blocks_max: 64,
            stop_writes_avail_pct: 5,
            data_in_memory: false,
            post_write_queue_blocks: 64,
        }
    }

    /// The free percentage below which defragmentation runs: `defrag_start_avail_pct`, but
    /// at least 10 points above `stop_writes_avail_pct`, so that it always starts well before
    /// writes stop.
    pub fn defrag_start_pct(&self) -> u8 {
        self.defrag_start_avail_pct
            .max(self.stop_writes_avail_pct.saturating_add(10))
            .min(100)
    }

    /// Checks the settings a config file could get wrong.
    ///
    /// # Errors
    /// A sentence naming the bad setting and what would be accepted.
    pub fn validate(&self) -> Result<(), String> {
        if self.files.is_empty() {
            return Err("device storage needs at least one file".to_owned());
        }
        let block = self.write_block_size_bytes;
        if !block.is_power_of_two()
            || !(WRITE_BLOCK_SIZE_BYTES_MIN..=WRITE_BLOCK_SIZE_BYTES_MAX).contains(&block)
        {
            return Err(format!(
                "write-block-size must be a power of two from {WRITE_BLOCK_SIZE_BYTES_MIN} to \
                 {WRITE_BLOCK_SIZE_BYTES_MAX} bytes, not {block}"
            ));
        }
        let blocks_per_file = self.file_size_bytes / u64::from(block);
        if blocks_per_file < 4 {
            return Err(format!(
                "filesize must hold at least 4 write blocks ({} bytes), not {}",
                4 * u64::from(block),
                self.file_size_bytes
            ));
        }
        if !self.file_size_bytes.is_multiple_of(u64::from(block)) {
            return Err(format!(
                "filesize must be a multiple of write-block-size ({block} bytes)"
            ));
        }
        if self.defrag_lwm_pct > 99 {
            return Err("defrag-lwm-pct must be at most 99".to_owned());
        }
        if self.defrag_start_avail_pct > 100 {
            return Err("defrag-start-avail-pct must be at most 100".to_owned());
        }
        if self.stop_writes_avail_pct > 50 {
            return Err("stop-writes-avail-pct must be at most 50".to_owned());
        }
        if self.flush_max_ms == 0 {
            return Err("flush-max-ms must be positive".to_owned());
        }
        if self.post_write_queue_blocks > POST_WRITE_QUEUE_BLOCKS_MAX {
            return Err(format!(
                "post-write-queue must be at most {POST_WRITE_QUEUE_BLOCKS_MAX} blocks"
            ));
        }
        if self.write_queue_blocks_max == 0 {
            return Err("max-write-cache must hold at least one block".to_owned());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defragmentation_starts_well_above_stop_writes_whatever_the_setting() {
        let mut config = StorageConfig::with_defaults(vec!["d".into()], 1 << 30);
        assert_eq!(config.defrag_start_pct(), 50);
        config.stop_writes_avail_pct = 45;
        assert_eq!(config.defrag_start_pct(), 55);
        config.defrag_start_avail_pct = 100;
        assert_eq!(config.defrag_start_pct(), 100);
        config.stop_writes_avail_pct = 50;
        config.defrag_start_avail_pct = 0;
        assert_eq!(config.defrag_start_pct(), 60);
    }
}
