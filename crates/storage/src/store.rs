//! [`Storage`]: appending entries into write blocks, and everything the engine asks of it.
//!
//! Life of a write: the engine, holding the record's partition lock, encodes the record and
//! calls [`Storage::write_record`]. The entry is copied into the current write block (in memory)
//! under the writer lock and gets the next seq and a [`Location`]; the engine keeps that location
//! in its index. The flusher thread (`flusher.rs`) writes blocks out: a full block at once, a
//! partly filled one after `flush-max-ms` or as soon as a writer waits for durability. With
//! `commit-to-device`, each client write hands back a [`DurablePoint`] that the connection waits
//! for before it acknowledges: one sync serves every write it covers (group commit).
//!
//! Invariants:
//! - Entries are appended in seq order, under the writer lock; a block's entries are written to
//!   the device in offset order, and blocks in the order they were opened.
//! - All changes concerning one digest come from the engine under that digest's partition lock,
//!   so its versions, tombstone and live-byte accounting move in step.
//! - Nothing is appended once a device call failed: the storage then only serves reads.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Instant;

use parking_lot::Mutex;

use crate::blocks::Blocks;
use crate::config::StorageConfig;
use crate::device::Device;
use crate::durability::{Durability, DurablePoint};
use crate::flusher::Unsynced;
use crate::format::{
    self, BLOCK_HEADER_SIZE_BYTES, DigestBytes, END_MARKER_SIZE_BYTES, Entry, EntryBody, EntryKind,
    Location, RecordBody, TruncateBody,
};
use crate::reads::RecentBlocks;
use crate::tombstones::{Tomb, Tombstones};
use crate::{StorageError, StorageStats};

/// Who appends an entry: what it may use up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Origin {
    /// A client write: refused when free space fell below `stop-writes-avail-pct`.
    ClientWrite,
    /// A client delete: allowed under stop-writes (deleting is how space comes back).
    ClientDelete,
    /// Defragmentation or a truncate mark: may use the reserve below stop-writes.
    Internal,
}

/// A write block being filled.
#[derive(Debug)]
pub(crate) struct OpenBlock {
    pub(crate) block: u32,
    pub(crate) use_seq: u64,
    /// The block's bytes from its header to its last entry.
    pub(crate) buf: Vec<u8>,
    /// How many of `buf`'s bytes were handed to the flusher already.
    pub(crate) flushed_len: usize,
    /// Seq of its last entry (its `use_seq` while empty).
    pub(crate) last_seq: u64,
}

/// A full write block waiting for its last flush; its bytes are shared with the cache of
/// recent blocks, which serves reads until it is on the device (and for a while after).
#[derive(Debug)]
pub(crate) struct SealedBlock {
    pub(crate) block: u32,
    pub(crate) use_seq: u64,
    pub(crate) buf: Arc<Vec<u8>>,
    pub(crate) flushed_len: usize,
    pub(crate) last_seq: u64,
}

#[derive(Debug)]
pub(crate) struct Writer {
    pub(crate) next_seq: u64,
    pub(crate) current: Option<OpenBlock>,
    pub(crate) sealed: VecDeque<SealedBlock>,
    /// When the oldest entry not yet handed to the flusher was appended.
    pub(crate) unflushed_since: Option<Instant>,
}

/// A truncate mark as the storage keeps it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Mark {
    pub(crate) before_ms: u64,
    pub(crate) location: Location,
}

/// Counters of bytes and calls.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) client_bytes: AtomicU64,
    pub(crate) internal_bytes: AtomicU64,
    pub(crate) flushes: AtomicU64,
    pub(crate) defrag_blocks_read: AtomicU64,
    pub(crate) defrag_entries_copied: AtomicU64,
    pub(crate) blocks_freed: AtomicU64,
    pub(crate) tombstones_dropped: AtomicU64,
    pub(crate) reads_from_memory: AtomicU64,
    pub(crate) reads_from_device: AtomicU64,
    pub(crate) read_errors: AtomicU64,
}

#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) config: StorageConfig,
    pub(crate) devices: Vec<Arc<dyn Device>>,
    pub(crate) blocks_per_device: u32,
    pub(crate) blocks: Blocks,
    pub(crate) writer: Mutex<Writer>,
    pub(crate) durability: Arc<Durability>,
    pub(crate) tombs: Tombstones,
    /// Blocks sealed lately, by block: read from here, not the device.
    pub(crate) recent: RecentBlocks,
    /// Newest truncate cut-off per set name (empty = namespace); taken before the writer lock.
    pub(crate) marks: Mutex<HashMap<Vec<u8>, Mark>>,
    pub(crate) counters: Counters,
    pub(crate) failed: AtomicBool,
    pub(crate) shutdown: AtomicBool,
    /// Held while a flush takes and writes its job: one flush at a time, in order. Holds what
    /// was written and not yet synced.
    pub(crate) flush_lock: Mutex<Unsynced>,
}

/// One namespace's device storage.
#[derive(Debug)]
pub struct Storage {
    pub(crate) shared: Arc<Shared>,
    flusher: Mutex<Option<JoinHandle<()>>>,
}

/// What recovery found; see [`Storage::open`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Blocks that held a valid header.
    pub blocks_read: u64,
    /// Entries that passed their checksum.
    pub entries_read: u64,
    /// Blocks whose header was torn or corrupt: skipped.
    pub bad_block_headers: u64,
    /// Blocks where an entry failed its checksum: the rest of that block was skipped.
    pub corrupt_blocks: u64,
    /// Milliseconds recovery took.
    pub duration_ms: u64,
}

impl Shared {
    pub(crate) fn block_size(&self) -> u32 {
        self.config.write_block_size_bytes
    }

    /// The device and byte offset of `offset_bytes` into `block`.
    pub(crate) fn address(&self, block: u32, offset_bytes: usize) -> (&Arc<dyn Device>, u64) {
        let device = &self.devices[(block / self.blocks_per_device) as usize];
        let block_start = u64::from(block % self.blocks_per_device) * u64::from(self.block_size());
        (device, block_start + offset_bytes as u64)
    }

    fn check_usable(&self) -> Result<(), StorageError> {
        if self.shutdown.load(Ordering::Acquire) {
            return Err(StorageError::Failed("storage closed".to_owned()));
        }
        if self.failed.load(Ordering::Acquire) {
            let reason = self.durability.failure().unwrap_or_default();
            return Err(StorageError::Failed(reason));
        }
        Ok(())
    }

    /// Whether client writes must stop: too few free blocks left.
    fn stop_writes(&self) -> bool {
        let reserve = self.blocks.count() * usize::from(self.config.stop_writes_avail_pct) / 100;
        self.blocks.free_count() <= reserve
    }

    /// Appends an entry; returns its location and seq.
    pub(crate) fn append(
        &self,
        kind: EntryKind,
        digest: &DigestBytes,
        body: &(impl EntryBody + ?Sized),
        origin: Origin,
    ) -> Result<(Location, u64), StorageError> {
        self.check_usable()?;
        let len = format::entry_len_bytes(body.len_bytes());
        if len > self.block_size() as usize - BLOCK_HEADER_SIZE_BYTES - END_MARKER_SIZE_BYTES {
            return Err(StorageError::TooBig);
        }
        if origin == Origin::ClientWrite && self.stop_writes() {
            return Err(StorageError::OutOfSpace);
        }
        let mut writer = self.writer.lock();
        let fits = writer
            .current
            .as_ref()
            .is_some_and(|open| open.buf.len() + len <= self.block_size() as usize);
        if !fits {
            self.rotate(&mut writer)?;
        }
        let seq = writer.next_seq;
        writer.next_seq += 1;
        writer.unflushed_since.get_or_insert_with(Instant::now);
        let open = writer.current.as_mut().expect("rotate opened a block");
        let location = format::encode_entry(
            &mut open.buf,
            open.block,
            open.use_seq,
            seq,
            kind,
            digest,
            body,
        );
        open.last_seq = seq;
        // Counted before the writer lock is released, so the block cannot be sealed and
        // found empty in between.
        self.blocks.add_live(location);
        drop(writer);
        let counter = match origin {
            Origin::Internal => &self.counters.internal_bytes,
            _ => &self.counters.client_bytes,
        };
        counter.fetch_add(len as u64, Ordering::Relaxed);
        Ok((location, seq))
    }

    /// Seals the current block (if any) and opens a free one.
    fn rotate(&self, writer: &mut Writer) -> Result<(), StorageError> {
        if writer.sealed.len() >= self.config.write_queue_blocks_max as usize {
            return Err(StorageError::Overloaded);
        }
        let block = self.blocks.open().ok_or(StorageError::OutOfSpace)?;
        // What the cache holds of the block's previous use is nobody's any more.
        self.recent.forget(block);
        let use_seq = writer.next_seq;
        writer.next_seq += 1;
        self.blocks.set_use_seq(block, use_seq);
        let mut buf = Vec::with_capacity(self.block_size() as usize);
        format::encode_block_header(use_seq, self.block_size(), &mut buf);
        let opened = OpenBlock {
            block,
            use_seq,
            buf,
            flushed_len: 0,
            last_seq: use_seq,
        };
        if let Some(full) = writer.current.replace(opened) {
            let sealed = SealedBlock {
                block: full.block,
                use_seq: full.use_seq,
                buf: Arc::new(full.buf),
                flushed_len: full.flushed_len,
                last_seq: full.last_seq,
            };
            self.recent.sealed(sealed.block, Arc::clone(&sealed.buf));
            writer.sealed.push_back(sealed);
            self.durability.wakeup.raise(false);
        }
        Ok(())
    }

    /// The entry at `location` is no longer current.
    pub(crate) fn supersede(&self, location: Location) {
        self.blocks.remove_live(location);
    }

    /// A tombstone's body: its shadow seq (0 = the tombstone's own seq).
    fn tombstone_body(shadow_seq: u64) -> [u8; 8] {
        shadow_seq.to_le_bytes()
    }

    pub(crate) fn next_seq(&self) -> u64 {
        self.writer.lock().next_seq
    }
}

/// Who flushes write blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flushing {
    /// A background thread, as a server runs.
    Background,
    /// Only [`Storage::flush`], so that a test decides exactly what reaches the device when.
    Manual,
}

impl Storage {
    pub(crate) fn start(shared: Arc<Shared>, flushing: Flushing) -> Storage {
        let flusher = (flushing == Flushing::Background).then(|| {
            let flusher_shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("storage-flush".to_owned())
                .spawn(move || crate::flusher::run(&flusher_shared))
                .expect("the flusher thread starts")
        });
        Storage {
            shared,
            flusher: Mutex::new(flusher),
        }
    }

    /// Writes and syncs everything appended so far, on this thread (for [`Flushing::Manual`]).
    ///
    /// # Errors
    /// Failed, if a device call fails (writes stop, as with the background flusher).
    pub fn flush(&self) -> Result<(), StorageError> {
        crate::flusher::flush_now(&self.shared)
    }

    /// Appends a new version of the record at `digest`, which replaces `replaced` (the location
    /// of its previous version, if the index had one); returns the new location. Called under
    /// the record's partition lock.
    ///
    /// # Errors
    /// OutOfSpace (stop-writes), Overloaded (too many blocks waiting for the device), TooBig
    /// (larger than a write block), Failed (a device call failed earlier).
    pub fn write_record(
        &self,
        digest: &DigestBytes,
        body: &RecordBody<'_>,
        replaced: Option<Location>,
    ) -> Result<(Location, Option<DurablePoint>), StorageError> {
        let (location, seq) =
            self.shared
                .append(EntryKind::Record, digest, body, Origin::ClientWrite)?;
        self.after_new_version(digest, replaced);
        Ok((location, self.durable_point(seq)))
    }

    /// With `commit-to-device`, the point a client change appended at `seq` must reach before
    /// it is acknowledged.
    fn durable_point(&self, seq: u64) -> Option<DurablePoint> {
        self.shared
            .config
            .commit_to_device
            .then(|| DurablePoint::new(&self.shared.durability, seq))
    }

    /// Appends a tombstone for the record at `digest`, whose current version is at `replaced`.
    /// Called under the record's partition lock.
    ///
    /// # Errors
    /// As [`Storage::write_record`], except that stop-writes does not refuse a delete.
    pub fn delete_record(
        &self,
        digest: &DigestBytes,
        replaced: Option<Location>,
    ) -> Result<Option<DurablePoint>, StorageError> {
        let body = Shared::tombstone_body(0);
        let (location, seq) = self.shared.append(
            EntryKind::Tombstone,
            digest,
            &body[..],
            Origin::ClientDelete,
        )?;
        let tomb = Tomb {
            location,
            shadow_seq: seq,
        };
        if let Some(old) = self.shared.tombs.insert(*digest, tomb) {
            self.shared.supersede(old.location);
        }
        if let Some(replaced) = replaced {
            self.shared.supersede(replaced);
        }
        Ok(self.durable_point(seq))
    }

    /// The record at `location` expired and left the index: its entry now shadows its older
    /// versions until they are gone. Called under the record's partition lock.
    pub fn expired(&self, digest: &DigestBytes, location: Location) {
        self.shadow_with(digest, location);
    }

    /// The record at `location` left the index because a truncate covers it. The truncate's
    /// mark keeps its older versions of the same set away; if it may have older versions of
    /// another set (it was written again after a delete or an expiry: see `tombstones`), its
    /// entry shadows them until they are gone, as an expired record's does. Called under the
    /// record's partition lock.
    pub fn truncated(&self, digest: &DigestBytes, location: Location) {
        if self.shared.tombs.is_resurrectable(digest) {
            self.shadow_with(digest, location);
        } else {
            self.shared.supersede(location);
        }
    }

    /// The version just written for `digest` has an older last-update time than the one it
    /// replaced (the clock went back): a truncate could take it and not the older one, so the
    /// digest is marked resurrectable (see `tombstones`). Called under the record's partition
    /// lock.
    pub fn rewound(&self, digest: &DigestBytes) {
        self.shared
            .tombs
            .mark_resurrectable(*digest, self.shared.next_seq());
    }

    /// Remembers the entry at `location`, which left the index without a tombstone, as what
    /// keeps the older versions of `digest` away.
    fn shadow_with(&self, digest: &DigestBytes, location: Location) {
        let tomb = Tomb {
            location,
            // Conservative: every entry so far is older than this.
            shadow_seq: self.shared.next_seq(),
        };
        if let Some(old) = self.shared.tombs.insert(*digest, tomb) {
            self.shared.supersede(old.location);
        }
    }

    /// Records a truncate of `set_name` (empty = the namespace) before `before_ms` durably
    /// enough for a cold start to honour it: it is flushed before this returns.
    ///
    /// # Errors
    /// Overloaded, OutOfSpace or Failed, as for a write.
    pub fn truncate(&self, set_name: &[u8], before_ms: u64) -> Result<(), StorageError> {
        let mut marks = self.shared.marks.lock();
        if marks
            .get(set_name)
            .is_some_and(|mark| mark.before_ms >= before_ms)
        {
            // Covered by an earlier mark, which may not be durable yet (or may have failed).
            drop(marks);
            return self.flush();
        }
        let mut body = Vec::new();
        TruncateBody {
            before_ms,
            set_name: set_name.to_vec(),
        }
        .encode(&mut body);
        let (location, _) =
            self.shared
                .append(EntryKind::Truncate, &[0; 20], &body[..], Origin::Internal)?;
        let mark = Mark {
            before_ms,
            location,
        };
        if let Some(old) = marks.insert(set_name.to_vec(), mark) {
            self.shared.supersede(old.location);
        }
        drop(marks);
        self.flush()
    }

    /// Flushes everything and stops the flusher; later appends fail. Called by `Drop` too.
    pub fn close(&self) {
        self.shared.shutdown.store(true, Ordering::Release);
        self.shared.durability.wakeup.raise(true);
        if let Some(flusher) = self.flusher.lock().take()
            && flusher.join().is_err()
        {
            tracing::error!("the storage flusher panicked");
        }
    }

    /// Statistics.
    pub fn stats(&self) -> StorageStats {
        let shared = &self.shared;
        let block_count = shared.blocks.count() as u64;
        let block_size = u64::from(shared.block_size());
        let counters = &shared.counters;
        StorageStats {
            total_bytes: block_count * block_size,
            used_bytes: shared.blocks.used_bytes(),
            free_blocks: shared.blocks.free_count() as u64,
            total_blocks: block_count,
            write_queue_blocks: shared.writer.lock().sealed.len() as u64,
            defrag_queue_blocks: shared.blocks.defrag_queue_len(shared.config.defrag_lwm_pct)
                as u64,
            client_write_bytes: counters.client_bytes.load(Ordering::Relaxed),
            internal_write_bytes: counters.internal_bytes.load(Ordering::Relaxed),
            flushes: counters.flushes.load(Ordering::Relaxed),
            defrag_blocks_read: counters.defrag_blocks_read.load(Ordering::Relaxed),
            defrag_entries_copied: counters.defrag_entries_copied.load(Ordering::Relaxed),
            blocks_freed: counters.blocks_freed.load(Ordering::Relaxed),
            tombstones: shared.tombs.len() as u64,
            tombstones_dropped: counters.tombstones_dropped.load(Ordering::Relaxed),
            reads_from_memory: counters.reads_from_memory.load(Ordering::Relaxed),
            reads_from_device: counters.reads_from_device.load(Ordering::Relaxed),
            read_errors: counters.read_errors.load(Ordering::Relaxed),
            durable_seq: shared.durability.durable_seq(),
            failure: shared.durability.failure(),
        }
    }

    /// Whether client writes are refused: free blocks fell below `stop-writes-avail-pct`.
    pub fn stop_writes(&self) -> bool {
        self.shared.stop_writes()
    }

    /// Its configuration.
    pub fn config(&self) -> &StorageConfig {
        &self.shared.config
    }
}

impl Drop for Storage {
    fn drop(&mut self) {
        self.close();
    }
}

impl Storage {
    fn after_new_version(&self, digest: &DigestBytes, replaced: Option<Location>) {
        if let Some(tomb) = self.shared.tombs.new_version(digest) {
            self.shared.supersede(tomb.location);
        }
        if let Some(replaced) = replaced {
            self.shared.supersede(replaced);
        }
    }

    /// Copies a current record entry found by defragmentation to the write block; returns the
    /// copy's location. Called under the record's partition lock, after checking that the index
    /// still points at `entry`.
    ///
    /// # Errors
    /// As for a write (stop-writes aside: defragmentation may use the reserve).
    pub fn relocate_record(&self, entry: &Entry<'_>) -> Result<Location, StorageError> {
        let (location, _) = self.shared.append(
            EntryKind::Record,
            &entry.digest,
            entry.body,
            Origin::Internal,
        )?;
        self.shared.supersede(entry.location);
        self.count_copy();
        Ok(location)
    }

    /// Keeps the tombstone (or expired record) at `entry` if it is still needed, copying it
    /// forward as a tombstone, or lets it go. Called under the digest's partition lock, for an
    /// entry the index does not point at. Does nothing if `entry` is no tombstone.
    ///
    /// # Errors
    /// As [`Storage::relocate_record`].
    pub fn relocate_tombstone(&self, entry: &Entry<'_>) -> Result<(), StorageError> {
        let Some(tomb) = self.shared.tombs.get(&entry.digest) else {
            return Ok(());
        };
        if tomb.location != entry.location {
            return Ok(());
        }
        let oldest = self.shared.blocks.oldest_content();
        if oldest.outlived(tomb.shadow_seq) {
            if self.shared.tombs.remove(&entry.digest).is_some() {
                self.shared.supersede(entry.location);
                self.shared
                    .counters
                    .tombstones_dropped
                    .fetch_add(1, Ordering::Relaxed);
            }
            return Ok(());
        }
        let body = Shared::tombstone_body(tomb.shadow_seq);
        let (copy, _) = self.shared.append(
            EntryKind::Tombstone,
            &entry.digest,
            &body[..],
            Origin::Internal,
        )?;
        if self.shared.tombs.moved(&entry.digest, entry.location, copy) {
            self.shared.supersede(entry.location);
        } else {
            self.shared.supersede(copy);
        }
        self.count_copy();
        Ok(())
    }

    /// Copies the truncate mark at `entry` forward if it is the newest of its set.
    ///
    /// # Errors
    /// As [`Storage::relocate_record`].
    pub fn relocate_mark(&self, entry: &Entry<'_>) -> Result<(), StorageError> {
        let Some(body) = TruncateBody::decode(entry.body) else {
            return Ok(());
        };
        let mut marks = self.shared.marks.lock();
        let Some(mark) = marks.get_mut(&body.set_name) else {
            return Ok(());
        };
        if mark.location != entry.location {
            return Ok(());
        }
        let (copy, _) = self.shared.append(
            EntryKind::Truncate,
            &entry.digest,
            entry.body,
            Origin::Internal,
        )?;
        mark.location = copy;
        drop(marks);
        self.shared.supersede(entry.location);
        self.count_copy();
        Ok(())
    }

    fn count_copy(&self) {
        self.shared
            .counters
            .defrag_entries_copied
            .fetch_add(1, Ordering::Relaxed);
    }

    /// Drops every tombstone that nothing older is left to shadow (and every resurrectable
    /// mark nothing is left for); returns how many tombstones.
    pub fn drop_outlived_tombstones(&self) -> usize {
        let oldest = self.shared.blocks.oldest_content();
        let dropped = self
            .shared
            .tombs
            .drop_where(|shadow_seq| oldest.outlived(shadow_seq));
        for &location in &dropped {
            self.shared.supersede(location);
        }
        self.shared
            .counters
            .tombstones_dropped
            .fetch_add(dropped.len() as u64, Ordering::Relaxed);
        dropped.len()
    }
}
