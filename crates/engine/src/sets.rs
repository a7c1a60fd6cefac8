//! The sets of a namespace: name to id, and how many records each holds.
//!
//! Invariants:
//! - Set ids run 1..=`SETS_PER_NAMESPACE_MAX`, are assigned once and never reused; 0 means
//!   "no set".
//! - Lookups take no lock: a slot's name is published (`OnceLock`) before the count that makes
//!   it visible is raised (release/acquire). Only creating a set takes `create_lock`.
//! - `truncate_before_ms` only grows: a truncate cut-off older than an earlier one is ignored.
//! - `index_enabled` says whether the set should have a set index; which partitions have
//!   actually built theirs is the partitions' business (see `partition.rs`).

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use model::{ResultCode, SET_NAME_BYTES_MAX, SETS_PER_NAMESPACE_MAX};
use parking_lot::Mutex;

use crate::record::SetId;

/// A set's name and size, for info commands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetSummary {
    /// The set name.
    pub name: String,
    /// Records in it (expired or truncated ones leave when they are reclaimed).
    pub objects: u64,
    /// Bytes of key and bin data of those records.
    pub data_used_bytes: u64,
    /// Records older than this (Unix ms) were truncated; 0 = never truncated.
    pub truncate_before_ms: u64,
    /// Whether the set has (or is building) a set index.
    pub index_enabled: bool,
    /// Whether the set index is still being built for existing records.
    pub index_populating: bool,
}

#[derive(Debug, Default)]
struct SetSlot {
    name: OnceLock<Box<[u8]>>,
    objects: AtomicU64,
    data_used_bytes: AtomicU64,
    truncate_before_ms: AtomicU64,
    index_enabled: AtomicBool,
    /// Builds of the index still running (an enable during a build starts another).
    index_builds_running: AtomicU64,
}

/// Registry of the sets of one namespace.
#[derive(Debug)]
pub(crate) struct SetRegistry {
    slots: Box<[SetSlot]>,
    count: AtomicUsize,
    create_lock: Mutex<()>,
}

impl SetRegistry {
    pub(crate) fn new() -> SetRegistry {
        let slots = (0..SETS_PER_NAMESPACE_MAX)
            .map(|_| SetSlot::default())
            .collect();
        SetRegistry {
            slots,
            count: AtomicUsize::new(0),
            create_lock: Mutex::new(()),
        }
    }

    /// The id of `name`, creating the set if needed; an empty name is "no set" (id 0).
    ///
    /// # Errors
    /// PARAMETER when the name is too long or the namespace already has the most sets allowed,
    /// as Aerospike's `set_set_from_msg` fails.
    pub(crate) fn id_or_create(&self, name: &[u8]) -> Result<SetId, ResultCode> {
        if name.is_empty() {
            return Ok(0);
        }
        if name.len() > SET_NAME_BYTES_MAX {
            return Err(ResultCode::Parameter);
        }
        if let Some(id) = self.id_of(name) {
            return Ok(id);
        }
        let _guard = self.create_lock.lock();
        if let Some(id) = self.id_of(name) {
            return Ok(id);
        }
        let count = self.count.load(Ordering::Acquire);
        if count == SETS_PER_NAMESPACE_MAX {
            return Err(ResultCode::Parameter);
        }
        let published = self.slots[count].name.set(name.into());
        assert!(
            published.is_ok(),
            "slot {count} is filled only under create_lock"
        );
        self.count.store(count + 1, Ordering::Release);
        Ok(set_id_of_slot(count))
    }

    /// The id of an existing set.
    pub(crate) fn id_of(&self, name: &[u8]) -> Option<SetId> {
        let count = self.count.load(Ordering::Acquire);
        self.slots[..count]
            .iter()
            .position(|slot| {
                slot.name
                    .get()
                    .is_some_and(|slot_name| **slot_name == *name)
            })
            .map(set_id_of_slot)
    }

    /// The name of set `set_id`, or `None` for 0 ("no set") and ids never handed out.
    pub(crate) fn name_of(&self, set_id: SetId) -> Option<&[u8]> {
        self.slot(set_id)
            .and_then(|slot| slot.name.get())
            .map(|name| &**name)
    }

    pub(crate) fn record_added(&self, set_id: SetId, size_bytes: u64) {
        if let Some(slot) = self.slot(set_id) {
            slot.objects.fetch_add(1, Ordering::Relaxed);
            slot.data_used_bytes
                .fetch_add(size_bytes, Ordering::Relaxed);
        }
    }

    pub(crate) fn record_removed(&self, set_id: SetId, size_bytes: u64) {
        if let Some(slot) = self.slot(set_id) {
            slot.objects.fetch_sub(1, Ordering::Relaxed);
            slot.data_used_bytes
                .fetch_sub(size_bytes, Ordering::Relaxed);
        }
    }

    /// A record of `set_id` changed size in place.
    pub(crate) fn record_resized(&self, set_id: SetId, before_bytes: u64, after_bytes: u64) {
        if let Some(slot) = self.slot(set_id) {
            slot.data_used_bytes
                .fetch_add(after_bytes, Ordering::Relaxed);
            slot.data_used_bytes
                .fetch_sub(before_bytes, Ordering::Relaxed);
        }
    }

    /// Records of `set_id` last updated before this (Unix ms) are truncated; 0 if none.
    pub(crate) fn truncate_before_ms(&self, set_id: SetId) -> u64 {
        self.slot(set_id)
            .map_or(0, |slot| slot.truncate_before_ms.load(Ordering::Acquire))
    }

    /// Raises the set's truncate cut-off to `before_ms`; returns whether it rose.
    pub(crate) fn raise_truncate_cutoff(&self, set_id: SetId, before_ms: u64) -> bool {
        self.slot(set_id).is_some_and(|slot| {
            slot.truncate_before_ms
                .fetch_max(before_ms, Ordering::AcqRel)
                < before_ms
        })
    }

    pub(crate) fn index_enabled(&self, set_id: SetId) -> bool {
        self.slot(set_id)
            .is_some_and(|slot| slot.index_enabled.load(Ordering::Acquire))
    }

    pub(crate) fn set_index_enabled(&self, set_id: SetId, enabled: bool) {
        if let Some(slot) = self.slot(set_id) {
            slot.index_enabled.store(enabled, Ordering::Release);
        }
    }

    /// Counts a set index build starting (`true`) or ending (`false`).
    pub(crate) fn index_build_running(&self, set_id: SetId, running: bool) {
        if let Some(slot) = self.slot(set_id) {
            if running {
                slot.index_builds_running.fetch_add(1, Ordering::AcqRel);
            } else {
                slot.index_builds_running.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }

    pub(crate) fn summaries(&self) -> Vec<SetSummary> {
        let count = self.count.load(Ordering::Acquire);
        self.slots[..count]
            .iter()
            .map(|slot| SetSummary {
                name: String::from_utf8_lossy(slot.name.get().map_or(&[][..], |n| n)).into_owned(),
                objects: slot.objects.load(Ordering::Relaxed),
                data_used_bytes: slot.data_used_bytes.load(Ordering::Relaxed),
                truncate_before_ms: slot.truncate_before_ms.load(Ordering::Relaxed),
                index_enabled: slot.index_enabled.load(Ordering::Relaxed),
                index_populating: slot.index_builds_running.load(Ordering::Relaxed) > 0,
            })
            .collect()
    }

    fn slot(&self, set_id: SetId) -> Option<&SetSlot> {
        usize::from(set_id)
            .checked_sub(1)
            .map(|index| &self.slots[index])
    }
}

fn set_id_of_slot(slot_index: usize) -> SetId {
    SetId::try_from(slot_index + 1).expect("set ids fit in u16 (const-asserted in model)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_stable_and_start_at_one() {
        let sets = SetRegistry::new();
        assert_eq!(sets.id_or_create(b""), Ok(0));
        assert_eq!(sets.id_or_create(b"a"), Ok(1));
        assert_eq!(sets.id_or_create(b"b"), Ok(2));
        assert_eq!(sets.id_or_create(b"a"), Ok(1));
        assert_eq!(sets.id_of(b"b"), Some(2));
        assert_eq!(sets.id_of(b"c"), None);
        assert_eq!(sets.name_of(2), Some(&b"b"[..]));
        assert_eq!(sets.name_of(0), None);
    }

    #[test]
    fn too_long_names_and_too_many_sets_are_parameter_errors() {
        let sets = SetRegistry::new();
        assert_eq!(sets.id_or_create(&[b'x'; 64]), Err(ResultCode::Parameter));
        assert!(sets.id_or_create(&[b'x'; 63]).is_ok());
        for index in 1..SETS_PER_NAMESPACE_MAX {
            assert!(sets.id_or_create(format!("set{index}").as_bytes()).is_ok());
        }
        assert_eq!(
            sets.id_or_create(b"one-too-many"),
            Err(ResultCode::Parameter)
        );
    }
}
