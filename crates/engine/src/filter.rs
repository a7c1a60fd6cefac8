//! Filter expressions on records: what an expression sees of a stored record, and the
//! FILTERED_OUT verdict.

use model::{CITRUSLEAF_EPOCH_UNIX_SECONDS, Digest, ResultCode};

use crate::clock::Now;
use crate::exp::{Expression, RecordFacts, RecordView};
use crate::namespace::Namespace;
use crate::record::{Bins, Record};

/// A stored record (with its data loaded) as an expression reads it.
pub(crate) struct StoredView<'r> {
    pub(crate) record: &'r Record,
    /// The record's bins (rendered once when the record is native).
    pub(crate) bins: Bins<'r>,
    pub(crate) digest: &'r Digest,
    pub(crate) set_name: &'r [u8],
    pub(crate) now: Now,
}

impl RecordView for StoredView<'_> {
    fn bin(&self, name: &[u8]) -> Option<(u8, &[u8])> {
        self.bins
            .iter()
            .find(|bin| bin.name == name)
            .map(|bin| (bin.particle_type, bin.value))
    }

    fn meta(&self) -> RecordFacts<'_> {
        facts_of(self.record, self.digest, self.set_name, self.now)
    }
}

/// What an expression sees of `record`'s metadata.
pub(crate) fn facts_of<'r>(
    record: &'r Record,
    digest: &'r Digest,
    set_name: &'r [u8],
    now: Now,
) -> RecordFacts<'r> {
    let void_time = record.void_time.0;
    RecordFacts {
        last_update_ms: record.last_update_ms,
        void_time_epoch_s: match void_time {
            0 => 0,
            seconds => u64::from(seconds) + CITRUSLEAF_EPOCH_UNIX_SECONDS,
        },
        now_ms: now.unix_ms,
        set_name,
        digest: &digest.0,
        // A record whose data stays on the device (a replace with the key in hand does not
        // read it back) has no key in memory to show: reading one there panicked.
        key: record.has_data().then(|| record.user_key()).flatten(),
        size_bytes: record.data_size_bytes() as u64,
    }
}

impl Namespace {
    /// FILTERED_OUT (27) when `filter` does not pass `record` (whose data is loaded).
    ///
    /// # Errors
    /// FILTERED_OUT, or the expression's own error.
    pub(crate) fn check_filter(
        &self,
        filter: Option<&Expression>,
        digest: &Digest,
        record: &Record,
        now: Now,
    ) -> Result<(), ResultCode> {
        let Some(filter) = filter else {
            return Ok(());
        };
        let view = StoredView {
            record,
            bins: record.bins(),
            digest,
            set_name: self.sets.name_of(record.set_id).unwrap_or_default(),
            now,
        };
        match filter.matches(&view)? {
            true => Ok(()),
            false => Err(ResultCode::FilteredOut),
        }
    }
}
