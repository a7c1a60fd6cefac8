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
use std::hash::{BuildHasher, Hasher, RandomState};

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

type Shard = HashMap<DigestBytes, Tomb, DigestHashing>;

/// The tombstones of one storage, sharded by digest.
#[derive(Debug)]
pub(crate) struct Tombstones {
    shards: Box<[Mutex<Shard>]>,
}

impl Default for Tombstones {
    fn default() -> Self {
        let hashing = DigestHashing::new();
        Tombstones {
            shards: (0..SHARDS)
                .map(|_| Mutex::new(HashMap::with_hasher(hashing)))
                .collect(),
        }
    }
}

/// Hashes a digest by its bytes 11..19 mixed with a per-process seed: a digest is a RIPEMD-160
/// output, uniform already, so SipHash over all of it (checked on every write) buys nothing;
/// the seeded multiply keeps chosen keys from aiming at one bucket.
#[derive(Clone, Copy, Debug)]
struct DigestHashing {
    seed: u64,
}

impl DigestHashing {
    fn new() -> DigestHashing {
        DigestHashing {
            seed: RandomState::new().hash_one(0u64) | 1,
        }
    }
}

impl BuildHasher for DigestHashing {
    type Hasher = DigestHasher;

    fn build_hasher(&self) -> DigestHasher {
        DigestHasher {
            seed: self.seed,
            hash: 0,
        }
    }
}

struct DigestHasher {
    seed: u64,
    hash: u64,
}

impl Hasher for DigestHasher {
    fn write(&mut self, bytes: &[u8]) {
        // A digest arrives whole (its length comes through `write_usize`, ignored).
        let mut word = [0; 8];
        let tail = bytes.len().saturating_sub(9);
        let take = bytes.len().min(8);
        word[..take].copy_from_slice(&bytes[tail..tail + take]);
        let mixed = u128::from(u64::from_le_bytes(word) ^ self.hash) * u128::from(self.seed);
        self.hash = (mixed as u64) ^ ((mixed >> 64) as u64);
    }

    fn write_usize(&mut self, _len: usize) {}

    fn finish(&self) -> u64 {
        self.hash
    }
}

impl Tombstones {
    fn shard(&self, digest: &DigestBytes) -> &Mutex<Shard> {
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
