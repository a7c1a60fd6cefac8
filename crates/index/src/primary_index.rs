//! The primary index of one partition.
//!
//! Invariants:
//! - Each digest appears at most once.
//! - `len()` equals the number of entries; entries are only added or removed through this type.

use std::collections::BTreeMap;
use std::ops::Bound;

use model::Digest;

/// Maps digests to entries of type `E` (a record, or where a record lives), in digest order.
#[derive(Debug)]
pub struct PrimaryIndex<E> {
    entries: BTreeMap<Digest, E>,
}

impl<E> Default for PrimaryIndex<E> {
    fn default() -> Self {
        PrimaryIndex {
            entries: BTreeMap::new(),
        }
    }
}

impl<E> PrimaryIndex<E> {
    /// An empty index.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the index has no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entry for `digest`, if any.
    pub fn get(&self, digest: &Digest) -> Option<&E> {
        self.entries.get(digest)
    }

    /// The entry for `digest`, mutable.
    pub fn get_mut(&mut self, digest: &Digest) -> Option<&mut E> {
        self.entries.get_mut(digest)
    }

    /// Inserts or replaces the entry for `digest`, returning the previous one.
    pub fn insert(&mut self, digest: Digest, entry: E) -> Option<E> {
        self.entries.insert(digest, entry)
    }

    /// Removes and returns the entry for `digest`.
    pub fn remove(&mut self, digest: &Digest) -> Option<E> {
        self.entries.remove(digest)
    }

    /// Entries in ascending digest order, starting strictly after `after` (or at the start).
    pub fn iter_after(&self, after: Option<&Digest>) -> impl Iterator<Item = (&Digest, &E)> {
        let lower = match after {
            Some(digest) => Bound::Excluded(*digest),
            None => Bound::Unbounded,
        };
        self.entries.range((lower, Bound::Unbounded))
    }

    /// Removes every entry for which `keep` returns false, calling it once per entry in digest
    /// order.
    pub fn retain(&mut self, keep: impl FnMut(&Digest, &mut E) -> bool) {
        self.entries.retain(keep);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest(first: u8) -> Digest {
        let mut bytes = [0u8; 20];
        bytes[0] = first;
        Digest(bytes)
    }

    #[test]
    fn iter_after_resumes_strictly_after_the_given_digest() {
        let mut index = PrimaryIndex::new();
        for first in [5u8, 1, 9, 3] {
            index.insert(digest(first), first);
        }
        let all: Vec<u8> = index.iter_after(None).map(|(_, e)| *e).collect();
        assert_eq!(all, vec![1, 3, 5, 9]);
        let rest: Vec<u8> = index
            .iter_after(Some(&digest(3)))
            .map(|(_, e)| *e)
            .collect();
        assert_eq!(rest, vec![5, 9]);
        let rest: Vec<u8> = index
            .iter_after(Some(&digest(4)))
            .map(|(_, e)| *e)
            .collect();
        assert_eq!(rest, vec![5, 9]);
    }

    #[test]
    fn insert_replaces_and_remove_returns_the_entry() {
        let mut index = PrimaryIndex::new();
        assert_eq!(index.insert(digest(1), "a"), None);
        assert_eq!(index.insert(digest(1), "b"), Some("a"));
        assert_eq!(index.len(), 1);
        assert_eq!(index.remove(&digest(1)), Some("b"));
        assert!(index.is_empty());
    }

    #[test]
    fn retain_drops_rejected_entries() {
        let mut index = PrimaryIndex::new();
        for first in 0u8..10 {
            index.insert(digest(first), first);
        }
        index.retain(|_, e| *e % 2 == 0);
        assert_eq!(index.len(), 5);
        assert!(index.get(&digest(3)).is_none());
        assert_eq!(index.get(&digest(4)), Some(&4));
    }
}
