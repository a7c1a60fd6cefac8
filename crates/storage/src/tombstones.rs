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
//! A truncate's mark shadows only versions of its own set. A record keeps its set while it
//! lives (the engine refuses a write naming another), but once deleted or expired it may be
//! written again, by digest, in another set; its tombstone is then forgotten (the new version
//! shadows the old ones) and the digest is marked *resurrectable*: should a truncate take the
//! new version, that version must stay as the shadow ([`crate::Storage::truncated`]), or
//! defragmentation could drop it and a cold start serve an older version of the other set. A
//! cold start marks the digests it finds with records of more than one set. The same holds
//! within one set when the clock went back between two versions: a truncate can take the newer
//! version and not the older, so such a digest is marked too ([`crate::Storage::rewound`]; a
//! cold start marks a digest whose newest record is not its latest by last-update time). A mark goes, as a
//! tombstone does, once nothing older than the versions it was about is left on the devices.
//!
//! Invariants:
//! - A digest has at most one tombstone here; its location's bytes count as live in its block.
//! - A digest with a tombstone is not marked resurrectable (the tombstone shadows all).
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

/// One shard: tombstones, and the digests marked resurrectable (see the module docs).
#[derive(Debug)]
struct Shard {
    tombs: HashMap<DigestBytes, Tomb, DigestHashing>,
    /// Each with the seq every version it is about is older than.
    resurrectable: HashMap<DigestBytes, u64, DigestHashing>,
}

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
                .map(|_| {
                    Mutex::new(Shard {
                        tombs: HashMap::with_hasher(hashing),
                        resurrectable: HashMap::with_hasher(hashing),
                    })
                })
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

    /// Remembers `tomb` for `digest` (it shadows every older version, so the digest is no
    /// longer resurrectable); returns the one it replaces.
    pub(crate) fn insert(&self, digest: DigestBytes, tomb: Tomb) -> Option<Tomb> {
        let mut shard = self.shard(&digest).lock();
        shard.resurrectable.remove(&digest);
        shard.tombs.insert(digest, tomb)
    }

    /// Forgets the tombstone of `digest` because a new version was written, marking the digest
    /// resurrectable if it had one; returns it.
    pub(crate) fn new_version(&self, digest: &DigestBytes) -> Option<Tomb> {
        let mut shard = self.shard(digest).lock();
        let tomb = shard.tombs.remove(digest);
        if let Some(tomb) = tomb {
            shard.resurrectable.insert(*digest, tomb.shadow_seq);
        }
        tomb
    }

    /// Drops the tombstone of `digest` (nothing older is left to shadow); returns it.
    pub(crate) fn remove(&self, digest: &DigestBytes) -> Option<Tomb> {
        self.shard(digest).lock().tombs.remove(digest)
    }

    pub(crate) fn get(&self, digest: &DigestBytes) -> Option<Tomb> {
        self.shard(digest).lock().tombs.get(digest).copied()
    }

    /// Marks `digest` resurrectable: every version it is about is older than `before_seq`.
    pub(crate) fn mark_resurrectable(&self, digest: DigestBytes, before_seq: u64) {
        self.shard(&digest)
            .lock()
            .resurrectable
            .insert(digest, before_seq);
    }

    /// Whether `digest` is marked resurrectable.
    pub(crate) fn is_resurrectable(&self, digest: &DigestBytes) -> bool {
        self.shard(digest).lock().resurrectable.contains_key(digest)
    }

    /// Replaces the tombstone of `digest` at `from` by one at `to`; false if it changed since.
    pub(crate) fn moved(&self, digest: &DigestBytes, from: Location, to: Location) -> bool {
        let mut shard = self.shard(digest).lock();
        match shard.tombs.get_mut(digest) {
            Some(tomb) if tomb.location == from => {
                tomb.location = to;
                true
            }
            _ => false,
        }
    }

    /// Removes every tombstone for which `outlived` holds (given its shadow seq), and every
    /// resurrectable mark it holds for; returns the tombstones' locations.
    pub(crate) fn drop_where(&self, outlived: impl Fn(u64) -> bool) -> Vec<Location> {
        let mut dropped = Vec::new();
        for shard in &self.shards {
            let mut shard = shard.lock();
            shard
                .resurrectable
                .retain(|_, before_seq| !outlived(*before_seq));
            shard.tombs.retain(|_, tomb| {
                let keep = !outlived(tomb.shadow_seq);
                if !keep {
                    dropped.push(tomb.location);
                }
                keep
            });
        }
        dropped
    }

    pub(crate) fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| shard.lock().tombs.len())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tomb(shadow_seq: u64) -> Tomb {
        Tomb {
            location: Location::new(0, 32, 64),
            shadow_seq,
        }
    }

    #[test]
    fn a_version_written_over_a_tombstone_is_resurrectable_until_nothing_older_is_left() {
        let tombs = Tombstones::default();
        let digest = [7; 20];
        assert_eq!(tombs.new_version(&digest), None);
        assert!(
            !tombs.is_resurrectable(&digest),
            "no tombstone, nothing to mark"
        );
        tombs.insert(digest, tomb(10));
        assert_eq!(tombs.new_version(&digest), Some(tomb(10)));
        assert!(tombs.is_resurrectable(&digest));
        assert!(tombs.drop_where(|shadow_seq| shadow_seq < 10).is_empty());
        assert!(
            tombs.is_resurrectable(&digest),
            "versions older than 10 may remain"
        );
        tombs.drop_where(|shadow_seq| shadow_seq <= 10);
        assert!(
            !tombs.is_resurrectable(&digest),
            "nothing older than 10 is left"
        );
    }

    #[test]
    fn a_new_tombstone_ends_the_mark() {
        let tombs = Tombstones::default();
        let digest = [8; 20];
        tombs.mark_resurrectable(digest, 5);
        assert!(tombs.is_resurrectable(&digest));
        tombs.insert(digest, tomb(20));
        assert!(
            !tombs.is_resurrectable(&digest),
            "the tombstone shadows every older version"
        );
        assert_eq!(tombs.len(), 1);
    }
}
