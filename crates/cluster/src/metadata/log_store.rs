//! The durable Raft log and vote of the metadata group (openraft's `RaftLogStorage`).
//!
//! Files in the store's directory (each is one or more [`super::record`] records):
//!
//! ```text
//! vote                        the last saved vote
//! committed                   the last saved committed log id (lets a restart re-apply alone)
//! purged                      the last purged log id
//! log-<index, 20 digits>      one log entry
//! *.tmp                       a file being replaced; garbage when found at start
//! ```
//!
//! Invariants:
//! - `save_vote` and `append` reach stable storage before they return; `append` calls openraft's
//!   flush callback only after the entries and their names are durable.
//! - The files replace each other atomically ([`super::disk::replace_durably`]; a log entry is
//!   renamed into place), so a crash leaves old or new content, never a torn file under its name.
//! - The log in memory is a contiguous run of indexes starting right after `purged` (or at 0).
//!   `truncate` removes files from the highest index down and `purge` records `purged` before
//!   removing files, so a crash in either still leaves a contiguous run on disk.
//! - After any I/O error the store refuses every further write (a failed fsync may have lost data
//!   that a retry would wrongly report durable); the node must be restarted.
//! - The whole unpurged log is kept in memory: the metadata log is small and snapshots purge it.

// openraft's storage traits return `StorageError` (224 bytes) by value; the helpers return it
// too, so `?` needs no conversion. Such an error stops the node, so its size costs nothing.
#![allow(clippy::result_large_err)]

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::io;
use std::ops::RangeBounds;
use std::sync::Arc;

use openraft::storage::{LogFlushed, RaftLogStorage};
use openraft::{
    AnyError, Entry, ErrorSubject, ErrorVerb, LogId, LogState, RaftLogReader, StorageError,
    StorageIOError, Vote,
};
use parking_lot::Mutex;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::disk::{MetaDisk, TEMP_SUFFIX, replace_durably};
use super::{NodeId, TypeConfig, record};

const VOTE_FILE: &str = "vote";
const COMMITTED_FILE: &str = "committed";
const PURGED_FILE: &str = "purged";
const LOG_PREFIX: &str = "log-";

/// The log store; clones share the same log (openraft reads through a clone while it writes).
#[derive(Clone)]
pub struct MetaLogStore {
    inner: Arc<Mutex<LogInner>>,
}

struct LogInner {
    disk: Arc<dyn MetaDisk>,
    vote: Option<Vote<NodeId>>,
    committed: Option<LogId<NodeId>>,
    purged: Option<LogId<NodeId>>,
    entries: BTreeMap<u64, Entry<TypeConfig>>,
    io_failed: bool,
}

type StoreResult<T> = Result<T, StorageError<NodeId>>;

impl MetaLogStore {
    /// Opens the store in `disk`, recovering vote, committed id and log from its files.
    ///
    /// A log entry that was never acknowledged (after a gap, left by a crash before the
    /// directory sync) is dropped; a corrupted file is an error.
    ///
    /// # Errors
    /// A [`StorageError`] when a file cannot be read or is corrupted.
    pub fn open(disk: Arc<dyn MetaDisk>) -> StoreResult<Self> {
        let names = disk
            .list()
            .map_err(|e| read_error(ErrorSubject::Store, e))?;
        for name in names.iter().filter(|name| name.ends_with(TEMP_SUFFIX)) {
            disk.remove(name)
                .map_err(|e| write_error(ErrorSubject::Store, e))?;
        }
        let vote = read_value(disk.as_ref(), VOTE_FILE, ErrorSubject::Vote)?;
        let committed = read_value(disk.as_ref(), COMMITTED_FILE, ErrorSubject::Store)?;
        let purged: Option<LogId<NodeId>> =
            read_value(disk.as_ref(), PURGED_FILE, ErrorSubject::Store)?;
        let entries = recover_log(disk.as_ref(), &names, purged.map(|id| id.index))?;
        let inner = LogInner {
            disk,
            vote,
            committed,
            purged,
            entries,
            io_failed: false,
        };
        Ok(Self {
            inner: Arc::new(Mutex::new(inner)),
        })
    }

    /// Whether the store holds nothing: no vote, no log, nothing purged. Only such a store may
    /// be initialized.
    pub fn is_pristine(&self) -> bool {
        let inner = self.inner.lock();
        inner.vote.is_none() && inner.purged.is_none() && inner.entries.is_empty()
    }
}

impl LogInner {
    fn check_healthy(&self) -> StoreResult<()> {
        if self.io_failed {
            let error = io::Error::other("an earlier I/O error stopped the store");
            return Err(write_error(ErrorSubject::Store, error));
        }
        Ok(())
    }

    /// Runs a write; any I/O error poisons the store.
    fn write<T>(
        &mut self,
        subject: ErrorSubject<NodeId>,
        action: impl FnOnce(&dyn MetaDisk) -> io::Result<T>,
    ) -> StoreResult<T> {
        self.check_healthy()?;
        let result = action(self.disk.as_ref());
        result.map_err(|error| {
            tracing::error!(%error, "metadata store write failed; the store stops");
            self.io_failed = true;
            write_error(subject, error)
        })
    }

    fn append_durably(&mut self, entries: &[Entry<TypeConfig>]) -> StoreResult<()> {
        let mut encoded = Vec::with_capacity(entries.len());
        for entry in entries {
            let bytes = record::encode_json(entry)
                .map_err(|e| StorageIOError::write_log_entry(entry.log_id, AnyError::new(&e)))?;
            encoded.push((entry.log_id.index, bytes));
        }
        self.write(ErrorSubject::Logs, |disk| {
            for (index, bytes) in &encoded {
                let name = log_file_name(*index);
                let temp = format!("{name}{TEMP_SUFFIX}");
                disk.write_synced(&temp, bytes)?;
                disk.rename(&temp, &name)?;
            }
            disk.sync_dir()
        })
    }
}

impl RaftLogReader<TypeConfig> for MetaLogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> StoreResult<Vec<Entry<TypeConfig>>> {
        let inner = self.inner.lock();
        Ok(inner.entries.range(range).map(|(_, e)| e.clone()).collect())
    }
}

impl RaftLogStorage<TypeConfig> for MetaLogStore {
    type LogReader = MetaLogStore;

    async fn get_log_state(&mut self) -> StoreResult<LogState<TypeConfig>> {
        let inner = self.inner.lock();
        let last = inner.entries.values().next_back().map(|e| e.log_id);
        Ok(LogState {
            last_purged_log_id: inner.purged,
            last_log_id: last.or(inner.purged),
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> StoreResult<()> {
        let bytes = encode(vote, ErrorSubject::Vote)?;
        let mut inner = self.inner.lock();
        inner.write(ErrorSubject::Vote, |disk| {
            replace_durably(disk, VOTE_FILE, &bytes)
        })?;
        inner.vote = Some(*vote);
        Ok(())
    }

    async fn read_vote(&mut self) -> StoreResult<Option<Vote<NodeId>>> {
        Ok(self.inner.lock().vote)
    }

    async fn save_committed(&mut self, committed: Option<LogId<NodeId>>) -> StoreResult<()> {
        let bytes = encode(&committed, ErrorSubject::Store)?;
        let mut inner = self.inner.lock();
        inner.write(ErrorSubject::Store, |disk| {
            replace_durably(disk, COMMITTED_FILE, &bytes)
        })?;
        inner.committed = committed;
        Ok(())
    }

    async fn read_committed(&mut self) -> StoreResult<Option<LogId<NodeId>>> {
        Ok(self.inner.lock().committed)
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<TypeConfig>) -> StoreResult<()>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + Send,
        I::IntoIter: Send,
    {
        let entries: Vec<_> = entries.into_iter().collect();
        let mut inner = self.inner.lock();
        inner.append_durably(&entries)?;
        for entry in entries {
            inner.entries.insert(entry.log_id.index, entry);
        }
        drop(inner);
        callback.log_io_completed(Ok(()));
        Ok(())
    }

    async fn truncate(&mut self, log_id: LogId<NodeId>) -> StoreResult<()> {
        let mut inner = self.inner.lock();
        let doomed: Vec<u64> = inner
            .entries
            .range(log_id.index..)
            .map(|(i, _)| *i)
            .collect();
        inner.write(ErrorSubject::Logs, |disk| {
            for index in doomed.iter().rev() {
                disk.remove(&log_file_name(*index))?;
            }
            disk.sync_dir()
        })?;
        inner.entries.split_off(&log_id.index);
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId<NodeId>) -> StoreResult<()> {
        let bytes = encode(&log_id, ErrorSubject::Store)?;
        let mut inner = self.inner.lock();
        let doomed: Vec<u64> = inner
            .entries
            .range(..=log_id.index)
            .map(|(i, _)| *i)
            .collect();
        inner.write(ErrorSubject::Logs, |disk| {
            replace_durably(disk, PURGED_FILE, &bytes)?;
            for index in &doomed {
                disk.remove(&log_file_name(*index))?;
            }
            Ok(())
        })?;
        inner.purged = Some(log_id);
        let kept = inner.entries.split_off(&(log_id.index + 1));
        inner.entries = kept;
        Ok(())
    }
}

/// The file name of log entry `index`; zero-padded so names sort by index.
fn log_file_name(index: u64) -> String {
    format!("{LOG_PREFIX}{index:020}")
}

/// Loads the contiguous run of entries after `purged_index`; removes what is outside it.
fn recover_log(
    disk: &dyn MetaDisk,
    names: &[String],
    purged_index: Option<u64>,
) -> StoreResult<BTreeMap<u64, Entry<TypeConfig>>> {
    let mut indexes: Vec<u64> = names
        .iter()
        .filter(|name| !name.ends_with(TEMP_SUFFIX))
        .filter_map(|name| name.strip_prefix(LOG_PREFIX)?.parse().ok())
        .collect();
    indexes.sort_unstable();
    let first_index = purged_index.map_or(0, |index| index + 1);
    let mut entries = BTreeMap::new();
    let mut stale = Vec::new();
    for index in indexes {
        let next_index = first_index + entries.len() as u64;
        if index < first_index || index != next_index {
            // Purged already, or after a gap: never acknowledged, since appends sync the
            // directory before acknowledging.
            stale.push(index);
            continue;
        }
        let entry: Entry<TypeConfig> = read_value(disk, &log_file_name(index), ErrorSubject::Logs)?
            .ok_or_else(|| read_error(ErrorSubject::Logs, io::ErrorKind::NotFound.into()))?;
        assert_eq!(
            entry.log_id.index, index,
            "log file {index} holds another index"
        );
        entries.insert(index, entry);
    }
    if !stale.is_empty() {
        tracing::warn!(
            ?stale,
            "metadata log: removing entries outside the contiguous run"
        );
        for index in &stale {
            disk.remove(&log_file_name(*index))
                .map_err(|e| write_error(ErrorSubject::Logs, e))?;
        }
        disk.sync_dir()
            .map_err(|e| write_error(ErrorSubject::Logs, e))?;
    }
    Ok(entries)
}

/// Reads a one-record file; `None` when it does not exist.
pub(crate) fn read_value<T: DeserializeOwned>(
    disk: &dyn MetaDisk,
    name: &str,
    subject: ErrorSubject<NodeId>,
) -> StoreResult<Option<T>> {
    let Some(bytes) = disk
        .read(name)
        .map_err(|e| read_error(subject.clone(), e))?
    else {
        return Ok(None);
    };
    let value = record::decode_json(&bytes).map_err(|e| {
        tracing::error!(file = name, error = %e, "metadata store file is corrupted");
        StorageIOError::new(subject, ErrorVerb::Read, AnyError::new(&e))
    })?;
    Ok(Some(value))
}

fn encode<T: Serialize>(value: &T, subject: ErrorSubject<NodeId>) -> StoreResult<Vec<u8>> {
    record::encode_json(value)
        .map_err(|e| StorageIOError::new(subject, ErrorVerb::Write, AnyError::new(&e)).into())
}

pub(crate) fn read_error(subject: ErrorSubject<NodeId>, error: io::Error) -> StorageError<NodeId> {
    StorageError::from_io_error(subject, ErrorVerb::Read, error)
}

pub(crate) fn write_error(subject: ErrorSubject<NodeId>, error: io::Error) -> StorageError<NodeId> {
    StorageError::from_io_error(subject, ErrorVerb::Write, error)
}

#[cfg(test)]
mod tests {
    use openraft::storage::RaftLogStorageExt;
    use openraft::{CommittedLeaderId, EntryPayload};

    use super::*;
    use crate::metadata::disk::MemoryDisk;

    fn blank(index: u64) -> Entry<TypeConfig> {
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(1, 1), index),
            payload: EntryPayload::Blank,
        }
    }

    async fn store_with_entries(disk: &Arc<MemoryDisk>, count: u64) -> MetaLogStore {
        let mut store = MetaLogStore::open(disk.clone()).expect("an empty store opens");
        let entries: Vec<_> = (0..count).map(blank).collect();
        store
            .blocking_append(entries)
            .await
            .expect("a healthy disk appends");
        store
    }

    async fn indexes(store: &mut MetaLogStore) -> Vec<u64> {
        let entries = store.try_get_log_entries(..).await.expect("in memory");
        entries.iter().map(|entry| entry.log_id.index).collect()
    }

    #[tokio::test(flavor = "current_thread")]
    async fn entries_after_a_gap_were_never_acknowledged_and_are_dropped_at_open() {
        let disk = Arc::new(MemoryDisk::new());
        store_with_entries(&disk, 4).await;
        disk.remove(&log_file_name(2)).expect("memory disk");
        let mut reopened = MetaLogStore::open(disk.clone()).expect("reopens");
        assert_eq!(indexes(&mut reopened).await, vec![0, 1]);
        let names = disk.list().expect("memory disk");
        assert!(!names.contains(&log_file_name(3)), "{names:?}");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_corrupted_entry_stops_the_open() {
        let disk = Arc::new(MemoryDisk::new());
        store_with_entries(&disk, 3).await;
        let name = log_file_name(1);
        let mut bytes = disk.read(&name).expect("memory").expect("written above");
        let last = bytes.len() - 1;
        bytes[last] ^= 0xff;
        disk.write_synced(&name, &bytes).expect("memory disk");
        assert!(MetaLogStore::open(disk).is_err());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn purge_and_truncate_survive_a_reopen() {
        let disk = Arc::new(MemoryDisk::new());
        let mut store = store_with_entries(&disk, 6).await;
        store.purge(blank(1).log_id).await.expect("purges");
        store.truncate(blank(4).log_id).await.expect("truncates");
        let mut reopened = MetaLogStore::open(disk.clone()).expect("reopens");
        assert_eq!(indexes(&mut reopened).await, vec![2, 3]);
        let state = reopened.get_log_state().await.expect("in memory");
        assert_eq!(state.last_purged_log_id, Some(blank(1).log_id));
        assert_eq!(state.last_log_id, Some(blank(3).log_id));
        assert!(!reopened.is_pristine());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn acknowledged_votes_and_entries_survive_a_power_loss() {
        let disk = Arc::new(MemoryDisk::new());
        let mut store = store_with_entries(&disk, 3).await;
        let vote = Vote::new(4, 2);
        store.save_vote(&vote).await.expect("a healthy disk saves");
        let image = Arc::new(disk.crash_image());
        let mut reopened = MetaLogStore::open(image).expect("reopens");
        assert_eq!(indexes(&mut reopened).await, vec![0, 1, 2]);
        assert_eq!(reopened.read_vote().await.expect("in memory"), Some(vote));
    }
}
