//! Sorted set commands. A sorted set is a native pair of structures, a map from member to
//! score and an ordered set of (score, member), shown to Aerospike clients as one MAP bin named
//! `zset` from member to score (see `docs/internals/redis-mapping.md`).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use engine::{BinWriter, NativeValue};
use model::ParticleType;

use super::collection::Collection;
use super::commands::Command;
use super::msgpack::{self, Reader, Scalar};

/// The zset commands.
pub const COMMANDS: &[Command] = &[];

/// Bytes one member costs beyond its own bytes: its shared slice, the map entry and the tree
/// entry.
const MEMBER_OVERHEAD_BYTES: usize = 64;

/// A score with the total order Redis sorts by (scores are never NaN).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Score(pub f64);

impl Eq for Score {}

impl PartialOrd for Score {
    fn partial_cmp(&self, other: &Score) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Score {
    fn cmp(&self, other: &Score) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// A Redis sorted set: ranges by score or by member in O(log n + k) through `ordered`.
#[derive(Debug, Default)]
pub struct ZSetValue {
    scores: HashMap<Arc<[u8]>, f64>,
    ordered: BTreeSet<(Score, Arc<[u8]>)>,
    size_bytes: usize,
}

impl ZSetValue {
    /// Sets `member`'s score; returns whether it is new.
    pub fn insert(&mut self, member: &[u8], score: f64) -> bool {
        debug_assert!(!score.is_nan(), "scores are never NaN");
        let score = if score == 0.0 { 0.0 } else { score };
        if let Some(old) = self.scores.get_mut(member) {
            let shared = self
                .ordered
                .take(&(Score(*old), Arc::from(member)))
                .expect("every member is in both structures")
                .1;
            *old = score;
            self.ordered.insert((Score(score), shared));
            return false;
        }
        let shared: Arc<[u8]> = Arc::from(member);
        self.scores.insert(Arc::clone(&shared), score);
        self.ordered.insert((Score(score), shared));
        self.size_bytes += member.len() + MEMBER_OVERHEAD_BYTES;
        true
    }

    /// The MAP bin's msgpack: member to score.
    fn encoded(&self) -> Vec<u8> {
        let mut encoded = Vec::new();
        msgpack::write_map_len(&mut encoded, self.ordered.len());
        for (score, member) in &self.ordered {
            msgpack::write_bytes(&mut encoded, member);
            msgpack::write_f64(&mut encoded, score.0);
        }
        encoded
    }
}

impl NativeValue for ZSetValue {
    fn write_bins(&self, out: &mut BinWriter) {
        out.bin(Self::BIN, Self::PARTICLE as u8, &self.encoded());
    }

    fn size_bytes(&self) -> usize {
        self.size_bytes
    }
}

impl Collection for ZSetValue {
    const BIN: &'static [u8] = b"zset";
    const PARTICLE: ParticleType = ParticleType::Map;
    const TYPE_NAME: &'static str = "zset";

    fn decode(value: &[u8]) -> Option<ZSetValue> {
        let mut reader = Reader::new(value);
        let count = reader.map_len()?;
        let mut zset = ZSetValue::default();
        for _ in 0..count {
            let member = reader.scalar()?.to_bytes();
            let score = match reader.scalar()? {
                Scalar::Integer(value) => value as f64,
                Scalar::Double(value) if !value.is_nan() => value,
                Scalar::Double(_) | Scalar::Bytes(_) => return None,
            };
            zset.insert(&member, score);
        }
        reader.is_done().then_some(zset)
    }

    fn is_empty(&self) -> bool {
        self.scores.is_empty()
    }
}
