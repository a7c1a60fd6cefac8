//! The stream of operations one connection sends, and the bytes its writes carry.
//!
//! Invariants:
//! - Count-based workloads share one counter across all connections, so every key in
//!   `[start_key, start_key + key_count)` is handed out exactly once, in order.
//! - Random workloads draw from a per-connection generator seeded from the run's seed and the
//!   connection's index, so a run is replayable from its seed (up to thread interleaving).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rand::rngs::SmallRng;
use rand::{Rng, RngCore, SeedableRng};
use rand_distr::{Distribution, Zipf};

use crate::spec::{KeyDistribution, Workload};

/// The kind of a single-record command, as reported per second and in the summary.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum OpKind {
    /// Read all bins.
    Read,
    /// Write all bins (update or replace).
    Write,
    /// Delete the record.
    Delete,
}

impl OpKind {
    /// Every kind, in report order.
    pub const ALL: [OpKind; 3] = [OpKind::Write, OpKind::Read, OpKind::Delete];

    /// The lower-case name used in every output format.
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Read => "read",
            OpKind::Write => "write",
            OpKind::Delete => "delete",
        }
    }
}

/// One command to send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Op {
    /// What to do.
    pub kind: OpKind,
    /// The key's number.
    pub key: u64,
    /// For writes: replace the whole record rather than update its bins.
    pub replace: bool,
}

/// The keys a run works on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyRange {
    /// The first key (`-K`).
    pub start: u64,
    /// How many keys (`-k`), at least 1.
    pub count: u64,
}

/// Hands out operations for one connection.
#[derive(Debug)]
pub struct OpSource {
    workload: Workload,
    keys: KeyRange,
    /// Shared by every connection of a count-based run: the next key offset to hand out.
    next_offset: Arc<AtomicU64>,
    rng: SmallRng,
    zipf: Option<Zipf<f64>>,
}

impl OpSource {
    /// A source for one connection. `next_offset` must be shared by all connections of a run.
    ///
    /// # Panics
    ///
    /// If `keys.count` is 0 (options validation rejects it first).
    pub fn new(
        workload: Workload,
        keys: KeyRange,
        distribution: KeyDistribution,
        next_offset: Arc<AtomicU64>,
        seed: u64,
    ) -> OpSource {
        assert!(keys.count > 0, "a run needs at least one key");
        let zipf = match distribution {
            KeyDistribution::Uniform => None,
            KeyDistribution::Zipf { exponent } => {
                Some(Zipf::new(keys.count as f64, exponent).expect("validated Zipf parameters"))
            }
        };
        OpSource {
            workload,
            keys,
            next_offset,
            rng: SmallRng::seed_from_u64(seed),
            zipf,
        }
    }

    /// The next operation, or `None` when a count-based workload has handed out every key.
    pub fn next_op(&mut self) -> Option<Op> {
        let (kind, replace, read_percent) = match self.workload {
            Workload::Insert => return self.next_in_order(OpKind::Write),
            Workload::Delete => return self.next_in_order(OpKind::Delete),
            Workload::ReadAll => return self.next_in_order(OpKind::Read),
            Workload::ReadUpdate { read_percent } => (OpKind::Write, false, read_percent),
            Workload::ReadReplace { read_percent } => (OpKind::Write, true, read_percent),
        };
        let is_read = self.rng.random_range(0..100u8) < read_percent;
        let key = self.random_key();
        Some(if is_read {
            Op {
                kind: OpKind::Read,
                key,
                replace: false,
            }
        } else {
            Op { kind, key, replace }
        })
    }

    fn next_in_order(&mut self, kind: OpKind) -> Option<Op> {
        let offset = self.next_offset.fetch_add(1, Ordering::Relaxed);
        (offset < self.keys.count).then_some(Op {
            kind,
            key: self.keys.start + offset,
            replace: false,
        })
    }

    fn random_key(&mut self) -> u64 {
        let offset = match &self.zipf {
            None => self.rng.random_range(0..self.keys.count),
            // Zipf samples ranks 1..=count as floats; rank 1 is the hottest key.
            Some(zipf) => (zipf.sample(&mut self.rng) as u64).clamp(1, self.keys.count) - 1,
        };
        self.keys.start + offset
    }
}

/// Size of the random pool that string and bytes values are cut from.
const VALUE_POOL_SIZE_BYTES: usize = 2 * crate::spec::BIN_SIZE_BYTES_MAX;

/// Random bytes and random letters and digits that writes slice their values from, so that a
/// write costs no random generation per byte.
#[derive(Debug)]
pub struct ValuePool {
    text: Vec<u8>,
    bytes: Vec<u8>,
    rng: SmallRng,
}

impl ValuePool {
    /// Fills both pools from `seed`.
    pub fn new(seed: u64) -> ValuePool {
        const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut bytes = vec![0; VALUE_POOL_SIZE_BYTES];
        rng.fill_bytes(&mut bytes);
        let text = bytes
            .iter()
            .map(|byte| ALPHABET[usize::from(*byte) % ALPHABET.len()])
            .collect();
        rng.fill_bytes(&mut bytes);
        ValuePool { text, bytes, rng }
    }

    /// `size` letters and digits from a random place in the pool.
    pub fn text(&mut self, size: usize) -> &[u8] {
        let start = self.rng.random_range(0..=VALUE_POOL_SIZE_BYTES - size);
        &self.text[start..start + size]
    }

    /// `size` random bytes from a random place in the pool.
    pub fn bytes(&mut self, size: usize) -> &[u8] {
        let start = self.rng.random_range(0..=VALUE_POOL_SIZE_BYTES - size);
        &self.bytes[start..start + size]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(workload: Workload, distribution: KeyDistribution, seed: u64) -> OpSource {
        let keys = KeyRange {
            start: 1000,
            count: 10_000,
        };
        OpSource::new(workload, keys, distribution, Arc::default(), seed)
    }

    #[test]
    fn insert_hands_out_every_key_once_across_connections() {
        let shared = Arc::new(AtomicU64::new(0));
        let keys = KeyRange {
            start: 5,
            count: 100,
        };
        let mut sources: Vec<OpSource> = (0..3)
            .map(|seed| {
                let distribution = KeyDistribution::Uniform;
                OpSource::new(Workload::Insert, keys, distribution, shared.clone(), seed)
            })
            .collect();
        let mut seen = Vec::new();
        'outer: loop {
            for source in &mut sources {
                match source.next_op() {
                    Some(op) => {
                        assert_eq!(op.kind, OpKind::Write);
                        seen.push(op.key);
                    }
                    None => break 'outer,
                }
            }
        }
        assert_eq!(seen, (5..105).collect::<Vec<u64>>());
        assert!(sources.iter_mut().all(|source| source.next_op().is_none()));
    }

    #[test]
    fn read_update_mix_matches_the_requested_share() {
        let seed = 7;
        let mut source = source(
            Workload::ReadUpdate { read_percent: 80 },
            KeyDistribution::Uniform,
            seed,
        );
        let draws = 100_000;
        let mut reads = 0;
        for _ in 0..draws {
            let op = source.next_op().unwrap();
            assert!((1000..11_000).contains(&op.key));
            assert!(!op.replace);
            reads += usize::from(op.kind == OpKind::Read);
        }
        let share = reads as f64 / f64::from(draws);
        assert!(
            (0.79..0.81).contains(&share),
            "seed {seed}: read share {share}"
        );
    }

    #[test]
    fn read_replace_writes_replace_and_extremes_are_exact() {
        let mut all_writes = source(
            Workload::ReadReplace { read_percent: 0 },
            KeyDistribution::Uniform,
            1,
        );
        let mut all_reads = source(
            Workload::ReadUpdate { read_percent: 100 },
            KeyDistribution::Uniform,
            1,
        );
        for _ in 0..1000 {
            let write = all_writes.next_op().unwrap();
            assert_eq!((write.kind, write.replace), (OpKind::Write, true));
            assert_eq!(all_reads.next_op().unwrap().kind, OpKind::Read);
        }
    }

    #[test]
    fn zipf_concentrates_on_the_first_keys() {
        let seed = 11;
        let zipf = KeyDistribution::Zipf { exponent: 0.99 };
        let mut source = source(Workload::ReadUpdate { read_percent: 50 }, zipf, seed);
        let draws = 100_000;
        let hottest = (0..draws)
            .filter(|_| source.next_op().unwrap().key < 1010)
            .count();
        // Under Zipf(0.99) over 10,000 keys the 10 hottest draw about 30%; uniform draws 0.1%.
        let share = hottest as f64 / f64::from(draws);
        assert!(
            (0.2..0.4).contains(&share),
            "seed {seed}: hot share {share}"
        );
    }

    #[test]
    fn value_pool_slices_have_the_asked_size_and_alphabet() {
        let mut pool = ValuePool::new(3);
        let text = pool.text(100).to_vec();
        assert_eq!(text.len(), 100);
        assert!(text.iter().all(u8::is_ascii_alphanumeric));
        assert_eq!(
            pool.bytes(crate::spec::BIN_SIZE_BYTES_MAX).len(),
            1024 * 1024
        );
        assert_eq!(pool.text(0), b"");
    }
}
