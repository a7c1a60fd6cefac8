//! A namespace on device storage: opening it (cold start), writing every change through to the
//! device before the index shows it, and defragmentation.
//!
//! Every change to a record of a namespace with storage is appended to the device *before* the
//! index changes, under the record's partition lock: if the append fails (stop-writes, a full
//! write queue, a failed device) the index is untouched and the client gets the error, so the
//! index never shows what the device does not have. The index keeps each record's
//! [`Location`], so overwrites and deletes tell the storage which entry stopped being current,
//! and defragmentation can tell a current entry from a dead one.
//!
//! With `data-in-memory` false the index keeps only each record's metadata and location: a
//! stored record lets go of its data once appended, and whoever needs its key or bins reads it
//! back ([`Namespace::load`]) under the partition lock, from the write block in memory, the cache
//! of recent blocks or the file.
//!
//! Invariants:
//! - A record in the index of a namespace with storage has a location, and that entry holds
//!   exactly its current version (data and metadata alike).
//! - Records with native values are not kept in such a namespace: they are stored packed, so
//!   that a failed append never leaves a value changed in place that the device lacks.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use model::{Digest, Generation, ResultCode, VoidTime};
use storage::{
    Device, Entry, EntryKind, Flushing, Location, RecordBody, Recovered, RecoveryReport, Storage,
    StorageError, StorageStats,
};

use crate::ack::Acks;
use crate::clock::Clock;
use crate::commit::ChangeKind;
use crate::config::NamespaceConfig;
use crate::namespace::Namespace;
use crate::partition::Partition;
use crate::record::{self, Record, RecordHeader};
use crate::sindex::{NewStamp, Stamp};
use crate::stats::Counter;

/// Why a namespace could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The configuration is invalid.
    #[error("namespace {namespace}: {reason}")]
    Config {
        /// The namespace.
        namespace: String,
        /// What is wrong.
        reason: String,
    },
    /// Its storage could not be opened or read.
    #[error("namespace {namespace}: {source}")]
    Storage {
        /// The namespace.
        namespace: String,
        /// What failed.
        source: StorageError,
    },
}

/// The result code a client gets when the storage refuses a write.
pub(crate) fn result_code(error: &StorageError) -> ResultCode {
    match error {
        StorageError::OutOfSpace => ResultCode::OutOfSpace,
        StorageError::Overloaded => ResultCode::DeviceOverload,
        StorageError::TooBig => ResultCode::RecordTooBig,
        StorageError::Failed(_) | StorageError::Unreadable(_) | StorageError::Config(_) => {
            ResultCode::Unknown
        }
    }
}

/// A record with its data at hand: the index's own, or a copy read back from the device.
#[derive(Debug)]
pub(crate) enum Loaded<'r> {
    /// The index holds the data.
    Indexed(&'r Record),
    /// Read back from the device.
    Read(Record),
}

impl std::ops::Deref for Loaded<'_> {
    type Target = Record;

    fn deref(&self) -> &Record {
        match self {
            Loaded::Indexed(record) => record,
            Loaded::Read(record) => record,
        }
    }
}

impl Namespace {
    /// Opens a namespace: on `devices` (one per configured file) when its configuration has
    /// storage, rebuilding its records from them; empty and in memory otherwise.
    ///
    /// # Errors
    /// An invalid configuration, or storage that cannot be opened or read.
    pub fn open(
        config: NamespaceConfig,
        clock: Arc<dyn Clock>,
        devices: Vec<Arc<dyn Device>>,
        flushing: Flushing,
    ) -> Result<(Namespace, Option<RecoveryReport>), OpenError> {
        let name = config.name.clone();
        config.validate().map_err(|reason| OpenError::Config {
            namespace: name.clone(),
            reason,
        })?;
        let Some(storage_config) = config.storage.clone() else {
            return Ok((Namespace::new(config, clock), None));
        };
        let mut namespace = Namespace::new(config, clock);
        let (storage, report) = Storage::open(storage_config, devices, flushing, &mut |event| {
            namespace.recover(event);
        })
        .map_err(|source| OpenError::Storage {
            namespace: name,
            source,
        })?;
        namespace.storage = Some(storage);
        namespace.reclaim_truncated();
        namespace.sweep_expired();
        Ok((namespace, Some(report)))
    }

    /// Applies one event of the cold start.
    fn recover(&mut self, event: Recovered<'_>) {
        match event {
            Recovered::Record {
                digest,
                location,
                body,
            } => self.recover_record(Digest(digest), location, &body),
            Recovered::Deleted { digest } => {
                let digest = Digest(digest);
                self.slot(&digest).state.write().remove(&digest, &self.sets);
            }
            Recovered::Truncated {
                set_name,
                before_ms,
            } => self.raise_cutoff(set_name, before_ms),
        }
    }

    fn recover_record(&self, digest: Digest, location: Location, body: &RecordBody<'_>) {
        let Ok(set_id) = self.sets.id_or_create(body.set_name) else {
            tracing::error!(
                namespace = self.name(),
                "cold start: a record names a set beyond the set limit; skipped"
            );
            return;
        };
        if body.generation == 0 {
            return;
        }
        if !record::is_well_formed(body.data) {
            tracing::error!(
                namespace = self.name(),
                ?location,
                "cold start: a record's data is malformed although it passed its checksum; \
                 skipped"
            );
            return;
        }
        let generation = Generation(body.generation);
        let header = RecordHeader {
            last_update_ms: body.last_update_ms,
            void_time: VoidTime(body.void_time),
            generation,
            set_id,
        };
        let mut record = if self.keeps_data_in_memory() {
            Record::new(header, body.data.into())
        } else {
            Record::new(header, Box::default())
        };
        record.location = location.to_bits();
        self.slot(&digest)
            .state
            .write()
            .insert(digest, record, &self.sets);
    }

    /// Raises the cut-off of `set_name` (empty = the namespace), as a truncate did.
    fn raise_cutoff(&self, set_name: &[u8], before_ms: u64) {
        if set_name.is_empty() {
            self.truncate_before_ms
                .fetch_max(before_ms, Ordering::AcqRel);
        } else if let Ok(set_id) = self.sets.id_or_create(set_name) {
            self.sets.raise_truncate_cutoff(set_id, before_ms);
        }
    }

    /// Stores `record` at `digest`: on the device first (if the namespace has storage), then
    /// in the index, with its secondary index entries; hands the change to the commit path and
    /// returns the record it replaced. Called with the partition locked.
    pub(crate) fn store(
        &self,
        partition: &mut Partition,
        digest: Digest,
        mut record: Record,
        acks: &mut Acks,
    ) -> Result<Option<Record>, ResultCode> {
        if self.memory_stop_writes() {
            return Err(ResultCode::OutOfSpace);
        }
        // Both versions' entries are worked out while both can be read.
        let indexes = self.sindexes.snapshot();
        let old_keys = self.current_keys(&indexes, partition, &digest);
        let new_keys = self.indexed_keys(&indexes, &digest, Some(&record));
        let stamp = NewStamp {
            stamp: Stamp::of(&record),
            restamp_kept: partition
                .any_record(&digest)
                .is_some_and(|old| Stamp::must_restamp(old, &record)),
        };
        // The packed data is built only for someone who needs it: the device or the sink.
        if self.storage.is_some() || self.change_sink.get().is_some() {
            let data = record.packed_data();
            let location = match &self.storage {
                Some(storage) => {
                    let replaced = partition.any_record(&digest).and_then(Replaced::of);
                    Some(self.append_version(storage, &digest, &record, &data, replaced, acks)?)
                }
                None => None,
            };
            let stored = Some((&record, &*data));
            self.committed(partition.version, &digest, ChangeKind::Stored, stored, acks);
            drop(data);
            if let Some(location) = location {
                record.location = location.to_bits();
                if !self.keeps_data_in_memory() {
                    record.drop_data();
                }
            }
        }
        let replaced = partition.insert(digest, record, &self.sets);
        Self::reindex(
            &indexes,
            partition,
            &digest,
            old_keys,
            new_keys,
            Some(stamp),
        );
        Ok(replaced)
    }

    /// Deletes the record at `digest`: a tombstone on the device first (if the namespace has
    /// storage), then out of the index; hands the change to the commit path. Called with the
    /// partition locked.
    pub(crate) fn unstore(
        &self,
        partition: &mut Partition,
        digest: &Digest,
        acks: &mut Acks,
    ) -> Result<Option<Record>, ResultCode> {
        let indexes = self.sindexes.snapshot();
        let old_keys = self.current_keys(&indexes, partition, digest);
        if let Some(storage) = &self.storage {
            let replaced = partition.any_record(digest).and_then(Record::location);
            let durable = storage
                .delete_record(&digest.0, replaced)
                .map_err(|e| result_code(&e))?;
            durable
                .into_iter()
                .for_each(|point| acks.add_durable(point));
        }
        let removed = partition.remove(digest, &self.sets);
        Self::reindex(&indexes, partition, digest, old_keys, Vec::new(), None);
        self.committed(partition.version, digest, ChangeKind::Deleted, None, acks);
        Ok(removed)
    }

    /// Appends a version with `record`'s metadata and `data` (its packed data), replacing the
    /// version `replaced` describes; returns where. A version older by last-update time than
    /// the one it replaces (the clock went back) is reported to the storage, which must then
    /// keep it as a shadow if a truncate takes it.
    pub(crate) fn append_version(
        &self,
        storage: &Storage,
        digest: &Digest,
        record: &Record,
        data: &[u8],
        replaced: Option<Replaced>,
        acks: &mut Acks,
    ) -> Result<Location, ResultCode> {
        let body = RecordBody {
            last_update_ms: record.last_update_ms,
            void_time: record.void_time.0,
            generation: record.generation.0,
            set_name: self.sets.name_of(record.set_id).unwrap_or_default(),
            data,
        };
        let (location, durable) = storage
            .write_record(&digest.0, &body, replaced.map(|r| r.location))
            .map_err(|e| result_code(&e))?;
        durable
            .into_iter()
            .for_each(|point| acks.add_durable(point));
        if replaced.is_some_and(|r| record.last_update_ms < r.last_update_ms) {
            storage.rewound(&digest.0);
        }
        Ok(location)
    }

    /// Tells the storage that `record` left the index for `why` (expiry, eviction or
    /// truncate).
    pub(crate) fn forget(&self, digest: &Digest, record: &Record, why: Counter) {
        let (Some(storage), Some(location)) = (&self.storage, record.location()) else {
            return;
        };
        match why {
            Counter::ExpiredObjects => storage.expired(&digest.0, location),
            Counter::EvictedObjects => {
                if let Err(error) = storage.delete_record(&digest.0, Some(location)) {
                    // The record is gone from memory; without its tombstone a cold start may
                    // bring it back, which is all an eviction can lose.
                    tracing::warn!(namespace = self.name(), %error, "eviction left no tombstone");
                    storage.truncated(&digest.0, location);
                }
            }
            _ => storage.truncated(&digest.0, location),
        }
    }

    /// Whether the index holds every record's data (no storage, or `data-in-memory`).
    pub(crate) fn keeps_data_in_memory(&self) -> bool {
        self.storage
            .as_ref()
            .is_none_or(|storage| storage.config().data_in_memory)
    }

    /// `record` (the index's, at `digest`) with its data: as it is when the index holds the
    /// data, else read back from the device. Called under the partition lock.
    ///
    /// # Errors
    /// UNKNOWN when the device cannot be read or the entry fails its checks (logged and
    /// counted by the storage).
    pub(crate) fn load<'r>(
        &self,
        digest: &Digest,
        record: &'r Record,
    ) -> Result<Loaded<'r>, ResultCode> {
        if record.has_data() {
            return Ok(Loaded::Indexed(record));
        }
        self.read_back(digest, record).map(Loaded::Read)
    }

    /// A copy of `record` (the index's, at `digest`, without data) holding its data read back
    /// from the device.
    ///
    /// # Errors
    /// As [`Namespace::load`].
    pub(crate) fn read_back(&self, digest: &Digest, record: &Record) -> Result<Record, ResultCode> {
        let (Some(storage), Some(location)) = (&self.storage, record.location()) else {
            unreachable!("a record without data in memory is on a device");
        };
        let body = storage
            .read_record(&digest.0, location)
            .map_err(|e| result_code(&e))?;
        let decoded = RecordBody::decode(&body).filter(|decoded| {
            decoded.generation == record.generation.0
                && decoded.void_time == record.void_time.0
                && decoded.last_update_ms == record.last_update_ms
                && record::is_well_formed(decoded.data)
        });
        let Some(decoded) = decoded else {
            tracing::error!(
                namespace = self.name(),
                ?location,
                "a record read back does not match its index entry"
            );
            return Err(ResultCode::Unknown);
        };
        Ok(record.with_data(decoded.data.into()))
    }

    /// Whether the namespace keeps its records on a device.
    pub fn has_storage(&self) -> bool {
        self.storage.is_some()
    }

    /// Its storage's statistics, if it has storage.
    pub fn storage_stats(&self) -> Option<StorageStats> {
        self.storage.as_ref().map(Storage::stats)
    }

    /// Whether client writes are refused for lack of space on the device or in memory.
    pub fn stop_writes(&self) -> bool {
        self.memory_stop_writes() || self.storage.as_ref().is_some_and(Storage::stop_writes)
    }

    /// Writes and syncs everything appended so far, on this thread.
    ///
    /// # Errors
    /// The device failed.
    pub fn flush_storage(&self) -> Result<(), StorageError> {
        self.storage.as_ref().map_or(Ok(()), Storage::flush)
    }

    /// Flushes what is buffered and stops the storage's flusher (at shutdown).
    pub fn close(&self) {
        if let Some(storage) = &self.storage {
            storage.close();
        }
    }

    /// Defragments up to `blocks_max` blocks whose live data fell below `defrag-lwm-pct`,
    /// sleeping `defrag-sleep-us` after each; returns how many it emptied. A copy that fails
    /// (the device is full or overloaded) ends the round; its block stays in use.
    pub fn defragment(&self, blocks_max: usize) -> usize {
        let Some(storage) = &self.storage else {
            return 0;
        };
        storage.drop_outlived_tombstones();
        let pause = Duration::from_micros(storage.config().defrag_sleep_us);
        let mut emptied = 0;
        let mut blocks = storage.defrag_candidates(blocks_max).into_iter();
        for block in blocks.by_ref() {
            let copied = self.defragment_block(storage, block);
            if storage.finish_defrag(block) {
                emptied += 1;
            }
            if let Err(error) = copied {
                tracing::warn!(namespace = self.name(), block, %error, "defragmentation paused");
                break;
            }
            std::thread::sleep(pause);
        }
        for block in blocks {
            storage.finish_defrag(block);
        }
        emptied
    }

    fn defragment_block(&self, storage: &Storage, block: u32) -> Result<(), StorageError> {
        let image = storage.read_block(block)?;
        for entry in image.entries() {
            match entry.kind {
                EntryKind::Truncate => storage.relocate_mark(&entry)?,
                EntryKind::Record | EntryKind::Tombstone => self.relocate(storage, &entry)?,
            }
        }
        Ok(())
    }

    /// Copies `entry` forward if it is current: the version the index points at, or a
    /// tombstone still needed. Holds the digest's partition lock, so no write races it.
    fn relocate(&self, storage: &Storage, entry: &Entry<'_>) -> Result<(), StorageError> {
        let digest = Digest(entry.digest);
        let mut partition = self.slot(&digest).state.write();
        match partition.any_record_mut(&digest) {
            Some(record) if record.location() == Some(entry.location) => {
                record.location = storage.relocate_record(entry)?.to_bits();
                Ok(())
            }
            _ => storage.relocate_tombstone(entry),
        }
    }
}

/// The stored version a write replaces.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Replaced {
    pub(crate) location: Location,
    pub(crate) last_update_ms: u64,
}

impl Replaced {
    /// `record`'s stored version, if it has one.
    pub(crate) fn of(record: &Record) -> Option<Replaced> {
        record.location().map(|location| Replaced {
            location,
            last_update_ms: record.last_update_ms,
        })
    }
}
