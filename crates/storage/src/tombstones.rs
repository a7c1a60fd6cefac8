//! Tombstones: what keeps a deleted record deleted across a cold start.
//!
//! A deleted record's older versions may still lie in blocks not yet rewritten; a cold start
//! would bring the newest of them back unless something newer shadows it. That something is a
//! tombstone entry (written by a delete), or the record's own last version when it expired (an
//! expired newest version is dropped at a cold start, and shadows the older ones just as well).
//! Each is remembered here with its location, so defragmentation keeps it (copying a tombstone
//! forward) for as long as it is needed, and no longer: once no block holds content older
//! than its `shadow_seq` ([`crate::blocks::OldestContent::outlived`]), nothing is left to
//! shadow and it is dropped. That is never so in the tombstone's own block (opened before it),
//! so every tombstone is copied forward once before it can go.
//!
//! Invariants:
//! - A digest has at most one tombstone here; its location's bytes count as live in its block.
//! - Every change for a digest happens under that digest's partition lock in the engine, or
//!   atomically here (a drop removes only the very entry it examined), so a tombstone is never
//!   superseded twice.

use std::collections::HashMap;

use parking_lot::Mutex;

use crate::format::{DigestBytes, Location};

const SHARDS: usize = 64;

/// A remembered tombstone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Tomb {
    /// The entry that shadows older versions: a tombstone, or an expired record.
    pub(crate) location: Location,
    /// Every version older than this is deleted.
    pub(crate) shadow_seq: u64,
}

/// The tombstones of one storage, sharded by digest.
#[derive(Debug)]
pub(crate) struct Tombstones {
    shards: Box<[Mutex<HashMap<DigestBytes, Tomb>>]>,
}

impl Default for Tombstones {
    fn default() -> Self {
        Tombstones {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
        }
    }
}

impl Tombstones {
    fn shard(&self, digest: &DigestBytes) -> &Mutex<HashMap<DigestBytes, Tomb>> {
        // Digests are uniform; their last byte is not used for partitioning.
        &self.shards[usize::from(digest[19]) % SHARDS]
    }

    /// Remembers `tomb` for `digest`; returns the one it replaces.
    pub(crate) fn insert(&self, digest: DigestBytes, tomb: Tomb) -> Option<Tomb> {
        self.shard(&digest).lock().insert(digest, tomb)
    }

    /// Forgets the tombstone of `digest` (a new version was written); returns it.
    pub(crate) fn remove(&self, digest: &DigestBytes) -> Option<Tomb> {
        self.shard(digest).lock().remove(digest)
    }

    pub(crate) fn get(&self, digest: &DigestBytes) -> Option<Tomb> {
        self.shard(digest).lock().get(digest).copied()
    }

    /// Replaces the tombstone of `digest` at `from` by one at `to`; false if it changed since.
    pub(crate) fn moved(&self, digest: &DigestBytes, from: Location, to: Location) -> bool {
        let mut shard = self.shard(digest).lock();
        match shard.get_mut(digest) {
            Some(tomb) if tomb.location == from => {
                tomb.location = to;
                true
            }
            _ => false,
        }
    }

    /// Removes every tombstone for which `outlived` holds; returns their locations.
    pub(crate) fn drop_where(&self, outlived: impl Fn(&Tomb) -> bool) -> Vec<Location> {
        let mut dropped = Vec::new();
        for shard in &self.shards {
            shard.lock().retain(|_, tomb| {
                let keep = !outlived(tomb);
                if !keep {
                    dropped.push(tomb.location);
                }
                keep
            });
        }
        dropped
    }

    pub(crate) fn len(&self) -> usize {
        self.shards.iter().map(|shard| shard.lock().len()).sum()
    }
}
