//! Truncate: hide every record of a set or namespace last updated before a cut-off, at once,
//! then reclaim them in the background ([`Namespace::reclaim_truncated`]).
//!
//! Aerospike's rules (`truncate.c`): a record is truncated when its last-update time is
//! strictly before the cut-off; a cut-off not newer than an earlier one is ignored; a cut-off
//! in the future is refused.

use std::sync::atomic::Ordering;

use crate::namespace::Namespace;

/// Why a truncate was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TruncateError {
    /// The cut-off is later than the server's clock.
    #[error("truncate cut-off is in the future")]
    CutoffInFuture,
    /// The set name is too long or the namespace has no room for another set.
    #[error("invalid set name")]
    BadSet,
    /// The device refused to record the truncate; nothing was truncated.
    #[error("device storage: {0}")]
    Storage(String),
}

impl Namespace {
    /// Truncates `set` (or the whole namespace for `None`) up to `before_ms` (Unix ms), or up
    /// to and including the current millisecond when `before_ms` is `None`. Returns whether
    /// the cut-off moved (an older one than before is ignored).
    ///
    /// # Errors
    /// [`TruncateError`] when the cut-off is in the future or the set name is invalid.
    pub fn truncate(
        &self,
        set: Option<&[u8]>,
        before_ms: Option<u64>,
    ) -> Result<bool, TruncateError> {
        let now_ms = self.clock.now().unix_ms;
        if before_ms.is_some_and(|before_ms| before_ms > now_ms) {
            return Err(TruncateError::CutoffInFuture);
        }
        self.truncate_at(set, before_ms)
    }

    /// Applies a truncate another node of the cluster made at `before_ms`: as
    /// [`Namespace::truncate`], but a cut-off ahead of this node's clock is taken as it is
    /// (clocks differ between nodes; the mark is the origin's).
    ///
    /// # Errors
    /// [`TruncateError`] when the set name is invalid or the device refuses the mark.
    pub fn apply_truncate(
        &self,
        set: Option<&[u8]>,
        before_ms: u64,
    ) -> Result<bool, TruncateError> {
        self.truncate_at(set, Some(before_ms))
    }

    /// The watched digests whose live record is in `set` (any set for `None`): those a
    /// truncate removes.
    fn watched_records_in(&self, set: Option<&[u8]>) -> Vec<model::Digest> {
        let set_id = match set {
            None => None,
            Some(name) => match self.sets.id_of(name) {
                Some(set_id) => Some(set_id),
                None => return Vec::new(),
            },
        };
        let now = self.clock.now();
        let mut watched = self.watches.watched();
        watched.retain(|digest| {
            let Ok(access) = self.read_access(digest, now) else {
                return false;
            };
            access
                .partition
                .live(digest, &access.visibility)
                .is_some_and(|record| set_id.is_none_or(|id| record.set_id == id))
        });
        watched
    }

    /// The cut-off of `set` (or of the namespace for `None`), Unix ms; 0 if never truncated.
    pub fn truncate_cutoff_ms(&self, set: Option<&[u8]>) -> u64 {
        match set {
            None => self.truncate_before_ms.load(Ordering::Acquire),
            Some(name) => self
                .sets
                .id_of(name)
                .map_or(0, |set_id| self.sets.truncate_before_ms(set_id)),
        }
    }

    fn truncate_at(
        &self,
        set: Option<&[u8]>,
        before_ms: Option<u64>,
    ) -> Result<bool, TruncateError> {
        // Looked up before the gate is taken (a lookup takes it too). A record written after
        // the look touches its watches itself.
        let removed_watched = self.watched_records_in(set);
        let _gate = self.gate.shared();
        let now_ms = self.clock.now().unix_ms;
        // Aerospike creates the set, so that the cut-off holds for it.
        let set_id = match set {
            None => None,
            Some(name) => match self.sets.id_or_create(name) {
                Ok(0) | Err(_) => return Err(TruncateError::BadSet),
                Ok(set_id) => Some(set_id),
            },
        };
        let previous_ms = match set_id {
            None => self.truncate_before_ms.load(Ordering::Acquire),
            Some(set_id) => self.sets.truncate_before_ms(set_id),
        };
        // Without a cut-off: everything written so far, this millisecond included. Writes made
        // after an earlier truncate in this same millisecond were stamped with its cut-off, so
        // the new one must pass it too. Later writes are stamped at least the new cut-off and
        // survive (see `last_update_ms_for`).
        let before_ms = before_ms.unwrap_or_else(|| (now_ms + 1).max(previous_ms + 1));
        if let Some(storage) = &self.storage {
            // Durable before any record disappears, so a cold start cannot bring them back.
            storage
                .truncate(set.unwrap_or_default(), before_ms)
                .map_err(|e| TruncateError::Storage(e.to_string()))?;
        }
        // As Redis's FLUSHDB touches only the watched keys it removes: a watch on a key that
        // did not exist stays clean.
        removed_watched
            .iter()
            .for_each(|digest| self.watches.touched(digest));
        let moved = match set_id {
            None => {
                self.truncate_before_ms
                    .fetch_max(before_ms, Ordering::AcqRel)
                    < before_ms
            }
            Some(set_id) => self.sets.raise_truncate_cutoff(set_id, before_ms),
        };
        if let Some(sink) = self.change_sink.get().filter(|_| moved) {
            sink.truncated(set.unwrap_or_default(), before_ms);
        }
        Ok(moved)
    }

    /// The namespace-wide truncate cut-off (Unix ms), 0 if never truncated.
    pub fn truncate_before_ms(&self) -> u64 {
        self.truncate_before_ms.load(Ordering::Acquire)
    }
}
