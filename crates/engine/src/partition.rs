//! One partition: its slice of the primary index, its set indexes and its data size.
//!
//! Invariants:
//! - `data_used_bytes` is the sum of `data_size_bytes()` over the records in `index`.
//! - Every record added or removed goes through [`Partition::insert`], [`Partition::remove`] or
//!   [`Partition::remove_where`], which keep that sum, the per-set counts and the set indexes
//!   right; a native value changed in place reports its change of size through
//!   [`Partition::resized`].
//! - For every set id present in `set_indexes`, its digest set holds exactly the digests of
//!   the records of that set in `index` (visible or not yet reclaimed). A set id is present
//!   only once its index was built here, so a scan uses a set index only when it is complete.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

use index::PrimaryIndex;
use model::{Digest, VoidTime};
use parking_lot::RwLock;

use crate::clock::Now;
use crate::commit::PartitionRole;
use crate::record::{Record, SetId};
use crate::sets::SetRegistry;
use crate::sindex::PartitionEntries;
use crate::stats::Counters;

/// A partition's lock-protected state and its lock-free counters.
#[derive(Debug, Default)]
pub(crate) struct PartitionSlot {
    pub(crate) state: RwLock<Partition>,
    pub(crate) counters: Counters,
}

/// Which records exist for clients at one moment: not expired, not truncated.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Visibility<'a> {
    pub(crate) now: Now,
    /// Records last updated before this (Unix ms) were truncated with the whole namespace.
    pub(crate) namespace_truncate_before_ms: u64,
    pub(crate) sets: &'a SetRegistry,
}

impl Visibility<'_> {
    pub(crate) fn shows(&self, record: &Record) -> bool {
        self.shows_meta(record.void_time, record.last_update_ms, record.set_id)
    }

    /// [`Visibility::shows`] from a record's void time, last update and set alone.
    pub(crate) fn shows_meta(
        &self,
        void_time: VoidTime,
        last_update_ms: u64,
        set_id: SetId,
    ) -> bool {
        !void_time.is_expired_at(self.now.epoch_seconds())
            && last_update_ms >= self.truncate_before_ms(set_id)
    }

    pub(crate) fn truncated(&self, record: &Record) -> bool {
        record.last_update_ms < self.truncate_before_ms(record.set_id)
    }

    /// Records of `set_id` last updated before this (Unix ms) are truncated.
    fn truncate_before_ms(&self, set_id: SetId) -> u64 {
        self.namespace_truncate_before_ms
            .max(self.sets.truncate_before_ms(set_id))
    }
}

/// The records of one partition.
#[derive(Debug, Default)]
pub(crate) struct Partition {
    index: PrimaryIndex<Record>,
    data_used_bytes: u64,
    set_indexes: BTreeMap<SetId, BTreeSet<Digest>>,
    /// Records held here per set, by set id (0: no set); grows to the highest id seen.
    set_objects: Vec<u64>,
    /// Secondary index entries of this partition's records (see `sindex.rs`).
    pub(crate) index_entries: PartitionEntries,
    /// What this node is for the partition (see `commit.rs`).
    pub(crate) role: PartitionRole,
    /// The partition's version, as the cluster last assigned it.
    pub(crate) version: u64,
    /// The oldest version a replicated change may carry: the version at which the current
    /// master became master. Changes of a deposed master carry older ones.
    pub(crate) fence_version: u64,
    /// While filling, the records the master replicated since this node last began the fill
    /// (`begin_fill`): the snapshot's older copies of them are ignored.
    pub(crate) replicated_during_fill: BTreeSet<Digest>,
}

/// Where a piece of a partition walk ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PieceEnd {
    /// The last digest the walk finished with; resume strictly after it.
    pub last: Option<Digest>,
    /// Whether the walk reached the end of the partition.
    pub exhausted: bool,
}

/// How a walk reaches the records of a set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Walk {
    /// Every record of the partition, skipping other sets.
    Partition,
    /// The set index, looking each digest up in the primary index.
    SetIndex,
}

/// How many in-order steps through the primary index cost as much as reaching one record
/// through the set index (a digest lookup that misses cache on each tree level). The set index
/// is used when the set holds at most 1/this of the partition. Measured on 2M records of 100
/// bytes (4096 partitions, sets of 1/2 down to 1/1024 of the records): reaching a record by the
/// set index cost 5 to 7 times a step of the walk, so the two break even near a 1/6 share; at
/// 1/8 the index took 162 ms against 204 ms for the walk, at 1/4 it took 268 ms against 225 ms.
/// 8 keeps the choice on the safe side of the break-even, so an indexed scan is never slower.
pub(crate) const LOOKUP_COST_IN_STEPS: usize = 8;

impl Partition {
    /// The record for `digest` if clients can see it.
    pub(crate) fn live(&self, digest: &Digest, visibility: &Visibility<'_>) -> Option<&Record> {
        self.index
            .get(digest)
            .filter(|record| visibility.shows(record))
    }

    /// The record for `digest` if clients can see it, to change in place.
    pub(crate) fn live_mut(
        &mut self,
        digest: &Digest,
        visibility: &Visibility<'_>,
    ) -> Option<&mut Record> {
        self.index
            .get_mut(digest)
            .filter(|record| visibility.shows(record))
    }

    /// Every record, visible or not, in digest order strictly after `after`.
    pub(crate) fn records_after(
        &self,
        after: Option<&Digest>,
    ) -> impl Iterator<Item = (&Digest, &Record)> {
        self.index.iter_after(after)
    }

    /// Every record, visible or not, in digest order.
    pub(crate) fn all_records(&self) -> impl Iterator<Item = (&Digest, &Record)> {
        self.index.iter_after(None)
    }

    /// The record for `digest`, visible or not (expired and truncated records not yet
    /// reclaimed included).
    pub(crate) fn any_record(&self, digest: &Digest) -> Option<&Record> {
        self.index.get(digest)
    }

    /// [`Partition::any_record`], to change in place.
    pub(crate) fn any_record_mut(&mut self, digest: &Digest) -> Option<&mut Record> {
        self.index.get_mut(digest)
    }

    /// Accounts for a record of `set_id` whose native value changed size in place.
    pub(crate) fn resized(
        &mut self,
        set_id: SetId,
        before_bytes: usize,
        after_bytes: usize,
        sets: &SetRegistry,
    ) {
        let (before, after) = (before_bytes as u64, after_bytes as u64);
        assert!(
            self.data_used_bytes >= before,
            "data size accounting underflow"
        );
        self.data_used_bytes = self.data_used_bytes - before + after;
        sets.record_resized(set_id, before, after);
    }

    /// Stores `record`, replacing whatever was there; returns the replaced record.
    pub(crate) fn insert(
        &mut self,
        digest: Digest,
        record: Record,
        sets: &SetRegistry,
    ) -> Option<Record> {
        let size_bytes = record.data_size_bytes() as u64;
        let set_id = record.set_id;
        self.data_used_bytes += size_bytes;
        sets.record_added(set_id, size_bytes);
        self.count_set_object(set_id, true);
        let replaced = self.index.insert(digest, record);
        if let Some(old) = &replaced {
            self.forget(&digest, old, sets);
        }
        if let Some(members) = self.set_indexes.get_mut(&set_id) {
            members.insert(digest);
        }
        replaced
    }

    /// Removes the record for `digest`.
    pub(crate) fn remove(&mut self, digest: &Digest, sets: &SetRegistry) -> Option<Record> {
        let removed = self.index.remove(digest);
        if let Some(old) = &removed {
            self.forget(digest, old, sets);
        }
        removed
    }

    /// Calls `visit` with the void time of every record.
    pub(crate) fn each_void_time(&self, mut visit: impl FnMut(model::VoidTime)) {
        for (_, record) in self.index.iter_after(None) {
            visit(record.void_time);
        }
    }

    /// Whether any record satisfies `doomed` (checked under a read lock before removing).
    pub(crate) fn any(&self, doomed: impl Fn(&Record) -> bool) -> bool {
        self.index
            .iter_after(None)
            .any(|(_, record)| doomed(record))
    }

    /// Removes every record for which `doomed` holds, telling `removed` of each; returns how
    /// many.
    pub(crate) fn remove_where(
        &mut self,
        doomed: impl Fn(&Digest, &Record) -> bool,
        sets: &SetRegistry,
        mut removed: impl FnMut(&Digest, &Record),
    ) -> u64 {
        let mut removed_count = 0;
        let mut removed_bytes = 0;
        let set_indexes = &mut self.set_indexes;
        let set_objects = &mut self.set_objects;
        self.index.retain(|digest, record| {
            if !doomed(digest, record) {
                return true;
            }
            removed(digest, record);
            let size_bytes = record.data_size_bytes() as u64;
            removed_count += 1;
            removed_bytes += size_bytes;
            sets.record_removed(record.set_id, size_bytes);
            count_in(set_objects, record.set_id, false);
            if let Some(members) = set_indexes.get_mut(&record.set_id) {
                members.remove(digest);
            }
            false
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

    /// Entries held by this partition's set indexes.
    pub(crate) fn set_index_entries(&self) -> u64 {
        self.set_indexes.values().map(|m| m.len() as u64).sum()
    }

    /// Builds the set index of `set_id` from the records here, unless it exists.
    pub(crate) fn build_set_index(&mut self, set_id: SetId) {
        if self.set_indexes.contains_key(&set_id) {
            return;
        }
        let members = self
            .index
            .iter_after(None)
            .filter(|(_, record)| record.set_id == set_id)
            .map(|(digest, _)| *digest)
            .collect();
        self.set_indexes.insert(set_id, members);
    }

    pub(crate) fn drop_set_index(&mut self, set_id: SetId) {
        self.set_indexes.remove(&set_id);
    }

    /// The cheaper way to reach the records of `set_id` here. Both walks visit the same
    /// records in the same digest order, so a scan may switch between them at any piece.
    pub(crate) fn walk_for(&self, set_id: SetId) -> Walk {
        match self.set_indexes.get(&set_id) {
            Some(members) if members.len() * LOOKUP_COST_IN_STEPS <= self.index.len() => {
                Walk::SetIndex
            }
            _ => Walk::Partition,
        }
    }

    /// Visits records strictly after `after` in digest order: all of them (`set` `None`) or
    /// those of one set, examining at most `examine_max` entries. `visit` gets each record
    /// clients can see and returns false to stop before taking it.
    pub(crate) fn walk_piece(
        &self,
        set: Option<SetId>,
        after: Option<&Digest>,
        examine_max: usize,
        visibility: &Visibility<'_>,
        mut visit: impl FnMut(&Digest, &Record) -> bool,
    ) -> PieceEnd {
        assert!(examine_max > 0, "a piece examines at least one entry");
        let walk = set.map_or(Walk::Partition, |set_id| self.walk_for(set_id));
        let entries: Box<dyn Iterator<Item = (&Digest, &Record)> + '_> = match (walk, set) {
            (Walk::SetIndex, Some(set_id)) => {
                let lower = after.map_or(Bound::Unbounded, |d| Bound::Excluded(*d));
                let members = &self.set_indexes[&set_id];
                Box::new(
                    members
                        .range((lower, Bound::Unbounded))
                        .filter_map(|digest| self.index.get(digest).map(|r| (digest, r))),
                )
            }
            _ => Box::new(self.index.iter_after(after)),
        };
        let mut end = PieceEnd {
            last: after.copied(),
            exhausted: false,
        };
        for (examined, (digest, record)) in entries.enumerate() {
            if examined == examine_max {
                return end;
            }
            let wanted = set.is_none_or(|set_id| record.set_id == set_id);
            if wanted && visibility.shows(record) && !visit(digest, record) {
                return end;
            }
            end.last = Some(*digest);
        }
        end.exhausted = true;
        end
    }

    fn forget(&mut self, digest: &Digest, old: &Record, sets: &SetRegistry) {
        let size = old.data_size_bytes() as u64;
        assert!(
            self.data_used_bytes >= size,
            "data size accounting underflow"
        );
        self.data_used_bytes -= size;
        sets.record_removed(old.set_id, size);
        self.count_set_object(old.set_id, false);
        if let Some(members) = self.set_indexes.get_mut(&old.set_id) {
            members.remove(digest);
        }
    }

    fn count_set_object(&mut self, set_id: SetId, added: bool) {
        count_in(&mut self.set_objects, set_id, added);
    }

    /// Records of set `set_id` held here.
    pub(crate) fn set_object_count(&self, set_id: SetId) -> u64 {
        self.set_objects
            .get(usize::from(set_id))
            .copied()
            .unwrap_or(0)
    }
}

/// Counts one record of `set_id` in or out of `set_objects`.
fn count_in(set_objects: &mut Vec<u64>, set_id: SetId, added: bool) {
    let slot = usize::from(set_id);
    if set_objects.len() <= slot {
        set_objects.resize(slot + 1, 0);
    }
    if added {
        set_objects[slot] += 1;
    } else {
        assert!(set_objects[slot] > 0, "set object count underflow");
        set_objects[slot] -= 1;
    }
}
