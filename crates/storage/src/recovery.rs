//! Cold start: rebuilding what is current from the blocks on the devices, and reading blocks
//! back for defragmentation.
//!
//! Every block is read and its entries walked; for each digest the entry with the highest seq
//! wins, whatever block it is in (defragmentation copies carry new seqs, so a copy beats the
//! original, and a later write beats both). The engine hears of every entry that wins so far
//! ([`Recovered`]) and keeps the last it heard; the newest truncate mark per set is reported too.
//! A block whose header or an entry fails its checksum is read a second time (a bad read is not
//! bad data); if it fails again, what fails is skipped, logged and counted.
//!
//! Invariants:
//! - Nothing that failed a checksum reaches the engine.
//! - After recovery, `live_bytes` counts exactly the winning records, the tombstones still
//!   needed and the newest mark per set; `next_seq` is above every seq on the devices.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::blocks::Blocks;
use crate::config::StorageConfig;
use crate::device::Device;
use crate::durability::Durability;
use crate::flusher::Unsynced;
use crate::format::{
    self, BlockEnd, DigestBytes, Entry, EntryKind, HeaderError, Location, RecordBody, TruncateBody,
};
use crate::reads::RecentBlocks;
use crate::store::{Counters, Flushing, Mark, Shared, Storage, Writer};
use crate::tombstones::Tomb;
use crate::{RecoveryReport, StorageError};

/// What recovery tells the engine, in the order it finds it.
#[derive(Debug)]
pub enum Recovered<'a> {
    /// The newest version of this record so far: store it (replacing any earlier one).
    Record {
        /// The record.
        digest: DigestBytes,
        /// Where this version is; keep it in the index.
        location: Location,
        /// Its fields.
        body: RecordBody<'a>,
    },
    /// The newest version so far is a delete: forget the record.
    Deleted {
        /// The record.
        digest: DigestBytes,
    },
    /// Records of `set_name` (empty = all) last updated before `before_ms` were truncated.
    Truncated {
        /// The set.
        set_name: &'a [u8],
        /// The cut-off, Unix milliseconds.
        before_ms: u64,
    },
}

/// The newest entry seen for a digest.
#[derive(Clone, Copy, Debug)]
struct Newest {
    seq: u64,
    location: Location,
    /// For a tombstone, its shadow seq; 0 for a record.
    shadow_seq: u64,
    /// The sets of the digest's records seen so far, newest or not.
    sets: RecordSets,
    /// The newest entry's last-update time (0 for a tombstone).
    last_update_ms: u64,
    /// The latest last-update time of the digest's records seen so far, newest or not.
    latest_update_ms: u64,
}

impl Newest {
    /// Whether an older version may outlive a truncate that takes the newest: it names another
    /// set, or a later last-update time (see `tombstones`).
    fn resurrectable(&self) -> bool {
        self.shadow_seq == 0
            && (self.sets == RecordSets::Several || self.latest_update_ms > self.last_update_ms)
    }
}

/// Which sets a digest's records on the devices name: one, or more (see `tombstones`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RecordSets {
    None,
    One(u32),
    Several,
}

impl RecordSets {
    fn with(self, set: u32) -> RecordSets {
        match self {
            RecordSets::None => RecordSets::One(set),
            RecordSets::One(seen) if seen == set => self,
            _ => RecordSets::Several,
        }
    }
}

struct Scan<'v> {
    newest: HashMap<DigestBytes, Newest>,
    /// Set names seen in records, numbered for [`RecordSets`].
    set_numbers: HashMap<Vec<u8>, u32>,
    marks: HashMap<Vec<u8>, (u64, Mark)>,
    max_seq: u64,
    report: RecoveryReport,
    visit: &'v mut dyn FnMut(Recovered<'_>),
}

impl Storage {
    /// Opens storage on `devices` (one per configured file, each at least `file_size_bytes`),
    /// reporting every current entry to `visit` as it rebuilds its state, then starts the
    /// flusher.
    ///
    /// # Errors
    /// A configuration the devices cannot hold, or a device that cannot be read.
    pub fn open(
        config: StorageConfig,
        devices: Vec<Arc<dyn Device>>,
        flushing: Flushing,
        visit: &mut dyn FnMut(Recovered<'_>),
    ) -> Result<(Storage, RecoveryReport), StorageError> {
        config.validate().map_err(StorageError::Config)?;
        if devices.len() != config.files.len() {
            return Err(StorageError::Config(format!(
                "{} files configured but {} devices given",
                config.files.len(),
                devices.len()
            )));
        }
        if let Some(small) = devices
            .iter()
            .find(|d| d.size_bytes() < config.file_size_bytes)
        {
            return Err(StorageError::Config(format!(
                "{} holds {} bytes, less than filesize",
                small.name(),
                small.size_bytes()
            )));
        }
        let blocks_per_device = config.file_size_bytes / u64::from(config.write_block_size_bytes);
        let block_count = blocks_per_device * devices.len() as u64;
        if block_count > format::BLOCK_COUNT_MAX {
            return Err(StorageError::Config(format!(
                "at most {} write blocks are supported; use a larger write-block-size",
                format::BLOCK_COUNT_MAX
            )));
        }
        let shared = Shared {
            blocks: Blocks::new(block_count as usize, config.write_block_size_bytes),
            recent: RecentBlocks::new(config.post_write_queue_blocks as usize),
            config,
            devices,
            blocks_per_device: blocks_per_device as u32,
            writer: Mutex::new(Writer {
                next_seq: 1,
                current: None,
                sealed: Default::default(),
                unflushed_since: None,
            }),
            durability: Arc::new(Durability::default()),
            tombs: Default::default(),
            marks: Default::default(),
            counters: Counters::default(),
            failed: AtomicBool::new(false),
            shutdown: AtomicBool::new(false),
            flush_lock: Mutex::new(Unsynced::default()),
        };
        let started = Instant::now();
        let mut scan = Scan {
            newest: HashMap::new(),
            set_numbers: HashMap::new(),
            marks: HashMap::new(),
            max_seq: 0,
            report: RecoveryReport::default(),
            visit,
        };
        scan_blocks(&shared, &mut scan)?;
        finish(&shared, scan.newest, scan.marks, scan.max_seq);
        let mut report = scan.report;
        report.duration_ms = started.elapsed().as_millis() as u64;
        let storage = Storage::start(Arc::new(shared), flushing);
        storage.drop_outlived_tombstones();
        Ok((storage, report))
    }

    /// Reads `block` back for defragmentation.
    ///
    /// # Errors
    /// Failed when the device cannot be read.
    pub fn read_block(&self, block: u32) -> Result<BlockImage, StorageError> {
        let shared = &self.shared;
        let bytes = read_raw(shared, block)?;
        shared
            .counters
            .defrag_blocks_read
            .fetch_add(1, Ordering::Relaxed);
        let use_seq = format::decode_block_header(&bytes, shared.block_size()).ok();
        Ok(BlockImage {
            block,
            use_seq,
            bytes,
        })
    }

    /// Up to `max` blocks whose live data fell below `defrag-lwm-pct`, emptiest first, once
    /// fewer than [`StorageConfig::defrag_start_pct`] of the blocks are free (none before). The caller
    /// copies their current entries elsewhere, then calls [`Storage::finish_defrag`].
    pub fn defrag_candidates(&self, max: usize) -> Vec<u32> {
        let shared = &self.shared;
        let start_below = shared.blocks.count() * usize::from(shared.config.defrag_start_pct());
        if shared.blocks.free_count() * 100 >= start_below {
            return Vec::new();
        }
        self.shared
            .blocks
            .take_defrag_candidates(self.shared.config.defrag_lwm_pct, max)
    }

    /// Ends the defragmentation of `block`: if nothing current is left in it, it is freed once
    /// the copies are durable (returns true); otherwise (a copy failed) it stays in use.
    pub fn finish_defrag(&self, block: u32) -> bool {
        let after_seq = self.shared.next_seq() - 1;
        self.shared.blocks.finish_defrag(block, after_seq)
    }
}

/// A block read back from its device.
#[derive(Debug)]
pub struct BlockImage {
    block: u32,
    use_seq: Option<u64>,
    bytes: Vec<u8>,
}

impl BlockImage {
    /// Its entries that pass their checksums, in order.
    pub fn entries(&self) -> Vec<Entry<'_>> {
        let mut entries = Vec::new();
        if let Some(use_seq) = self.use_seq {
            format::walk_entries(self.block, use_seq, &self.bytes, |e| entries.push(e));
        }
        entries
    }
}

fn read_raw(shared: &Shared, block: u32) -> Result<Vec<u8>, StorageError> {
    let mut bytes = vec![0; shared.block_size() as usize];
    let (device, offset) = shared.address(block, 0);
    device
        .read_at(offset, &mut bytes)
        .map_err(|e| StorageError::Failed(format!("read of {} at {offset}: {e}", device.name())))?;
    Ok(bytes)
}

/// Whether `block` was never written: its header is all zeros (read alone, so that a large,
/// mostly empty file starts quickly).
fn block_is_blank(shared: &Shared, block: u32) -> Result<bool, StorageError> {
    let mut header = [0; format::BLOCK_HEADER_SIZE_BYTES];
    let (device, offset) = shared.address(block, 0);
    device
        .read_at(offset, &mut header)
        .map_err(|e| StorageError::Failed(format!("read of {} at {offset}: {e}", device.name())))?;
    Ok(header.iter().all(|&b| b == 0))
}

fn scan_blocks(shared: &Shared, scan: &mut Scan<'_>) -> Result<(), StorageError> {
    let block_count = shared.blocks.count() as u32;
    let mut last_report = Instant::now();
    for block in 0..block_count {
        if last_report.elapsed() >= Duration::from_secs(2) {
            last_report = Instant::now();
            tracing::info!(
                "cold start: {block} of {block_count} blocks read ({}%), {} entries",
                u64::from(block) * 100 / u64::from(block_count),
                scan.report.entries_read
            );
        }
        scan_block(shared, block, scan)?;
    }
    Ok(())
}

fn scan_block(shared: &Shared, block: u32, scan: &mut Scan<'_>) -> Result<(), StorageError> {
    let block_size = shared.block_size();
    if block_is_blank(shared, block)? {
        return Ok(());
    }
    let mut bytes = read_raw(shared, block)?;
    let mut header = format::decode_block_header(&bytes, block_size);
    let mut end = header.map(|use_seq| format::walk_entries(block, use_seq, &bytes, |_| {}));
    let suspect =
        matches!(header, Err(HeaderError::Bad)) || matches!(end, Ok(BlockEnd::Corrupt { .. }));
    if suspect {
        // Read again: a flipped bit in transit is not corruption on the device.
        bytes = read_raw(shared, block)?;
        header = format::decode_block_header(&bytes, block_size);
        end = header.map(|use_seq| format::walk_entries(block, use_seq, &bytes, |_| {}));
    }
    let use_seq = match header {
        Ok(use_seq) => use_seq,
        Err(HeaderError::Blank) => return Ok(()),
        Err(HeaderError::Bad) => {
            tracing::warn!(
                block,
                "cold start: block header failed its checksum; block skipped"
            );
            scan.report.bad_block_headers += 1;
            return Ok(());
        }
    };
    if let Ok(BlockEnd::Corrupt { offset_bytes }) = end {
        tracing::warn!(
            block,
            offset_bytes,
            "cold start: entry failed its checksum (torn or corrupt); rest of block skipped"
        );
        scan.report.corrupt_blocks += 1;
    }
    scan.report.blocks_read += 1;
    scan.max_seq = scan.max_seq.max(use_seq);
    shared.blocks.recovered(block, use_seq);
    format::walk_entries(block, use_seq, &bytes, |entry| scan.entry(shared, &entry));
    Ok(())
}

impl Scan<'_> {
    fn entry(&mut self, shared: &Shared, entry: &Entry<'_>) {
        self.report.entries_read += 1;
        self.max_seq = self.max_seq.max(entry.seq);
        match entry.kind {
            EntryKind::Truncate => self.mark(shared, entry),
            EntryKind::Record | EntryKind::Tombstone => self.version(shared, entry),
        }
    }

    fn set_number(&mut self, set_name: &[u8]) -> u32 {
        if let Some(&number) = self.set_numbers.get(set_name) {
            return number;
        }
        let number = self.set_numbers.len() as u32;
        self.set_numbers.insert(set_name.to_vec(), number);
        number
    }

    fn version(&mut self, shared: &Shared, entry: &Entry<'_>) {
        let shadow_seq = match entry.kind {
            EntryKind::Tombstone => match format::decode_tombstone(entry.body) {
                Some(0) => entry.seq,
                Some(shadow) => shadow,
                None => return,
            },
            _ => 0,
        };
        let record = match entry.kind {
            EntryKind::Record => match RecordBody::decode(entry.body) {
                Some(body) => Some(body),
                None => return,
            },
            _ => None,
        };
        let set = record.as_ref().map(|body| self.set_number(body.set_name));
        let last_update_ms = record.as_ref().map_or(0, |body| body.last_update_ms);
        let (mut sets, mut latest_update_ms) = (RecordSets::None, last_update_ms);
        if let Some(older) = self.newest.get_mut(&entry.digest) {
            if let Some(set) = set {
                older.sets = older.sets.with(set);
            }
            older.latest_update_ms = older.latest_update_ms.max(last_update_ms);
            if older.seq > entry.seq {
                return;
            }
            (sets, latest_update_ms) = (older.sets, older.latest_update_ms);
            shared.blocks.remove_live(older.location);
        } else if let Some(set) = set {
            sets = sets.with(set);
        }
        shared.blocks.add_live(entry.location);
        let newest = Newest {
            seq: entry.seq,
            location: entry.location,
            shadow_seq,
            sets,
            last_update_ms,
            latest_update_ms,
        };
        self.newest.insert(entry.digest, newest);
        (self.visit)(match record {
            Some(body) => Recovered::Record {
                digest: entry.digest,
                location: entry.location,
                body,
            },
            None => Recovered::Deleted {
                digest: entry.digest,
            },
        });
    }

    fn mark(&mut self, shared: &Shared, entry: &Entry<'_>) {
        let Some(body) = TruncateBody::decode(entry.body) else {
            return;
        };
        (self.visit)(Recovered::Truncated {
            set_name: &body.set_name,
            before_ms: body.before_ms,
        });
        let mark = Mark {
            before_ms: body.before_ms,
            location: entry.location,
        };
        match self.marks.get(&body.set_name) {
            Some((seq, _)) if *seq > entry.seq => return,
            Some((_, older)) => shared.blocks.remove_live(older.location),
            None => {}
        }
        shared.blocks.add_live(entry.location);
        self.marks.insert(body.set_name, (entry.seq, mark));
    }
}

/// Installs what the scan found: tombstones, resurrectable digests, marks, the next seq, the
/// blocks' states.
fn finish(
    shared: &Shared,
    newest: HashMap<DigestBytes, Newest>,
    marks: HashMap<Vec<u8>, (u64, Mark)>,
    max_seq: u64,
) {
    for (digest, newest) in newest {
        if newest.shadow_seq != 0 {
            let tomb = Tomb {
                location: newest.location,
                shadow_seq: newest.shadow_seq,
            };
            shared.tombs.insert(digest, tomb);
        } else if newest.resurrectable() {
            shared.tombs.mark_resurrectable(digest, newest.seq);
        }
    }
    let mut kept_marks = shared.marks.lock();
    for (set_name, (_, mark)) in marks {
        kept_marks.insert(set_name, mark);
    }
    drop(kept_marks);
    shared.writer.lock().next_seq = max_seq + 1;
    shared.blocks.settle_after_recovery();
}
