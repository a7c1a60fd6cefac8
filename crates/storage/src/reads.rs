//! Reading one record back, for namespaces that keep record data on the device only: from the
//! block being filled, from the cache of recently sealed blocks, or from the device.
//!
//! The cache holds every sealed block until its bytes are written (the device does not have
//! them before), then the last `post-write-queue` written ones, which recent writes make the
//! likeliest to be read. A block reopened for a new use leaves the cache first.
//!
//! Invariants:
//! - A sealed block is in the cache until the flusher wrote it: a read never goes to the
//!   device for bytes that are not there yet.
//! - `written` lists each cached, written block once, oldest first; only those are evicted.
//! - Nothing that fails its checksum, or names another digest, is returned.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use parking_lot::RwLock;

use crate::StorageError;
use crate::format::{self, DigestBytes, Entry, EntryKind, Location};
use crate::store::{Shared, Storage};

/// Blocks sealed lately, shared with the flusher.
#[derive(Debug)]
pub(crate) struct RecentBlocks {
    written_max: usize,
    inner: RwLock<Recent>,
}

#[derive(Debug, Default)]
struct Recent {
    by_block: HashMap<u32, Arc<Vec<u8>>>,
    written: VecDeque<u32>,
}

impl RecentBlocks {
    /// A cache keeping up to `written_max` blocks once they are on the device.
    pub(crate) fn new(written_max: usize) -> RecentBlocks {
        RecentBlocks {
            written_max,
            inner: RwLock::new(Recent::default()),
        }
    }

    /// `block` was sealed with these bytes.
    pub(crate) fn sealed(&self, block: u32, bytes: Arc<Vec<u8>>) {
        self.inner.write().by_block.insert(block, bytes);
    }

    /// `block`'s bytes are on the device: it may be evicted from now on.
    pub(crate) fn written(&self, block: u32) {
        let mut recent = self.inner.write();
        if !recent.by_block.contains_key(&block) {
            return;
        }
        recent.written.push_back(block);
        while recent.written.len() > self.written_max {
            let oldest = recent.written.pop_front().expect("longer than the limit");
            recent.by_block.remove(&oldest);
        }
    }

    /// `block` is reopened: its previous use is nobody's any more.
    pub(crate) fn forget(&self, block: u32) {
        let mut recent = self.inner.write();
        if recent.by_block.remove(&block).is_some() {
            recent.written.retain(|&b| b != block);
        }
    }

    fn get(&self, block: u32) -> Option<Arc<Vec<u8>>> {
        self.inner.read().by_block.get(&block).cloned()
    }
}

impl Storage {
    /// The body of the record entry at `location` (a [`crate::RecordBody`] encoding), which
    /// the index has for `digest`. Called under the record's partition lock.
    ///
    /// # Errors
    /// Unreadable when the entry fails its checksum twice or is not that digest's record;
    /// Failed when the device cannot be read.
    pub fn read_record(
        &self,
        digest: &DigestBytes,
        location: Location,
    ) -> Result<Vec<u8>, StorageError> {
        let shared = &self.shared;
        if let Some(found) = shared.read_from_memory(digest, location) {
            shared
                .counters
                .reads_from_memory
                .fetch_add(1, Ordering::Relaxed);
            return found;
        }
        shared
            .counters
            .reads_from_device
            .fetch_add(1, Ordering::Relaxed);
        let use_seq = shared.blocks.use_seq(location.block());
        let (device, offset) = shared.address(location.block(), location.offset_bytes());
        let mut bytes = vec![0; location.len_bytes()];
        // A second read tells a bad transfer from bad data on the device.
        for _ in 0..2 {
            device.read_at(offset, &mut bytes).map_err(|e| {
                StorageError::Failed(format!("read of {} at {offset}: {e}", device.name()))
            })?;
            if let Some(body) = record_body(location, use_seq, digest, &bytes) {
                return Ok(body.to_vec());
            }
        }
        Err(shared.unreadable(location))
    }
}

impl Shared {
    /// The entry at `location` if its block is still in memory (being filled, or cached).
    fn read_from_memory(
        &self,
        digest: &DigestBytes,
        location: Location,
    ) -> Option<Result<Vec<u8>, StorageError>> {
        let block = location.block();
        let range = location.offset_bytes()..location.offset_bytes() + location.len_bytes();
        let writer = self.writer.lock();
        if let Some(open) = writer.current.as_ref().filter(|open| open.block == block) {
            let found = open
                .buf
                .get(range)
                .and_then(|bytes| record_body(location, open.use_seq, digest, bytes))
                .map(<[u8]>::to_vec);
            return Some(found.ok_or_else(|| self.unreadable(location)));
        }
        drop(writer);
        let cached = self.recent.get(block)?;
        let use_seq = self.blocks.use_seq(block);
        let found = cached
            .get(range)
            .and_then(|bytes| record_body(location, use_seq, digest, bytes))
            .map(<[u8]>::to_vec);
        Some(found.ok_or_else(|| self.unreadable(location)))
    }

    fn unreadable(&self, location: Location) -> StorageError {
        self.counters.read_errors.fetch_add(1, Ordering::Relaxed);
        tracing::error!(?location, "a record read back failed its checksum");
        StorageError::Unreadable(format!(
            "the record at block {} offset {} failed its checksum",
            location.block(),
            location.offset_bytes()
        ))
    }
}

/// The body of `bytes` if they hold a valid record entry for `digest` at `location`.
fn record_body<'b>(
    location: Location,
    use_seq: u64,
    digest: &DigestBytes,
    bytes: &'b [u8],
) -> Option<&'b [u8]> {
    let entry: Entry<'b> = format::decode_entry_at(location, use_seq, bytes)?;
    (entry.kind == EntryKind::Record && entry.digest == *digest).then_some(entry.body)
}
