//! One partition: its slice of the primary index and its data size.
//!
//! Invariants:
//! - `data_used_bytes` is the sum of `data_size_bytes()` over the records in `index`.
//! - Every record added or removed goes through [`Partition::insert`] or
//!   [`Partition::remove`], which keep that sum and the per-set counts right.

use index::PrimaryIndex;
use model::Digest;
use parking_lot::RwLock;

use crate::clock::Now;
use crate::record::Record;
use crate::sets::SetRegistry;
use crate::stats::Counters;

/// A partition's lock-protected state and its lock-free counters.
#[derive(Debug, Default)]
pub(crate) struct PartitionSlot {
    pub(crate) state: RwLock<Partition>,
    pub(crate) counters: Counters,
}

/// The records of one partition.
#[derive(Debug, Default)]
pub(crate) struct Partition {
    index: PrimaryIndex<Record>,
    data_used_bytes: u64,
}

impl Partition {
    /// The record for `digest` if it exists and has not expired at `now`.
    pub(crate) fn live(&self, digest: &Digest, now: Now) -> Option<&Record> {
        self.index
            .get(digest)
            .filter(|record| !record.void_time.is_expired_at(now.epoch_seconds()))
    }

    /// Stores `record`, replacing whatever was there; returns the replaced record.
    pub(crate) fn insert(
        &mut self,
        digest: Digest,
        record: Record,
        sets: &SetRegistry,
    ) -> Option<Record> {
        self.data_used_bytes += record.data_size_bytes() as u64;
        sets.record_added(record.set_id);
        let replaced = self.index.insert(digest, record);
        if let Some(old) = &replaced {
            self.forget(old, sets);
        }
        replaced
    }

    /// Removes the record for `digest`.
    pub(crate) fn remove(&mut self, digest: &Digest, sets: &SetRegistry) -> Option<Record> {
        let removed = self.index.remove(digest);
        if let Some(old) = &removed {
            self.forget(old, sets);
        }
        removed
    }

    /// Whether any record is expired at `now` (checked under a read lock before sweeping).
    pub(crate) fn has_expired(&self, now: Now) -> bool {
        let now_seconds = now.epoch_seconds();
        self.index
            .iter_after(None)
            .any(|(_, r)| r.void_time.is_expired_at(now_seconds))
    }

    /// Removes every record expired at `now`; returns how many.
    pub(crate) fn remove_expired(&mut self, now: Now, sets: &SetRegistry) -> u64 {
        let now_seconds = now.epoch_seconds();
        let mut removed_count = 0;
        let mut removed_bytes = 0;
        self.index.retain(|_, record| {
            let keep = !record.void_time.is_expired_at(now_seconds);
            if !keep {
                removed_count += 1;
                removed_bytes += record.data_size_bytes() as u64;
                sets.record_removed(record.set_id);
            }
            keep
        });
        self.data_used_bytes -= removed_bytes;
        removed_count
    }

    pub(crate) fn object_count(&self) -> u64 {
        self.index.len() as u64
    }

    pub(crate) fn data_used_bytes(&self) -> u64 {
        self.data_used_bytes
    }

    fn forget(&mut self, old: &Record, sets: &SetRegistry) {
        let size = old.data_size_bytes() as u64;
        assert!(
            self.data_used_bytes >= size,
            "data size accounting underflow"
        );
        self.data_used_bytes -= size;
        sets.record_removed(old.set_id);
    }
}
