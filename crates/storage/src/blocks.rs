//! The block table: which blocks are free, being written, in use, being defragmented or
//! waiting to be released, how many live bytes each holds, and the age of what is on disk.
//!
//! Invariants:
//! - A block is in exactly one state; `free` holds exactly the blocks whose state is `Free`.
//! - `live_bytes[b]` is the sum of the lengths of the entries in block `b` that are current:
//!   the version the index points at, a tombstone still needed, a truncate mark.
//! - `use_seq[b]` is the `use_seq` of the block's current (or last) use: the seed of its
//!   entries' checksums, which a read of one entry needs.
//! - `disk_use_seq[b]` is the `use_seq` of the content durably on disk in `b` (0 = nothing
//!   valid): a freed block keeps its old value until new content is durably written over it,
//!   because until then a cold start would still read the old content.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

use parking_lot::Mutex;

use crate::format::Location;

/// What a block is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum State {
    /// Holds nothing current; may be opened for writing.
    Free,
    /// Being filled, or full and waiting for its last flush.
    Open,
    /// Durable, holding current entries.
    Used,
    /// Its current entries are being copied elsewhere.
    Defrag,
    /// Emptied by defragmentation; free once every copy made before `after_seq` is durable.
    Releasing {
        /// The last seq appended when its defragmentation finished.
        after_seq: u64,
    },
}

#[derive(Debug)]
struct Table {
    state: Vec<State>,
    disk_use_seq: Vec<u64>,
    /// Free blocks by the age of what they hold, oldest first: reusing those first lets
    /// tombstones go sooner.
    free: BTreeSet<(u64, u32)>,
}

/// Every block's state and live bytes.
#[derive(Debug)]
pub(crate) struct Blocks {
    block_size_bytes: u32,
    live_bytes: Box<[AtomicU32]>,
    use_seq: Box<[AtomicU64]>,
    free_count: AtomicUsize,
    table: Mutex<Table>,
}

impl Blocks {
    /// `count` blocks, every one free and blank.
    pub(crate) fn new(count: usize, block_size_bytes: u32) -> Blocks {
        let table = Table {
            state: vec![State::Free; count],
            disk_use_seq: vec![0; count],
            free: (0..count).map(|b| (0, b as u32)).collect(),
        };
        Blocks {
            block_size_bytes,
            live_bytes: (0..count).map(|_| AtomicU32::new(0)).collect(),
            use_seq: (0..count).map(|_| AtomicU64::new(0)).collect(),
            free_count: AtomicUsize::new(count),
            table: Mutex::new(table),
        }
    }

    pub(crate) fn count(&self) -> usize {
        self.live_bytes.len()
    }

    pub(crate) fn free_count(&self) -> usize {
        self.free_count.load(Ordering::Relaxed)
    }

    /// An entry at `location` became current.
    pub(crate) fn add_live(&self, location: Location) {
        let len = location.len_bytes() as u32;
        self.live_bytes[location.block() as usize].fetch_add(len, Ordering::Relaxed);
    }

    /// The entry at `location` is no longer current.
    ///
    /// # Panics
    /// If that would take the block below zero live bytes: an entry was superseded twice.
    pub(crate) fn remove_live(&self, location: Location) {
        let len = location.len_bytes() as u32;
        let before = self.live_bytes[location.block() as usize].fetch_sub(len, Ordering::Relaxed);
        assert!(before >= len, "block live bytes underflow at {location:?}");
    }

    /// `block` was opened for its use `use_seq`.
    pub(crate) fn set_use_seq(&self, block: u32, use_seq: u64) {
        self.use_seq[block as usize].store(use_seq, Ordering::Relaxed);
    }

    /// The `use_seq` of `block`'s current use. Relaxed is enough: whoever reads an entry found
    /// its location under the lock its writer held, after the block was opened.
    pub(crate) fn use_seq(&self, block: u32) -> u64 {
        self.use_seq[block as usize].load(Ordering::Relaxed)
    }

    pub(crate) fn live_bytes(&self, block: u32) -> u32 {
        self.live_bytes[block as usize].load(Ordering::Relaxed)
    }

    /// Sum of live bytes over every block.
    pub(crate) fn used_bytes(&self) -> u64 {
        self.live_bytes
            .iter()
            .map(|b| u64::from(b.load(Ordering::Relaxed)))
            .sum()
    }

    /// Records what recovery found on disk in `block`.
    pub(crate) fn recovered(&self, block: u32, disk_use_seq: u64) {
        let mut table = self.table.lock();
        let b = block as usize;
        let old = table.disk_use_seq[b];
        table.free.remove(&(old, block));
        table.disk_use_seq[b] = disk_use_seq;
        table.free.insert((disk_use_seq, block));
        self.set_use_seq(block, disk_use_seq);
    }

    /// After recovery: blocks holding live entries are in use, the others free.
    pub(crate) fn settle_after_recovery(&self) {
        let mut table = self.table.lock();
        let table = &mut *table;
        for b in 0..table.state.len() {
            if self.live_bytes[b].load(Ordering::Relaxed) > 0 {
                table.free.remove(&(table.disk_use_seq[b], b as u32));
                table.state[b] = State::Used;
            }
        }
        self.free_count.store(table.free.len(), Ordering::Relaxed);
    }

    /// Takes the free block holding the oldest content, if any, and marks it open.
    pub(crate) fn open(&self) -> Option<u32> {
        let mut table = self.table.lock();
        let (_, block) = table.free.pop_first()?;
        table.state[block as usize] = State::Open;
        self.free_count.store(table.free.len(), Ordering::Relaxed);
        Some(block)
    }

    /// New content was durably written at the start of `block`.
    pub(crate) fn first_flush_durable(&self, block: u32, use_seq: u64) {
        self.table.lock().disk_use_seq[block as usize] = use_seq;
    }

    /// A full block's last flush is durable: it is in use (or free, if nothing in it is
    /// current any more).
    pub(crate) fn sealed_durable(&self, block: u32) {
        let mut table = self.table.lock();
        assert_eq!(table.state[block as usize], State::Open);
        table.state[block as usize] = State::Used;
        if self.live_bytes(block) == 0 {
            self.free_locked(&mut table, block);
        }
    }

    /// Up to `max` blocks in use whose live bytes fell below `lwm_pct`, emptiest first;
    /// they move to the defrag state.
    pub(crate) fn take_defrag_candidates(&self, lwm_pct: u8, max: usize) -> Vec<u32> {
        let threshold = u64::from(self.block_size_bytes) * u64::from(lwm_pct) / 100;
        let mut table = self.table.lock();
        let mut candidates: Vec<(u32, u32)> = (0..table.state.len())
            .filter(|&b| table.state[b] == State::Used)
            .map(|b| (self.live_bytes[b].load(Ordering::Relaxed), b as u32))
            .filter(|&(live, _)| u64::from(live) < threshold)
            .collect();
        candidates.sort_unstable();
        candidates.truncate(max);
        for &(_, block) in &candidates {
            table.state[block as usize] = State::Defrag;
        }
        candidates.into_iter().map(|(_, block)| block).collect()
    }

    /// How many blocks in use are below `lwm_pct` (Aerospike's `defrag_q`).
    pub(crate) fn defrag_queue_len(&self, lwm_pct: u8) -> usize {
        let threshold = u64::from(self.block_size_bytes) * u64::from(lwm_pct) / 100;
        let table = self.table.lock();
        (0..table.state.len())
            .filter(|&b| table.state[b] == State::Used)
            .filter(|&b| u64::from(self.live_bytes[b].load(Ordering::Relaxed)) < threshold)
            .count()
    }

    /// Defragmentation copied everything current out of `block`; it becomes free once every
    /// entry appended up to `after_seq` is durable. If something current is still in it (a
    /// copy failed), it goes back to use instead.
    pub(crate) fn finish_defrag(&self, block: u32, after_seq: u64) -> bool {
        let mut table = self.table.lock();
        assert_eq!(table.state[block as usize], State::Defrag);
        let emptied = self.live_bytes(block) == 0;
        table.state[block as usize] = if emptied {
            State::Releasing { after_seq }
        } else {
            State::Used
        };
        emptied
    }

    /// Frees the defragmented blocks whose copies are all durable now; returns how many.
    pub(crate) fn release_durable(&self, durable_seq: u64) -> usize {
        let mut table = self.table.lock();
        let releasable: Vec<u32> = (0..table.state.len())
            .filter(|&b| matches!(table.state[b], State::Releasing { after_seq } if after_seq <= durable_seq))
            .map(|b| b as u32)
            .collect();
        for &block in &releasable {
            self.free_locked(&mut table, block);
        }
        releasable.len()
    }

    fn free_locked(&self, table: &mut Table, block: u32) {
        table.state[block as usize] = State::Free;
        table
            .free
            .insert((table.disk_use_seq[block as usize], block));
        self.free_count.store(table.free.len(), Ordering::Relaxed);
    }

    /// The smallest `disk_use_seq` over blocks holding content: what a tombstone must outlive
    /// (see `Tombstones`).
    /// A block being written counts from its opening, before anything of it is durable: its
    /// entries will be on disk once flushed (counting only durable content let a tombstone go
    /// while the version it shadows still waited in an unflushed block, which a cold start
    /// after that flush would have served again).
    pub(crate) fn oldest_content(&self) -> OldestContent {
        let table = self.table.lock();
        let durable = table.disk_use_seq.iter().copied().filter(|&seq| seq != 0);
        let being_used = (0..table.state.len())
            .filter(|&b| table.state[b] != State::Free)
            .map(|b| self.use_seq[b].load(Ordering::Relaxed));
        let oldest_seq = durable.chain(being_used).min().unwrap_or(u64::MAX);
        OldestContent { oldest_seq }
    }
}

/// The oldest content on disk (see [`Blocks::oldest_content`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct OldestContent {
    oldest_seq: u64,
}

impl OldestContent {
    /// Whether no block can hold a version older than `shadow_seq`: every block's content
    /// was opened at or after it. A tombstone's own block never qualifies (it was opened
    /// before the tombstone), so a tombstone is copied forward at least once before it goes:
    /// dropping it where an older version sits earlier in the same block would let a torn
    /// reuse of that block (new header lost, old entries kept up to the torn part) serve the
    /// older version.
    pub(crate) fn outlived(&self, shadow_seq: u64) -> bool {
        self.oldest_seq >= shadow_seq
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_cycle_through_their_states() {
        let blocks = Blocks::new(3, 64 * 1024);
        let block = blocks.open().expect("free block");
        assert_eq!(blocks.free_count(), 2);
        let location = Location::new(block, 32, 64);
        blocks.add_live(location);
        blocks.first_flush_durable(block, 5);
        blocks.sealed_durable(block);
        assert_eq!(blocks.take_defrag_candidates(50, 10), vec![block]);
        blocks.remove_live(location);
        assert!(blocks.finish_defrag(block, 9));
        assert_eq!(blocks.release_durable(8), 0);
        assert_eq!(blocks.release_durable(9), 1);
        assert_eq!(blocks.free_count(), 3);
    }

    #[test]
    fn free_blocks_with_the_oldest_content_are_reused_first() {
        let blocks = Blocks::new(3, 64 * 1024);
        blocks.recovered(0, 30);
        blocks.recovered(1, 10);
        blocks.recovered(2, 20);
        blocks.settle_after_recovery();
        assert_eq!(blocks.open(), Some(1));
        assert_eq!(blocks.open(), Some(2));
    }

    #[test]
    fn a_tombstone_outlives_only_content_newer_than_it_everywhere() {
        let blocks = Blocks::new(3, 64 * 1024);
        blocks.recovered(0, 10);
        blocks.recovered(1, 20);
        let oldest = blocks.oldest_content();
        assert!(!oldest.outlived(15), "block 0 may hold an older version");
        assert!(oldest.outlived(10));
        blocks.first_flush_durable(0, 30);
        assert!(blocks.oldest_content().outlived(20));
        assert!(!blocks.oldest_content().outlived(21));
    }

    /// The story: records were written into a block not flushed yet, one was deleted, and a
    /// defragmentation pass ran before the flush. With only durable content counted, nothing
    /// was older than the tombstone, so it was dropped; the flush then put the deleted
    /// version on disk with nothing shadowing it (CI: `tombstones` 0 after 100 deletes).
    #[test]
    fn content_not_yet_flushed_keeps_a_newer_tombstone() {
        let blocks = Blocks::new(3, 64 * 1024);
        let block = blocks.open().expect("free block");
        blocks.set_use_seq(block, 5);
        let oldest = blocks.oldest_content();
        assert!(
            !oldest.outlived(10),
            "block {block} will hold versions from seq 5"
        );
        assert!(oldest.outlived(5));
    }

    #[test]
    #[should_panic(expected = "underflow")]
    fn superseding_twice_is_caught() {
        let blocks = Blocks::new(1, 64 * 1024);
        let location = Location::new(0, 32, 64);
        blocks.add_live(location);
        blocks.remove_live(location);
        blocks.remove_live(location);
    }
}
