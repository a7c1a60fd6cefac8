//! Set indexes (Aerospike 5.6): per set and per partition, the digests of the set's records,
//! so that a scan of a small set never walks the whole namespace.
//!
//! Enabling marks the set at once; a build then fills each partition's index under that
//! partition's write lock, one partition at a time, so writers wait for one partition at most.
//! A partition whose index is not built yet is scanned by walking it, which gives the same
//! records in the same order: scans are correct during a build, only slower.
//!
//! Invariants:
//! - A partition builds a set's index only while the set is enabled, checked under the
//!   partition's lock; disabling clears the flag before visiting partitions, so a build racing
//!   a disable never leaves an index behind in a partition the disable already visited.

use model::ResultCode;

use crate::namespace::Namespace;
use crate::record::SetId;

/// A set index to build, returned when an index was enabled; pass it to
/// [`Namespace::build_set_index`] (on a background thread for a large namespace).
#[derive(Debug)]
#[must_use = "the index stays 'populating' until built"]
pub struct SetIndexBuild {
    set_id: SetId,
}

impl Namespace {
    /// Enables the set index of `set_name` (creating the set). Returns the build to run, or
    /// `None` when the index was already enabled.
    ///
    /// # Errors
    /// PARAMETER for an empty or too long set name, or when the namespace has no room for
    /// another set.
    pub fn enable_set_index(&self, set_name: &[u8]) -> Result<Option<SetIndexBuild>, ResultCode> {
        let set_id = self.sets.id_or_create(set_name)?;
        if set_id == 0 {
            return Err(ResultCode::Parameter);
        }
        let _guard = self.set_index_lock.lock();
        if self.sets.index_enabled(set_id) {
            return Ok(None);
        }
        self.sets.set_index_enabled(set_id, true);
        self.sets.index_build_running(set_id, true);
        Ok(Some(SetIndexBuild { set_id }))
    }

    /// Builds an enabled set index for the records already stored, partition by partition.
    pub fn build_set_index(&self, build: SetIndexBuild) {
        for slot in &self.partitions {
            let mut partition = slot.state.write();
            if !self.sets.index_enabled(build.set_id) {
                break;
            }
            partition.build_set_index(build.set_id);
        }
        self.sets.index_build_running(build.set_id, false);
    }

    /// Disables and frees the set index of `set_name`; an unknown set has none.
    pub fn disable_set_index(&self, set_name: &[u8]) {
        let Some(set_id) = self.sets.id_of(set_name) else {
            return;
        };
        let _guard = self.set_index_lock.lock();
        self.sets.set_index_enabled(set_id, false);
        for slot in &self.partitions {
            slot.state.write().drop_set_index(set_id);
        }
    }
}
