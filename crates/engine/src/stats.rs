//! Per-partition counters, summed into a namespace summary on demand.
//!
//! Counters live next to each partition rather than in one shared place, so concurrent
//! transactions on different partitions never write the same cache line.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counted events; the discriminant indexes [`Counters`].
#[derive(Clone, Copy, Debug)]
pub(crate) enum Counter {
    ReadSuccess,
    ReadNotFound,
    ReadError,
    ReadTimeout,
    WriteSuccess,
    WriteError,
    WriteTimeout,
    DeleteSuccess,
    DeleteNotFound,
    DeleteError,
    DeleteTimeout,
    BatchReadSuccess,
    BatchReadNotFound,
    BatchReadError,
    BatchReadTimeout,
    BatchWriteSuccess,
    BatchWriteError,
    BatchWriteTimeout,
    BatchDeleteSuccess,
    BatchDeleteNotFound,
    BatchDeleteError,
    BatchDeleteTimeout,
    ExpiredObjects,
    TruncatedObjects,
    EvictedObjects,
}

const COUNTER_COUNT: usize = Counter::EvictedObjects as usize + 1;

/// Who asked for a single-record transaction: it decides which statistics count it, as
/// Aerospike counts batch sub-transactions apart from single-record commands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// A single-record command from a client.
    Client,
    /// One row of a batch.
    Batch,
}

impl Origin {
    /// The counter for `outcome` (a client counter) as this origin counts it.
    pub(crate) fn counter(self, outcome: Counter) -> Counter {
        match (self, outcome) {
            (Origin::Client, outcome) => outcome,
            (Origin::Batch, Counter::ReadSuccess) => Counter::BatchReadSuccess,
            (Origin::Batch, Counter::ReadNotFound) => Counter::BatchReadNotFound,
            (Origin::Batch, Counter::ReadError) => Counter::BatchReadError,
            (Origin::Batch, Counter::ReadTimeout) => Counter::BatchReadTimeout,
            (Origin::Batch, Counter::WriteSuccess) => Counter::BatchWriteSuccess,
            (Origin::Batch, Counter::WriteError) => Counter::BatchWriteError,
            (Origin::Batch, Counter::WriteTimeout) => Counter::BatchWriteTimeout,
            (Origin::Batch, Counter::DeleteSuccess) => Counter::BatchDeleteSuccess,
            (Origin::Batch, Counter::DeleteNotFound) => Counter::BatchDeleteNotFound,
            (Origin::Batch, Counter::DeleteError) => Counter::BatchDeleteError,
            (Origin::Batch, Counter::DeleteTimeout) => Counter::BatchDeleteTimeout,
            (Origin::Batch, other) => other,
        }
    }
}

/// One partition's counters.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    values: [AtomicU64; COUNTER_COUNT],
}

impl Counters {
    pub(crate) fn add(&self, counter: Counter, amount: u64) {
        self.values[counter as usize].fetch_add(amount, Ordering::Relaxed);
    }

    pub(crate) fn get(&self, counter: Counter) -> u64 {
        self.values[counter as usize].load(Ordering::Relaxed)
    }
}

/// A namespace's statistics at one moment, for the info protocol.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NamespaceSummary {
    /// Records in the index, including expired or truncated ones not reclaimed yet.
    pub objects: u64,
    /// Bytes of key and bin data held by those records.
    pub data_used_bytes: u64,
    /// Estimated bytes of primary index entries.
    pub index_used_bytes: u64,
    /// Estimated bytes of set index entries.
    pub set_index_used_bytes: u64,
    /// Records reclaimed because they expired.
    pub expired_objects: u64,
    /// Records removed by truncate.
    pub truncated_objects: u64,
    /// Records evicted (soonest to expire first) above the eviction threshold.
    pub evicted_objects: u64,
    /// Scans that sent every requested record.
    pub scans_complete: u64,
    /// Scans stopped by an operator or a departed client.
    pub scans_aborted: u64,
    /// Scans stopped by an error.
    pub scans_failed: u64,
    /// Reads that found their record.
    pub client_read_success: u64,
    /// Reads of a missing or expired record.
    pub client_read_not_found: u64,
    /// Reads that failed for another reason.
    pub client_read_error: u64,
    /// Reads that passed their deadline (TIMEOUT), not counted as errors.
    pub client_read_timeout: u64,
    /// Writes (put, operate, touch) that succeeded.
    pub client_write_success: u64,
    /// Writes that failed, other than by timing out.
    pub client_write_error: u64,
    /// Writes that passed their deadline, changing nothing.
    pub client_write_timeout: u64,
    /// Deletes that removed a record.
    pub client_delete_success: u64,
    /// Deletes of a missing record.
    pub client_delete_not_found: u64,
    /// Deletes that failed for another reason.
    pub client_delete_error: u64,
    /// Deletes that passed their deadline before they started.
    pub client_delete_timeout: u64,
    /// Batch rows that read their record.
    pub batch_sub_read_success: u64,
    /// Batch rows that read a missing record.
    pub batch_sub_read_not_found: u64,
    /// Batch read rows that failed otherwise.
    pub batch_sub_read_error: u64,
    /// Batch read rows that passed their deadline.
    pub batch_sub_read_timeout: u64,
    /// Batch write rows that succeeded.
    pub batch_sub_write_success: u64,
    /// Batch write rows that failed, other than by timing out.
    pub batch_sub_write_error: u64,
    /// Batch write rows that passed their deadline.
    pub batch_sub_write_timeout: u64,
    /// Batch delete rows that removed a record.
    pub batch_sub_delete_success: u64,
    /// Batch delete rows of a missing record.
    pub batch_sub_delete_not_found: u64,
    /// Batch delete rows that failed otherwise.
    pub batch_sub_delete_error: u64,
    /// Batch delete rows that passed their deadline.
    pub batch_sub_delete_timeout: u64,
}

impl NamespaceSummary {
    pub(crate) fn add_counters(&mut self, counters: &Counters) {
        self.expired_objects += counters.get(Counter::ExpiredObjects);
        self.truncated_objects += counters.get(Counter::TruncatedObjects);
        self.evicted_objects += counters.get(Counter::EvictedObjects);
        self.client_read_success += counters.get(Counter::ReadSuccess);
        self.client_read_not_found += counters.get(Counter::ReadNotFound);
        self.client_read_error += counters.get(Counter::ReadError);
        self.client_read_timeout += counters.get(Counter::ReadTimeout);
        self.client_write_success += counters.get(Counter::WriteSuccess);
        self.client_write_error += counters.get(Counter::WriteError);
        self.client_write_timeout += counters.get(Counter::WriteTimeout);
        self.client_delete_success += counters.get(Counter::DeleteSuccess);
        self.client_delete_not_found += counters.get(Counter::DeleteNotFound);
        self.client_delete_error += counters.get(Counter::DeleteError);
        self.client_delete_timeout += counters.get(Counter::DeleteTimeout);
        self.batch_sub_read_success += counters.get(Counter::BatchReadSuccess);
        self.batch_sub_read_not_found += counters.get(Counter::BatchReadNotFound);
        self.batch_sub_read_error += counters.get(Counter::BatchReadError);
        self.batch_sub_read_timeout += counters.get(Counter::BatchReadTimeout);
        self.batch_sub_write_success += counters.get(Counter::BatchWriteSuccess);
        self.batch_sub_write_error += counters.get(Counter::BatchWriteError);
        self.batch_sub_write_timeout += counters.get(Counter::BatchWriteTimeout);
        self.batch_sub_delete_success += counters.get(Counter::BatchDeleteSuccess);
        self.batch_sub_delete_not_found += counters.get(Counter::BatchDeleteNotFound);
        self.batch_sub_delete_error += counters.get(Counter::BatchDeleteError);
        self.batch_sub_delete_timeout += counters.get(Counter::BatchDeleteTimeout);
    }
}
