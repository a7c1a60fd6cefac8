//! The digests of the Redis keys this thread addressed last.
//!
//! A key's record is addressed by RIPEMD-160 of its set and name (so that an Aerospike client
//! finds the same record), about a fifth of the CPU of a simple command. The same key is
//! often addressed again soon: by the same command (its route on a cluster, then its record;
//! keyspace notifications before and after it runs), by the next commands of a pipeline to
//! the same stream, counter, queue or HyperLogLog, by a script or a transaction, or as one of
//! an application's hot keys. A direct-mapped table per thread keeps the digests of keys seen
//! at least twice lately; a key that misses costs a hash of its bytes and a look at one tag
//! more than before (measured: the same throughput on GETs spread over a million keys, 30%
//! more on SETBITs over a thousand; `docs/benchmarks.md`).
//!
//! Invariants:
//! - An entry holds the exact bytes of the set and key its digest was computed from, and a
//!   lookup compares them in full: what [`digest_of`] returns is always what
//!   `Digest::compute` gives.
//! - A set and key longer than [`ENTRY_BYTES_MAX`] together are computed and not kept.

use std::cell::RefCell;
use std::hash::Hasher as _;

use model::{Digest, UserKey};

/// Entries per thread, as a power of two: 4096 keys' digests in 336 KiB. A look touches one
/// tag, in a dense array that stays near the core (16 KiB), and only on a tag that matches
/// the entry itself: a key that misses pays a hash of its bytes and that one tag.
const SLOT_BITS: u32 = 12;
const SLOTS: usize = 1 << SLOT_BITS;

/// The longest set name and key, together, that an entry holds.
const ENTRY_BYTES_MAX: usize = 56;

#[derive(Clone, Copy)]
struct Entry {
    /// `set.len() + key.len()`.
    len: u8,
    set_len: u8,
    bytes: [u8; ENTRY_BYTES_MAX],
    digest: Digest,
}

const EMPTY: Entry = Entry {
    len: 0,
    set_len: 0,
    bytes: [0; ENTRY_BYTES_MAX],
    digest: Digest([0; Digest::SIZE_BYTES]),
};

impl Entry {
    fn holds(&self, set: &[u8], key: &[u8]) -> bool {
        usize::from(self.len) == set.len() + key.len()
            && usize::from(self.set_len) == set.len()
            && self.bytes[..set.len()] == *set
            && self.bytes[set.len()..set.len() + key.len()] == *key
    }

    fn fill(&mut self, set: &[u8], key: &[u8], digest: Digest) {
        self.len = (set.len() + key.len()) as u8;
        self.set_len = set.len() as u8;
        self.bytes[..set.len()].copy_from_slice(set);
        self.bytes[set.len()..set.len() + key.len()].copy_from_slice(key);
        self.digest = digest;
    }
}

/// One thread's table: `tags[i]` is 0 for an empty slot, else the tag (the high half of the
/// hash, never 0) of the last key that missed there; `entries[i]` may hold that key, or an
/// older one (always compared in full).
struct Table {
    tags: Box<[u32]>,
    entries: Box<[Entry]>,
}

thread_local! {
    static RECENT: RefCell<Table> = RefCell::new(Table {
        tags: vec![0; SLOTS].into_boxed_slice(),
        entries: vec![EMPTY; SLOTS].into_boxed_slice(),
    });
}

/// The digest of Redis key `key` in `set`: `Digest::compute(set, String(key))`.
pub fn digest_of(set: &[u8], key: &[u8]) -> Digest {
    if set.len() + key.len() > ENTRY_BYTES_MAX {
        return Digest::compute(set, &UserKey::String(key));
    }
    let (slot, tag) = slot_and_tag(set, key);
    RECENT.with(|recent| {
        let Table { tags, entries } = &mut *recent.borrow_mut();
        let seen_before = tags[slot] == tag;
        if seen_before && entries[slot].holds(set, key) {
            return entries[slot].digest;
        }
        let digest = Digest::compute(set, &UserKey::String(key));
        // A key's first miss only leaves its tag; its second fills the entry. Keys used once
        // (a walk over a large key space) then cost no write to the entries, whose lines are
        // most likely far from the core.
        if seen_before {
            entries[slot].fill(set, key, digest);
        } else {
            tags[slot] = tag;
        }
        digest
    })
}

/// Where `key` of `set` may be kept, and its tag there (never 0).
fn slot_and_tag(set: &[u8], key: &[u8]) -> (usize, u32) {
    let mut hasher = rustc_hash::FxHasher::default();
    hasher.write(set);
    hasher.write_u8(0xff);
    hasher.write(key);
    let hash = hasher.finish();
    let slot = (hash as usize) & (SLOTS - 1);
    ((slot), ((hash >> 32) as u32) | 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn computed(set: &[u8], key: &[u8]) -> Digest {
        Digest::compute(set, &UserKey::String(key))
    }

    #[test]
    fn a_remembered_digest_is_the_computed_one() {
        for round in 0..3 {
            for i in 0..500 {
                let key = format!("key:{i}");
                assert_eq!(
                    digest_of(b"redis", key.as_bytes()),
                    computed(b"redis", key.as_bytes()),
                    "round {round}, key {key}"
                );
            }
        }
    }

    #[test]
    fn the_split_between_set_and_key_tells_entries_apart() {
        // Same bytes in all, split differently: three different records.
        let pairs: [(&[u8], &[u8]); 3] = [(b"ab", b"c"), (b"a", b"bc"), (b"abc", b"")];
        for _ in 0..2 {
            for (set, key) in pairs {
                assert_eq!(digest_of(set, key), computed(set, key));
            }
        }
        assert_ne!(digest_of(b"ab", b"c"), digest_of(b"a", b"bc"));
    }

    #[test]
    fn long_keys_and_every_length_up_to_the_limit_are_right() {
        for len in 0..=ENTRY_BYTES_MAX + 8 {
            let key = vec![b'k'; len];
            for _ in 0..2 {
                assert_eq!(digest_of(b"redis", &key), computed(b"redis", &key), "{len}");
            }
        }
    }
}
