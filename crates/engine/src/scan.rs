//! Scans: walking a partition's records in digest order, a piece at a time.
//!
//! A scan never holds a partition's lock for long: each piece examines a bounded number of
//! entries under the read lock, then the caller resumes strictly after the last digest the
//! piece finished with. Records present for the whole scan are therefore visited exactly once;
//! records written or deleted meanwhile may or may not be. The caller encodes each record while
//! the piece holds the lock, so nothing is copied.

use std::sync::atomic::{AtomicU64, Ordering};

use model::{Digest, Generation, PartitionId, VoidTime};

use crate::clock::Now;
use crate::exp::Expression;
use crate::filter::StoredView;
use crate::namespace::Namespace;
use crate::partition::{LOOKUP_COST_IN_STEPS, PieceEnd, Walk};
use crate::record::{Bins, Record, SetId};

/// Which records a scan wants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScanScope {
    /// Every record of the namespace.
    Namespace,
    /// The records of one set.
    Set(SetId),
    /// A set that does not exist: no records.
    NoSuchSet,
}

/// One record as a scan sees it, borrowed while the partition is locked.
#[derive(Clone, Copy, Debug)]
pub struct ScannedRecord<'a> {
    /// Its digest.
    pub digest: &'a Digest,
    /// Its generation.
    pub generation: Generation,
    /// When it expires.
    pub void_time: VoidTime,
    /// Its set's name, if it has a set.
    pub set_name: Option<&'a [u8]>,
    record: &'a Record,
    /// When the scan looked, in milliseconds since the Unix epoch (what a filter calls now).
    now_ms: u64,
}

impl<'a> ScannedRecord<'a> {
    pub(crate) fn new(
        digest: &'a Digest,
        record: &'a Record,
        set_name: Option<&'a [u8]>,
        now: Now,
    ) -> ScannedRecord<'a> {
        ScannedRecord {
            digest,
            generation: record.generation,
            void_time: record.void_time,
            set_name,
            record,
            now_ms: now.unix_ms,
        }
    }

    /// Whether the record passes `filter` (one it cannot be evaluated on does not).
    pub fn passes(&self, filter: &Expression) -> bool {
        let view = StoredView {
            record: self.record,
            bins: self.record.bins(),
            digest: self.digest,
            set_name: self.set_name.unwrap_or_default(),
            now: Now {
                unix_ms: self.now_ms,
            },
        };
        filter.matches(&view).unwrap_or(false)
    }

    /// The stored user key as (particle type, bytes), if any.
    pub fn user_key(&self) -> Option<(u8, &'a [u8])> {
        self.record.user_key()
    }

    /// The record as a view sees it, its native value included (what a reader of the whole
    /// value, such as a Redis RDB writer, needs without rendering bins).
    pub fn current(&self) -> crate::Current<'a> {
        crate::Current::of(self.record)
    }

    /// Its bins in stored order.
    pub fn bins(&self) -> Bins<'a> {
        self.record.bins()
    }

    /// Its last write, in milliseconds since the Unix epoch.
    pub fn last_update_ms(&self) -> u64 {
        self.record.last_update_ms
    }

    /// The size of its data (key and bins) in bytes.
    pub fn size_bytes(&self) -> usize {
        self.record.data_size_bytes()
    }

    /// When the scan looked, in milliseconds since the Unix epoch.
    pub fn now_ms(&self) -> u64 {
        self.now_ms
    }
}

/// How a scan ended, for the namespace's scan statistics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScanOutcome {
    /// Every requested record was sent.
    Complete,
    /// Stopped by an operator or because the client went away.
    Aborted,
    /// Stopped by an error.
    Failed,
}

/// Scan counters of a namespace.
#[derive(Debug, Default)]
pub(crate) struct ScanCounters {
    complete: AtomicU64,
    aborted: AtomicU64,
    failed: AtomicU64,
}

impl ScanCounters {
    pub(crate) fn count(&self, outcome: ScanOutcome) {
        let counter = match outcome {
            ScanOutcome::Complete => &self.complete,
            ScanOutcome::Aborted => &self.aborted,
            ScanOutcome::Failed => &self.failed,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// (complete, aborted, failed)
    pub(crate) fn get(&self) -> (u64, u64, u64) {
        (
            self.complete.load(Ordering::Relaxed),
            self.aborted.load(Ordering::Relaxed),
            self.failed.load(Ordering::Relaxed),
        )
    }
}

impl Namespace {
    /// The scope of a scan naming `set_name` (empty = the whole namespace).
    pub fn scan_scope(&self, set_name: &[u8]) -> ScanScope {
        if set_name.is_empty() {
            return ScanScope::Namespace;
        }
        self.sets
            .id_of(set_name)
            .map_or(ScanScope::NoSuchSet, ScanScope::Set)
    }

    /// Visits the visible records of `scope` in `partition` strictly after `after`, in digest
    /// order, examining at most `examine_max` index entries under the partition's read lock.
    /// `visit` returns false to stop before taking a record (that record is then where the
    /// next piece starts).
    pub fn scan_piece(
        &self,
        partition: PartitionId,
        scope: ScanScope,
        after: Option<&Digest>,
        examine_max: usize,
        mut visit: impl FnMut(&ScannedRecord<'_>) -> bool,
    ) -> PieceEnd {
        let set = match scope {
            ScanScope::Namespace => None,
            ScanScope::Set(set_id) => Some(set_id),
            ScanScope::NoSuchSet => {
                return PieceEnd {
                    last: after.copied(),
                    exhausted: true,
                };
            }
        };
        let _gate = self.gate.shared();
        let now = self.clock.now();
        let visibility = self.visibility(now);
        let guard = self.partitions[partition.index()].state.read();
        guard.walk_piece(set, after, examine_max, &visibility, |digest, record| {
            // A record whose data cannot be read back (logged and counted by the storage) is
            // left out rather than ending the scan.
            let Ok(record) = self.load(digest, record) else {
                return true;
            };
            visit(&ScannedRecord::new(
                digest,
                &record,
                self.sets.name_of(record.set_id),
                now,
            ))
        })
    }

    /// How many records a scan of `scope` will reach through the set index, when the set's
    /// index is built everywhere and the set is small enough for every partition to prefer it;
    /// `None` when the scan may walk whole partitions. Cheap (atomic counters, no locks), so a
    /// caller can size a scan before starting it.
    pub fn set_index_scan_size(&self, scope: ScanScope) -> Option<u64> {
        let ScanScope::Set(set_id) = scope else {
            return None;
        };
        let sets = self.sets.summaries();
        let set = sets.get(usize::from(set_id).checked_sub(1)?)?;
        if !set.index_enabled || set.index_populating {
            return None;
        }
        // Records without a set are not counted here, so this errs towards "walks".
        let all_sets_objects: u64 = sets.iter().map(|s| s.objects).sum();
        (set.objects * LOOKUP_COST_IN_STEPS as u64 <= all_sets_objects).then_some(set.objects)
    }

    /// Whether a scan of `scope` in `partition` would use the set index now.
    pub fn scan_uses_set_index(&self, partition: PartitionId, scope: ScanScope) -> bool {
        match scope {
            ScanScope::Set(set_id) => {
                let guard = self.partitions[partition.index()].state.read();
                guard.walk_for(set_id) == Walk::SetIndex
            }
            ScanScope::Namespace | ScanScope::NoSuchSet => false,
        }
    }

    /// Counts a finished scan.
    pub fn count_scan(&self, outcome: ScanOutcome) {
        self.scan_counters.count(outcome);
    }
}
