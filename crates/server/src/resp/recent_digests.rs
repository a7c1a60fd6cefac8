//! The digests of the Redis keys this thread addressed last.
//!
//! A key's record is addressed by RIPEMD-160 of its set and name (so that an Aerospike client
//! finds the same record), about a fifth of the CPU of a simple command. The same key is
//! often addressed again soon: by the same command (its route on a cluster, then its record;
//! keyspace notifications before and after it runs), by the next commands of a pipeline to
//! the same stream, counter, queue or HyperLogLog, by a script or a transaction. A small
//! direct-mapped table per thread keeps the last ones; a key that misses costs a hash of its
//! bytes more than before.
//!
//! Invariants:
//! - An entry holds the exact bytes of the set and key its digest was computed from, and a
//!   lookup compares them in full: what [`digest_of`] returns is always what
//!   `Digest::compute` gives.
//! - A set and key longer than [`ENTRY_BYTES_MAX`] together are computed and not kept.

use std::cell::RefCell;

use model::{Digest, UserKey};

/// Entries per thread, as a power of two: 5 KiB, small enough to stay near the core, so
/// that a key that misses pays little for the look.
const SLOT_BITS: u32 = 6;
const SLOTS: usize = 1 << SLOT_BITS;

/// The longest set name and key, together, that an entry holds.
const ENTRY_BYTES_MAX: usize = 56;

#[derive(Clone, Copy)]
struct Entry {
    /// `set.len() + key.len()`; `None` for an empty entry.
    len: Option<u8>,
    set_len: u8,
    bytes: [u8; ENTRY_BYTES_MAX],
    digest: Digest,
}

const EMPTY: Entry = Entry {
    len: None,
    set_len: 0,
    bytes: [0; ENTRY_BYTES_MAX],
    digest: Digest([0; Digest::SIZE_BYTES]),
};

impl Entry {
    fn holds(&self, set: &[u8], key: &[u8]) -> bool {
        self.len == Some((set.len() + key.len()) as u8)
            && usize::from(self.set_len) == set.len()
            && self.bytes[..set.len()] == *set
            && self.bytes[set.len()..set.len() + key.len()] == *key
    }

    fn fill(&mut self, set: &[u8], key: &[u8], digest: Digest) {
        self.len = Some((set.len() + key.len()) as u8);
        self.set_len = set.len() as u8;
        self.bytes[..set.len()].copy_from_slice(set);
        self.bytes[set.len()..set.len() + key.len()].copy_from_slice(key);
        self.digest = digest;
    }
}

thread_local! {
    static RECENT: RefCell<[Entry; SLOTS]> = const { RefCell::new([EMPTY; SLOTS]) };
}

/// The digest of Redis key `key` in `set`: `Digest::compute(set, String(key))`.
pub fn digest_of(set: &[u8], key: &[u8]) -> Digest {
    if set.len() + key.len() > ENTRY_BYTES_MAX {
        return Digest::compute(set, &UserKey::String(key));
    }
    let slot = slot_of(set, key);
    RECENT.with(|recent| {
        let mut recent = recent.borrow_mut();
        let entry = &mut recent[slot];
        if entry.holds(set, key) {
            return entry.digest;
        }
        let digest = Digest::compute(set, &UserKey::String(key));
        entry.fill(set, key, digest);
        digest
    })
}

/// The entry `key` of `set` may be in: a multiplicative hash of the key's last eight bytes and
/// both lengths (where keys of one application differ most; keys alike there only share an
/// entry, and a shared entry is only a miss).
fn slot_of(set: &[u8], key: &[u8]) -> usize {
    let mut tail = [0u8; 8];
    let tail_start = key.len().saturating_sub(tail.len());
    tail[..key.len() - tail_start].copy_from_slice(&key[tail_start..]);
    let mixed = u64::from_le_bytes(tail) ^ ((key.len() as u64) << 48) ^ ((set.len() as u64) << 56);
    (mixed.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (u64::BITS - SLOT_BITS)) as usize
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
