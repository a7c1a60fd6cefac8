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
    WriteSuccess,
    WriteError,
    DeleteSuccess,
    DeleteNotFound,
    DeleteError,
    ExpiredObjects,
}

const COUNTER_COUNT: usize = Counter::ExpiredObjects as usize + 1;

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
    /// Records in the index, including expired ones the sweeper has not reclaimed yet.
    pub objects: u64,
    /// Bytes of key and bin data held by those records.
    pub data_used_bytes: u64,
    /// Records reclaimed because they expired.
    pub expired_objects: u64,
    /// Reads that found their record.
    pub client_read_success: u64,
    /// Reads of a missing or expired record.
    pub client_read_not_found: u64,
    /// Reads that failed for another reason.
    pub client_read_error: u64,
    /// Writes (put, operate, touch) that succeeded.
    pub client_write_success: u64,
    /// Writes that failed.
    pub client_write_error: u64,
    /// Deletes that removed a record.
    pub client_delete_success: u64,
    /// Deletes of a missing record.
    pub client_delete_not_found: u64,
    /// Deletes that failed for another reason.
    pub client_delete_error: u64,
}

impl NamespaceSummary {
    pub(crate) fn add_counters(&mut self, counters: &Counters) {
        self.expired_objects += counters.get(Counter::ExpiredObjects);
        self.client_read_success += counters.get(Counter::ReadSuccess);
        self.client_read_not_found += counters.get(Counter::ReadNotFound);
        self.client_read_error += counters.get(Counter::ReadError);
        self.client_write_success += counters.get(Counter::WriteSuccess);
        self.client_write_error += counters.get(Counter::WriteError);
        self.client_delete_success += counters.get(Counter::DeleteSuccess);
        self.client_delete_not_found += counters.get(Counter::DeleteNotFound);
        self.client_delete_error += counters.get(Counter::DeleteError);
    }
}
