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
        let before_ms = match before_ms {
            Some(before_ms) if before_ms > now_ms => return Err(TruncateError::CutoffInFuture),
            Some(before_ms) => before_ms,
            // Everything written up to now, this millisecond included: later writes are
            // stamped at least this cut-off and survive (see `last_update_ms_for`).
            None => now_ms + 1,
        };
        match set {
            None => {
                let previous = self
                    .truncate_before_ms
                    .fetch_max(before_ms, Ordering::AcqRel);
                Ok(previous < before_ms)
            }
            Some(name) => {
                // Aerospike creates the set, so that the cut-off holds for it.
                let set_id = self
                    .sets
                    .id_or_create(name)
                    .map_err(|_| TruncateError::BadSet)?;
                if set_id == 0 {
                    return Err(TruncateError::BadSet);
                }
                Ok(self.sets.raise_truncate_cutoff(set_id, before_ms))
            }
        }
    }

    /// The namespace-wide truncate cut-off (Unix ms), 0 if never truncated.
    pub fn truncate_before_ms(&self) -> u64 {
        self.truncate_before_ms.load(Ordering::Acquire)
    }
}
