//! Sorted set commands. A sorted set is a native pair of structures, a map from member to
//! score and an ordered set of (score, member), shown to Aerospike clients as one MAP bin named
//! `zset` from member to score (see `docs/internals/redis-mapping.md`).
//!
//! Costs, with n members and k members in the answer:
//! - ZADD, ZINCRBY, ZREM, ZSCORE, ZPOPMIN/ZPOPMAX: O(log n) per member, in place.
//! - ZRANGEBYSCORE, ZRANGEBYLEX and their REV, BYSCORE and BYLEX forms, ZREMRANGEBYSCORE and
//!   ZREMRANGEBYLEX: O(log n + offset + k). The tree is searched with probes that sit between
//!   entries (`Probe`), so a seek allocates nothing and an exclusive bound costs no scan.
//! - ZCOUNT and ZLEXCOUNT: O(log n + k) (Redis: O(log n), from its skiplist's ranks).
//! - Ranks: a `BTreeSet` keeps no subtree sizes, so ZRANK, ZREVRANK, and ZRANGE, ZREVRANGE and
//!   ZREMRANGEBYRANK by index walk from the nearer end: O(min(r, n - r)) to reach rank r, plus
//!   k (Redis: O(log n)). ZRANK counts from both ends of the tree at once and stops at the
//!   nearer.
//!
//! Lex ranges (BYLEX, ZRANGEBYLEX, ZLEXCOUNT, ZREMRANGEBYLEX): Redis defines them only when
//! every member has the same score; its order is then the order of the member bytes, and the
//! range is one O(log n) seek in the (score, member) order plus the members in range. With
//! mixed scores Redis's answer depends on its encoding: a small sorted set (a listpack) walks
//! in score order from the first member `>= min` and stops at the first member `> max` (in
//! reverse, from the last member `<= max` down to the first `< min`), while a large one (a
//! skiplist) searches as if members were sorted and its answer depends on the skiplist's
//! random levels. Osprey always answers as the listpack does, and finds the first member
//! `>= min` with one seek per distinct score it passes: O(log n) per score before the start,
//! so O(log n + k) when scores are equal. OFFSET skips members without checking them, then
//! LIMIT and the far bound apply, as in Redis.
//!
//! Scores: never NaN; -0 is stored as 0 (as a small Redis sorted set does, which stores
//! integral scores as integers), and members of equal score are in byte order. Replies write
//! scores with Redis 7.2's text (`d2string`: `1.5`, `0.1`, `1e+300`), as RESP3 doubles and RESP2
//! bulk strings; ZSCAN writes the same text as bulk strings in both, as Redis does for a small
//! sorted set (a large one there writes `%.17g`, `0.10000000000000001`).

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::collections::{BTreeSet, HashMap, btree_set};
use std::ops::Bound;
use std::sync::Arc;

use model::ParticleType;
use rand::{Rng as _, SeedableRng as _};
use wire_resp::Args;

use super::collection::{self, Change, Collection, Failure, ScanOptions, finish};
use super::commands::Command;
use super::keys::{self, Target};
use super::msgpack::{self, Reader, Scalar};
use super::reply::Reply;
use super::{After, Session, parse_double};

/// The zset commands, with Redis's arities.
pub const COMMANDS: &[Command] = &[
    ("zadd", -4, zadd),
    ("zcard", 2, zcard),
    ("zcount", 4, zcount),
    ("zincrby", 4, zincrby),
    ("zlexcount", 4, zlexcount),
    ("zmscore", -3, zmscore),
    ("zpopmax", -2, |s, a, r| zpop(s, a, r, true)),
    ("zpopmin", -2, |s, a, r| zpop(s, a, r, false)),
    ("zrandmember", -2, zrandmember),
    ("zrange", -4, zrange),
    ("zrangebylex", -4, zrangebylex),
    ("zrangebyscore", -4, zrangebyscore),
    ("zrangestore", -5, zrangestore),
    ("zrank", -3, |s, a, r| zrank(s, a, r, false)),
    ("zrem", -3, zrem),
    ("zremrangebylex", 4, zremrangebylex),
    ("zremrangebyrank", 4, zremrangebyrank),
    ("zremrangebyscore", 4, zremrangebyscore),
    ("zrevrange", -4, zrevrange),
    ("zrevrangebylex", -4, zrevrangebylex),
    ("zrevrangebyscore", -4, zrevrangebyscore),
    ("zrevrank", -3, |s, a, r| zrank(s, a, r, true)),
    ("zscan", -3, zscan),
    ("zscore", 3, zscore),
];

/// Bytes one member costs beyond its own bytes: its shared slice, the map entry and the tree
/// entry.
const MEMBER_OVERHEAD_BYTES: usize = 64;

/// Redis's reply to a score that does not parse.
const NOT_A_FLOAT: &str = "ERR value is not a valid float";
/// Redis's reply to a score range that does not parse.
const RANGE_NOT_A_FLOAT: &str = "ERR min or max is not a float";
/// Redis's reply to a lex range that does not parse.
const LEX_RANGE_INVALID: &str = "ERR min or max not valid string range item";

/// One member and its score, in the tree.
#[derive(Clone, Debug)]
pub struct Entry {
    score: f64,
    member: Arc<[u8]>,
}

/// Where a key sits among the members of its score.
#[derive(Clone, Copy, Debug)]
enum Edge<'a> {
    /// Before every member.
    First,
    /// At this member.
    Member(&'a [u8]),
    /// After every member.
    Last,
}

impl Edge<'_> {
    fn order(self, other: Edge<'_>) -> Ordering {
        match (self, other) {
            (Edge::Member(a), Edge::Member(b)) => a.cmp(b),
            (Edge::First, Edge::First) | (Edge::Last, Edge::Last) => Ordering::Equal,
            (Edge::First, _) | (_, Edge::Last) => Ordering::Less,
            (Edge::Last, _) | (_, Edge::First) => Ordering::Greater,
        }
    }
}

/// A position in the (score, member) order: an [`Entry`], or a [`Probe`] the tree is searched
/// with (`BTreeSet<Entry>` borrows as `dyn Key`, so a probe needs no allocated member).
trait Key {
    fn position(&self) -> (f64, Edge<'_>);
}

impl Entry {
    /// The member's score.
    pub fn score(&self) -> f64 {
        self.score
    }

    /// The member.
    pub fn member(&self) -> &[u8] {
        &self.member
    }
}

impl Key for Entry {
    fn position(&self) -> (f64, Edge<'_>) {
        (self.score, Edge::Member(&self.member))
    }
}

/// A search key: a score and an edge within it, borrowing the member it names.
#[derive(Clone, Copy, Debug)]
struct Probe<'a> {
    score: f64,
    edge: Edge<'a>,
}

impl Key for Probe<'_> {
    fn position(&self) -> (f64, Edge<'_>) {
        (self.score, self.edge)
    }
}

impl<'a> Probe<'a> {
    fn key(&self) -> &(dyn Key + 'a) {
        self
    }
}

/// Scores in Redis's order. Scores are never NaN; -0 and 0 are equal.
fn compare_scores(a: f64, b: f64) -> Ordering {
    a.partial_cmp(&b).unwrap_or(Ordering::Equal)
}

impl PartialEq for dyn Key + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for dyn Key + '_ {}

impl PartialOrd for dyn Key + '_ {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for dyn Key + '_ {
    fn cmp(&self, other: &Self) -> Ordering {
        let (score, edge) = self.position();
        let (other_score, other_edge) = other.position();
        compare_scores(score, other_score).then_with(|| edge.order(other_edge))
    }
}

impl<'a> Borrow<dyn Key + 'a> for Entry {
    fn borrow(&self) -> &(dyn Key + 'a) {
        self
    }
}

impl PartialEq for Entry {
    fn eq(&self, other: &Entry) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Entry {}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Entry) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Entry {
    /// The same order as `dyn Key`'s, without its dynamic calls.
    fn cmp(&self, other: &Entry) -> Ordering {
        compare_scores(self.score, other.score).then_with(|| self.member.cmp(&other.member))
    }
}

/// A Redis sorted set: ranges by score or by member in O(log n + k) through `ordered`.
#[derive(Debug, Default)]
pub struct ZSetValue {
    scores: HashMap<Arc<[u8]>, f64>,
    ordered: BTreeSet<Entry>,
    size_bytes: usize,
}

impl ZSetValue {
    /// Sets `member`'s score; returns whether it is new. -0 is stored as 0.
    pub fn insert(&mut self, member: &[u8], score: f64) -> bool {
        debug_assert!(!score.is_nan(), "scores are never NaN");
        // A small Redis sorted set stores an integral score as an integer, so -0 reads back
        // as 0 there: keep 0 for both.
        let score = if score == 0.0 { 0.0 } else { score };
        if let Some(old) = self.scores.get_mut(member) {
            if *old != score {
                let probe = Probe {
                    score: *old,
                    edge: Edge::Member(member),
                };
                let entry = self
                    .ordered
                    .take(probe.key())
                    .expect("every member is in both structures");
                *old = score;
                self.ordered.insert(Entry {
                    score,
                    member: entry.member,
                });
            }
            return false;
        }
        let shared: Arc<[u8]> = Arc::from(member);
        self.scores.insert(Arc::clone(&shared), score);
        self.ordered.insert(Entry {
            score,
            member: shared,
        });
        self.size_bytes += member.len() + MEMBER_OVERHEAD_BYTES;
        true
    }

    /// `member`'s score.
    pub fn score(&self, member: &[u8]) -> Option<f64> {
        self.scores.get(member).copied()
    }

    /// The number of members.
    pub fn len(&self) -> usize {
        self.scores.len()
    }

    /// Removes `member`; returns whether it was there.
    pub fn remove(&mut self, member: &[u8]) -> bool {
        let Some(score) = self.scores.remove(member) else {
            return false;
        };
        let probe = Probe {
            score,
            edge: Edge::Member(member),
        };
        let removed = self.ordered.remove(probe.key());
        debug_assert!(removed, "every member is in both structures");
        self.size_bytes -= member.len() + MEMBER_OVERHEAD_BYTES;
        true
    }

    /// Removes and returns the member of the lowest score (`max`: the highest).
    pub fn pop(&mut self, max: bool) -> Option<Entry> {
        let entry = if max {
            self.ordered.pop_last()
        } else {
            self.ordered.pop_first()
        }?;
        self.scores.remove(&*entry.member);
        self.size_bytes -= entry.member.len() + MEMBER_OVERHEAD_BYTES;
        Some(entry)
    }

    /// Members in score order.
    pub fn iter(&self) -> btree_set::Iter<'_, Entry> {
        self.ordered.iter()
    }

    /// `member`'s rank in score order (0 is the lowest) and its score. Counts from both ends at
    /// once: O(min(rank, n - rank)).
    pub fn rank(&self, member: &[u8]) -> Option<(usize, f64)> {
        let score = self.score(member)?;
        let probe = Probe {
            score,
            edge: Edge::Member(member),
        };
        let mut before = self
            .ordered
            .range::<dyn Key, _>((Bound::Unbounded, Bound::Excluded(probe.key())));
        let mut after = self
            .ordered
            .range::<dyn Key, _>((Bound::Excluded(probe.key()), Bound::Unbounded));
        let mut counted = 0;
        loop {
            if before.next().is_none() {
                return Some((counted, score));
            }
            if after.next_back().is_none() {
                return Some((self.len() - 1 - counted, score));
            }
            counted += 1;
        }
    }

    /// The members of ranks `first..=last` (`first <= last < len`), in score order, reached
    /// from the nearer end.
    pub fn by_rank(&self, first: usize, last: usize) -> Vec<&Entry> {
        debug_assert!(first <= last && last < self.len(), "a valid rank range");
        let count = last - first + 1;
        let after_last = self.len() - 1 - last;
        if first <= after_last {
            self.ordered.iter().skip(first).take(count).collect()
        } else {
            let mut entries: Vec<&Entry> = self
                .ordered
                .iter()
                .rev()
                .skip(after_last)
                .take(count)
                .collect();
            entries.reverse();
            entries
        }
    }

    /// The members whose scores are in `range`, in score order (reverse it for REV).
    pub fn by_score(&self, range: &ScoreRange) -> impl DoubleEndedIterator<Item = &Entry> {
        let start = Probe {
            score: range.min,
            edge: if range.min_exclusive {
                Edge::Last
            } else {
                Edge::First
            },
        };
        let end = Probe {
            score: range.max,
            edge: if range.max_exclusive {
                Edge::First
            } else {
                Edge::Last
            },
        };
        // A range whose start is past its end is empty (BTreeSet::range would panic).
        (start.key() <= end.key())
            .then(|| {
                self.ordered
                    .range::<dyn Key, _>((Bound::Included(start.key()), Bound::Included(end.key())))
            })
            .into_iter()
            .flatten()
    }

    /// The first member, in score order, that is `>= min`, if it is also `<= max`: where a
    /// lex range starts (see the module's notes on mixed scores).
    fn first_in_lex(&self, range: &LexRange<'_>) -> Option<&Entry> {
        if range.is_empty() {
            return None;
        }
        let first = self.ordered.first()?;
        let last = self.ordered.last()?;
        if !range.gte_min(&last.member) || !range.lte_max(&first.member) {
            return None;
        }
        let mut score = first.score;
        let found = loop {
            let (edge, inclusive) = range.min.edge();
            let probe = Probe { score, edge };
            let lower = if inclusive {
                Bound::Included(probe.key())
            } else {
                Bound::Excluded(probe.key())
            };
            let candidate = self
                .ordered
                .range::<dyn Key, _>((lower, Bound::Unbounded))
                .next()?;
            // Within `score` the seek lands on the first member >= min; past it, the candidate
            // opens the next score and is checked like any member.
            if compare_scores(candidate.score, score).is_eq() || range.gte_min(&candidate.member) {
                break candidate;
            }
            score = candidate.score;
        };
        range.lte_max(&found.member).then_some(found)
    }

    /// The last member, in score order, that is `<= max`, if it is also `>= min`: where a
    /// reverse lex range starts.
    fn last_in_lex(&self, range: &LexRange<'_>) -> Option<&Entry> {
        if range.is_empty() {
            return None;
        }
        let first = self.ordered.first()?;
        let last = self.ordered.last()?;
        if !range.gte_min(&last.member) || !range.lte_max(&first.member) {
            return None;
        }
        let mut score = last.score;
        let found = loop {
            let (edge, inclusive) = range.max.edge();
            let probe = Probe { score, edge };
            let upper = if inclusive {
                Bound::Included(probe.key())
            } else {
                Bound::Excluded(probe.key())
            };
            let candidate = self
                .ordered
                .range::<dyn Key, _>((Bound::Unbounded, upper))
                .next_back()?;
            if compare_scores(candidate.score, score).is_eq() || range.lte_max(&candidate.member) {
                break candidate;
            }
            score = candidate.score;
        };
        range.gte_min(&found.member).then_some(found)
    }

    /// The members from where a lex range starts onwards, unbounded at the far end:
    /// forward from the first in range, or (`reverse`) backward from the last.
    pub fn lex_walk<'s>(
        &'s self,
        range: &LexRange<'_>,
        reverse: bool,
    ) -> Option<btree_set::Range<'s, Entry>> {
        if reverse {
            let start: &dyn Key = self.last_in_lex(range)?;
            Some(
                self.ordered
                    .range::<dyn Key, _>((Bound::Unbounded, Bound::Included(start))),
            )
        } else {
            let start: &dyn Key = self.first_in_lex(range)?;
            Some(
                self.ordered
                    .range::<dyn Key, _>((Bound::Included(start), Bound::Unbounded)),
            )
        }
    }

    /// The members of a lex range with Redis's OFFSET and LIMIT (a negative limit: no limit).
    pub fn lex_range(
        &self,
        range: &LexRange<'_>,
        reverse: bool,
        offset: usize,
        limit: usize,
    ) -> Vec<&Entry> {
        let Some(walk) = self.lex_walk(range, reverse) else {
            return Vec::new();
        };
        if reverse {
            walk.rev()
                .skip(offset)
                .take(limit)
                .take_while(|entry| range.gte_min(&entry.member))
                .collect()
        } else {
            walk.skip(offset)
                .take(limit)
                .take_while(|entry| range.lte_max(&entry.member))
                .collect()
        }
    }

    /// Removes the given members (entries of this set, cloned); returns how many.
    fn remove_entries(&mut self, entries: Vec<Entry>) -> usize {
        let count = entries.len();
        for entry in entries {
            let removed = self.ordered.remove(&entry);
            debug_assert!(removed, "the entries were read from this set");
            self.scores.remove(&*entry.member);
            self.size_bytes -= entry.member.len() + MEMBER_OVERHEAD_BYTES;
        }
        count
    }

    /// The MAP bin's msgpack: member to score.
    fn encoded(&self) -> Vec<u8> {
        let mut encoded = Vec::new();
        msgpack::write_map_len(&mut encoded, self.ordered.len());
        for entry in &self.ordered {
            msgpack::write_bytes(&mut encoded, &entry.member);
            msgpack::write_f64(&mut encoded, entry.score);
        }
        encoded
    }
}

collection::native_value!(ZSetValue);

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

// ---------------------------------------------------------------------------------------------
// Arguments

/// A score range (`zslParseRange`): `1.5`, `(1.5` (exclusive), `-inf`, `+inf`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScoreRange {
    min: f64,
    min_exclusive: bool,
    max: f64,
    max_exclusive: bool,
}

impl ScoreRange {
    /// The scores from `min` (included) to `max` (excluded).
    pub fn half_open(min: f64, max: f64) -> ScoreRange {
        ScoreRange {
            min,
            min_exclusive: false,
            max,
            max_exclusive: true,
        }
    }

    /// Parses `min` and `max`.
    ///
    /// # Errors
    /// Redis's "min or max is not a float".
    pub fn parse(min: &[u8], max: &[u8]) -> Result<ScoreRange, Failure> {
        let bound = |bytes: &[u8]| match bytes.strip_prefix(b"(") {
            Some(rest) => range_double(rest).map(|value| (value, true)),
            None => range_double(bytes).map(|value| (value, false)),
        };
        match (bound(min), bound(max)) {
            (Some((min, min_exclusive)), Some((max, max_exclusive))) => Ok(ScoreRange {
                min,
                min_exclusive,
                max,
                max_exclusive,
            }),
            _ => Err(Failure::message(RANGE_NOT_A_FLOAT)),
        }
    }
}

/// A bound of a score range as Redis reads one (`strtod` to the end): leading white space is
/// allowed, an empty text is 0, out-of-range values saturate to an infinity or 0; NaN is not.
fn range_double(bytes: &[u8]) -> Option<f64> {
    if bytes.is_empty() {
        return Some(0.0);
    }
    let text = std::str::from_utf8(bytes).ok()?;
    let text = text.trim_start_matches([' ', '\t', '\n', '\u{b}', '\u{c}', '\r']);
    if text.is_empty() || text.starts_with(char::is_whitespace) {
        return None;
    }
    let value: f64 = text.parse().ok()?;
    (!value.is_nan()).then_some(value)
}

/// A score or increment as Redis reads one (`string2d`): no spaces, no NaN, no value that
/// overflows to an infinity or underflows to 0.
pub(super) fn parse_score(bytes: &[u8]) -> Option<f64> {
    let value = parse_double(bytes)?;
    let lower = bytes.to_ascii_lowercase();
    let unsigned = lower
        .strip_prefix(b"-")
        .or_else(|| lower.strip_prefix(b"+"))
        .unwrap_or(&lower);
    if value.is_infinite() && unsigned != b"inf" && unsigned != b"infinity" {
        return None;
    }
    let mantissa = unsigned
        .split(|&byte| byte == b'e')
        .next()
        .unwrap_or_default();
    if value == 0.0 && mantissa.iter().any(|byte| (b'1'..=b'9').contains(byte)) {
        return None;
    }
    Some(value)
}

/// One end of a lex range.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LexBound<'a> {
    /// `-`: below every member.
    Lowest,
    /// `+`: above every member.
    Highest,
    /// `[member`.
    Inclusive(&'a [u8]),
    /// `(member`.
    Exclusive(&'a [u8]),
}

impl<'a> LexBound<'a> {
    fn parse(bytes: &'a [u8]) -> Option<LexBound<'a>> {
        match bytes {
            b"-" => Some(LexBound::Lowest),
            b"+" => Some(LexBound::Highest),
            [b'[', rest @ ..] => Some(LexBound::Inclusive(rest)),
            [b'(', rest @ ..] => Some(LexBound::Exclusive(rest)),
            _ => None,
        }
    }

    /// Redis's `sdscmplex` between bounds: `-` below every text, `+` above.
    fn order(self, other: LexBound<'_>) -> Ordering {
        fn rank<'b>(bound: LexBound<'b>) -> (u8, Option<&'b [u8]>) {
            match bound {
                LexBound::Lowest => (0, None),
                LexBound::Inclusive(bytes) | LexBound::Exclusive(bytes) => (1, Some(bytes)),
                LexBound::Highest => (2, None),
            }
        }
        rank(self).cmp(&rank(other))
    }

    /// Whether the bound leaves its own text out (`-` and `+` count as exclusive).
    fn is_exclusive(self) -> bool {
        !matches!(self, LexBound::Inclusive(_))
    }

    /// The edge a seek within one score starts or ends at, and whether it is included.
    fn edge(self) -> (Edge<'a>, bool) {
        match self {
            LexBound::Lowest => (Edge::First, true),
            LexBound::Highest => (Edge::Last, true),
            LexBound::Inclusive(bytes) => (Edge::Member(bytes), true),
            LexBound::Exclusive(bytes) => (Edge::Member(bytes), false),
        }
    }
}

/// A lex range (`zslParseLexRange`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LexRange<'a> {
    min: LexBound<'a>,
    max: LexBound<'a>,
}

impl<'a> LexRange<'a> {
    /// Parses `min` and `max`.
    ///
    /// # Errors
    /// Redis's "min or max not valid string range item".
    pub fn parse(min: &'a [u8], max: &'a [u8]) -> Result<LexRange<'a>, Failure> {
        match (LexBound::parse(min), LexBound::parse(max)) {
            (Some(min), Some(max)) => Ok(LexRange { min, max }),
            _ => Err(Failure::message(LEX_RANGE_INVALID)),
        }
    }

    /// Whether no member can be in it (`zslIsInLexRange`'s first test).
    fn is_empty(&self) -> bool {
        match self.min.order(self.max) {
            Ordering::Greater => true,
            Ordering::Equal => self.min.is_exclusive() || self.max.is_exclusive(),
            Ordering::Less => false,
        }
    }

    fn gte_min(&self, member: &[u8]) -> bool {
        match self.min {
            LexBound::Lowest => true,
            LexBound::Highest => false,
            LexBound::Inclusive(min) => member >= min,
            LexBound::Exclusive(min) => member > min,
        }
    }

    fn lte_max(&self, member: &[u8]) -> bool {
        match self.max {
            LexBound::Lowest => false,
            LexBound::Highest => true,
            LexBound::Inclusive(max) => member <= max,
            LexBound::Exclusive(max) => member < max,
        }
    }
}

/// A 64-bit integer argument, or Redis's error.
fn integer_arg(bytes: &[u8]) -> Result<i64, Failure> {
    keys::parse_i64(bytes).map_err(|()| Failure::message(keys::NOT_AN_INTEGER))
}

// ---------------------------------------------------------------------------------------------
// Replies

/// Answers members, with their scores when `withscores`: RESP2 one flat array, RESP3 an
/// array of [member, score] pairs (Redis keeps the order, so not a map).
pub(super) fn reply_entries(reply: &mut Reply<'_>, entries: &[&Entry], withscores: bool) {
    let pairs = withscores && reply.is_resp3();
    if withscores && !pairs {
        reply.array(entries.len() * 2);
    } else {
        reply.array(entries.len());
    }
    for entry in entries {
        if pairs {
            reply.array(2);
        }
        reply.bulk(&entry.member);
        if withscores {
            reply.double(entry.score);
        }
    }
}

/// Answers a double or null.
fn reply_score(reply: &mut Reply<'_>, score: Option<f64>) {
    match score {
        Some(score) => reply.double(score),
        None => reply.null(),
    }
}

/// Answers a count.
fn reply_count(reply: &mut Reply<'_>, count: usize) {
    reply.integer(i64::try_from(count).unwrap_or(i64::MAX));
}

// ---------------------------------------------------------------------------------------------
// Writes

/// ZADD's options.
#[derive(Clone, Copy, Debug, Default)]
struct AddFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
    incr: bool,
}

/// What one ZADD element did (`zsetAdd`).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Added {
    /// A new member, with this score.
    New(f64),
    /// An existing member now at this score (which may be its old one).
    Processed { score: f64, changed: bool },
    /// Nothing: NX on an existing member, XX on a missing one, GT or LT not met.
    Skipped,
}

impl ZSetValue {
    /// ZADD's work for one element, as Redis's `zsetAdd`.
    ///
    /// # Errors
    /// INCR that would make the score NaN (`inf` + `-inf`); nothing changed.
    fn add(&mut self, member: &[u8], score: f64, flags: AddFlags) -> Result<Added, Failure> {
        let Some(current) = self.score(member) else {
            if flags.xx {
                return Ok(Added::Skipped);
            }
            self.insert(member, score);
            return Ok(Added::New(score));
        };
        if flags.nx {
            return Ok(Added::Skipped);
        }
        let score = if flags.incr {
            let sum = current + score;
            if sum.is_nan() {
                return Err(Failure::message(
                    "ERR resulting score is not a number (NaN)",
                ));
            }
            sum
        } else {
            score
        };
        if (flags.lt && score >= current) || (flags.gt && score <= current) {
            return Ok(Added::Skipped);
        }
        let changed = score != current;
        if changed {
            self.insert(member, score);
        }
        Ok(Added::Processed { score, changed })
    }
}

/// ZADD key [NX | XX] [GT | LT] [CH] [INCR] score member [score member ...]
pub fn zadd(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let mut flags = AddFlags::default();
    let mut ch = false;
    let mut position = 2;
    while position < args.len() {
        let option = args.get(position);
        let flag = match option.to_ascii_lowercase().as_slice() {
            b"nx" => &mut flags.nx,
            b"xx" => &mut flags.xx,
            b"gt" => &mut flags.gt,
            b"lt" => &mut flags.lt,
            b"incr" => &mut flags.incr,
            b"ch" => &mut ch,
            _ => break,
        };
        *flag = true;
        position += 1;
    }
    let pairs = args.len() - position;
    let error = if pairs == 0 || !pairs.is_multiple_of(2) {
        Some(keys::SYNTAX_ERROR)
    } else if flags.nx && flags.xx {
        Some("ERR XX and NX options at the same time are not compatible")
    } else if (flags.nx && (flags.gt || flags.lt)) || (flags.gt && flags.lt) {
        Some("ERR GT, LT, and/or NX options at the same time are not compatible")
    } else if flags.incr && pairs > 2 {
        Some("ERR INCR option supports a single increment-element pair")
    } else {
        None
    };
    if let Some(error) = error {
        reply.error(error);
        return After::Continue;
    }
    let mut elements = Vec::with_capacity(pairs / 2);
    for pair in (position..args.len()).step_by(2) {
        let Some(score) = parse_score(args.get(pair)) else {
            reply.error(NOT_A_FLOAT);
            return After::Continue;
        };
        elements.push((score, args.get(pair + 1)));
    }
    let target = Target::of(&session.state, session.database, args.get(1));
    let outcome = collection::modify(&target, &mut session.writes, !flags.xx, |zset| {
        add_all(zset, &elements, flags)
    });
    finish(reply, outcome, |reply, counts| {
        let counts = counts.unwrap_or_default();
        if flags.incr {
            reply_score(reply, counts.last_score);
        } else if ch {
            reply_count(reply, counts.added + counts.updated);
        } else {
            reply_count(reply, counts.added);
        }
    })
}

/// What a ZADD did.
#[derive(Clone, Copy, Debug, Default)]
struct AddCounts {
    added: usize,
    updated: usize,
    /// The score of the last element processed (INCR's answer); `None` if none was.
    last_score: Option<f64>,
}

fn add_all(
    zset: &mut ZSetValue,
    elements: &[(f64, &[u8])],
    flags: AddFlags,
) -> Result<Change<AddCounts>, Failure> {
    let mut counts = AddCounts::default();
    for &(score, member) in elements {
        match zset.add(member, score, flags)? {
            Added::New(score) => {
                counts.added += 1;
                counts.last_score = Some(score);
            }
            Added::Processed { score, changed } => {
                counts.updated += usize::from(changed);
                counts.last_score = Some(score);
            }
            Added::Skipped => {}
        }
    }
    Ok(Change::when(counts.added + counts.updated > 0, counts))
}

/// ZINCRBY key increment member
pub fn zincrby(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let Some(increment) = parse_score(args.get(2)) else {
        reply.error(NOT_A_FLOAT);
        return After::Continue;
    };
    let flags = AddFlags {
        incr: true,
        ..AddFlags::default()
    };
    let elements = [(increment, args.get(3))];
    let target = Target::of(&session.state, session.database, args.get(1));
    let outcome = collection::modify(&target, &mut session.writes, true, |zset| {
        add_all(zset, &elements, flags)
    });
    finish(reply, outcome, |reply, counts| {
        reply_score(reply, counts.and_then(|counts| counts.last_score));
    })
}

/// ZREM key member [member ...]
pub fn zrem(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let target = Target::of(&session.state, session.database, args.get(1));
    let outcome = collection::modify(
        &target,
        &mut session.writes,
        false,
        |zset: &mut ZSetValue| {
            let removed = (2..args.len())
                .filter(|&position| zset.remove(args.get(position)))
                .count();
            Ok(Change::when(removed > 0, removed))
        },
    );
    finish(reply, outcome, |reply, removed| {
        reply_count(reply, removed.unwrap_or(0));
    })
}

/// ZPOPMIN key [count], ZPOPMAX key [count]
pub fn zpop(session: &mut Session, args: &Args, reply: &mut Reply<'_>, max: bool) -> After {
    if args.len() > 3 {
        reply.error(keys::SYNTAX_ERROR);
        return After::Continue;
    }
    let count = if args.len() == 3 {
        match keys::parse_i64(args.get(2)) {
            Ok(count) if count >= 0 => Some(usize::try_from(count).unwrap_or(usize::MAX)),
            // Redis gives this one text to a negative count and to one that is no integer.
            _ => {
                reply.error("ERR value is out of range, must be positive");
                return After::Continue;
            }
        }
    } else {
        None
    };
    let target = Target::of(&session.state, session.database, args.get(1));
    let outcome = collection::modify(
        &target,
        &mut session.writes,
        false,
        |zset: &mut ZSetValue| {
            let popped: Vec<Entry> = (0..count.unwrap_or(1))
                .map_while(|_| zset.pop(max))
                .collect();
            Ok(Change::when(!popped.is_empty(), popped))
        },
    );
    finish(reply, outcome, |reply, popped| {
        let popped = popped.unwrap_or_default();
        // RESP3 nests [member, score] pairs when a count was given, as Redis 7.2 does.
        let pairs = reply.is_resp3() && count.is_some();
        reply.array(if pairs {
            popped.len()
        } else {
            popped.len() * 2
        });
        for entry in &popped {
            if pairs {
                reply.array(2);
            }
            reply.bulk(&entry.member);
            reply.double(entry.score);
        }
    })
}

/// ZREMRANGEBYRANK key start stop
pub fn zremrangebyrank(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    zremrange(session, args, reply, By::Rank)
}

/// ZREMRANGEBYSCORE key min max
pub fn zremrangebyscore(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    zremrange(session, args, reply, By::Score)
}

/// ZREMRANGEBYLEX key min max
pub fn zremrangebylex(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    zremrange(session, args, reply, By::Lex)
}

/// The ZREMRANGEBY* commands, as Redis's `zremrangeGenericCommand`.
fn zremrange(session: &mut Session, args: &Args, reply: &mut Reply<'_>, by: By) -> After {
    let parsed = match by {
        By::Rank => integer_arg(args.get(2))
            .and_then(|start| Ok(Parsed::Rank(start, integer_arg(args.get(3))?))),
        By::Score => ScoreRange::parse(args.get(2), args.get(3)).map(Parsed::Score),
        By::Lex | By::Auto => LexRange::parse(args.get(2), args.get(3)).map(Parsed::Lex),
    };
    let parsed = match parsed {
        Ok(parsed) => parsed,
        Err(failure) => {
            failure.reply(reply);
            return After::Continue;
        }
    };
    let target = Target::of(&session.state, session.database, args.get(1));
    let outcome = collection::modify(
        &target,
        &mut session.writes,
        false,
        |zset: &mut ZSetValue| {
            let doomed: Vec<Entry> = match parsed {
                Parsed::Rank(start, stop) => match rank_window(zset.len(), start, stop) {
                    Some((first, last)) => zset.by_rank(first, last).into_iter().cloned().collect(),
                    None => Vec::new(),
                },
                Parsed::Score(range) => zset.by_score(&range).cloned().collect(),
                Parsed::Lex(range) => zset
                    .lex_range(&range, false, 0, usize::MAX)
                    .into_iter()
                    .cloned()
                    .collect(),
            };
            let removed = zset.remove_entries(doomed);
            Ok(Change::when(removed > 0, removed))
        },
    );
    finish(reply, outcome, |reply, removed| {
        reply_count(reply, removed.unwrap_or(0));
    })
}

/// Redis's index window: negative indexes count from the end; the ranks `first..=last`, or
/// `None` when empty.
fn rank_window(len: usize, start: i64, stop: i64) -> Option<(usize, usize)> {
    let len = i64::try_from(len).unwrap_or(i64::MAX);
    let start = if start < 0 {
        start.saturating_add(len)
    } else {
        start
    }
    .max(0);
    let stop = if stop < 0 {
        stop.saturating_add(len)
    } else {
        stop
    };
    if start > stop || start >= len {
        return None;
    }
    let stop = stop.min(len - 1);
    Some((usize::try_from(start).ok()?, usize::try_from(stop).ok()?))
}

// ---------------------------------------------------------------------------------------------
// Reads

/// ZCARD key
pub fn zcard(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let target = Target::of(&session.state, session.database, args.get(1));
    let outcome = collection::read(&target, |zset: Option<&ZSetValue>| {
        zset.map_or(0, ZSetValue::len)
    });
    finish(reply, outcome, reply_count)
}

/// ZSCORE key member
pub fn zscore(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let target = Target::of(&session.state, session.database, args.get(1));
    let outcome = collection::read(&target, |zset: Option<&ZSetValue>| {
        zset.and_then(|zset| zset.score(args.get(2)))
    });
    finish(reply, outcome, reply_score)
}

/// ZMSCORE key member [member ...]
pub fn zmscore(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let target = Target::of(&session.state, session.database, args.get(1));
    let outcome = collection::read(&target, |zset: Option<&ZSetValue>| {
        (2..args.len())
            .map(|position| zset.and_then(|zset| zset.score(args.get(position))))
            .collect::<Vec<_>>()
    });
    finish(reply, outcome, |reply, scores| {
        reply.array(scores.len());
        scores
            .into_iter()
            .for_each(|score| reply_score(reply, score));
    })
}

/// ZCOUNT key min max
pub fn zcount(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let range = match ScoreRange::parse(args.get(2), args.get(3)) {
        Ok(range) => range,
        Err(failure) => {
            failure.reply(reply);
            return After::Continue;
        }
    };
    let target = Target::of(&session.state, session.database, args.get(1));
    let outcome = collection::read(&target, |zset: Option<&ZSetValue>| {
        zset.map_or(0, |zset| zset.by_score(&range).count())
    });
    finish(reply, outcome, reply_count)
}

/// ZLEXCOUNT key min max
pub fn zlexcount(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let range = match LexRange::parse(args.get(2), args.get(3)) {
        Ok(range) => range,
        Err(failure) => {
            failure.reply(reply);
            return After::Continue;
        }
    };
    let target = Target::of(&session.state, session.database, args.get(1));
    let outcome = collection::read(&target, |zset: Option<&ZSetValue>| {
        zset.and_then(|zset| zset.lex_walk(&range, false))
            .map_or(0, |walk| {
                walk.take_while(|entry| range.lte_max(&entry.member))
                    .count()
            })
    });
    finish(reply, outcome, reply_count)
}

/// ZRANK key member [WITHSCORE], ZREVRANK key member [WITHSCORE]
fn zrank(session: &mut Session, args: &Args, reply: &mut Reply<'_>, reverse: bool) -> After {
    if args.len() > 4 {
        let name = if reverse { "zrevrank" } else { "zrank" };
        reply.error(&format!(
            "ERR wrong number of arguments for '{name}' command"
        ));
        return After::Continue;
    }
    let withscore = args.len() == 4;
    if withscore && !args.get(3).eq_ignore_ascii_case(b"withscore") {
        reply.error(keys::SYNTAX_ERROR);
        return After::Continue;
    }
    let target = Target::of(&session.state, session.database, args.get(1));
    let outcome = collection::read(&target, |zset: Option<&ZSetValue>| {
        let zset = zset?;
        let (rank, score) = zset.rank(args.get(2))?;
        Some((if reverse { zset.len() - 1 - rank } else { rank }, score))
    });
    finish(reply, outcome, |reply, found| match (found, withscore) {
        (Some((rank, score)), true) => {
            reply.array(2);
            reply_count(reply, rank);
            reply.double(score);
        }
        (Some((rank, _)), false) => reply_count(reply, rank),
        (None, true) => reply.null_array(),
        (None, false) => reply.null(),
    })
}

/// How a ZRANGE-family command reads its range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum By {
    /// ZRANGE: by index unless BYSCORE or BYLEX says otherwise.
    Auto,
    /// By index.
    Rank,
    /// By score.
    Score,
    /// By member.
    Lex,
}

/// A ZRANGE-family command's direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Direction {
    /// ZRANGE: forward unless REV says otherwise.
    Auto,
    Forward,
    Reverse,
}

/// A parsed range.
#[derive(Clone, Copy, Debug)]
enum Parsed<'a> {
    Rank(i64, i64),
    Score(ScoreRange),
    Lex(LexRange<'a>),
}

/// A parsed ZRANGE-family request.
#[derive(Debug)]
struct RangeRequest<'a> {
    range: Parsed<'a>,
    reverse: bool,
    withscores: bool,
    offset: i64,
    /// Negative: no limit.
    limit: i64,
}

impl<'a> RangeRequest<'a> {
    /// Parses `key min max [BYSCORE | BYLEX] [REV] [WITHSCORES] [LIMIT offset count]` as
    /// Redis's `zrangeGenericCommand` does, errors in its order.
    fn parse(args: &'a Args, by: By, direction: Direction) -> Result<Self, Failure> {
        Self::parse_from(args, 1, by, direction)
    }

    /// [`RangeRequest::parse`] with the source key at `key_position`: 1, or 2 for ZRANGESTORE,
    /// which takes no WITHSCORES.
    fn parse_from(
        args: &'a Args,
        key_position: usize,
        mut by: By,
        mut direction: Direction,
    ) -> Result<Self, Failure> {
        let store = key_position > 1;
        let mut withscores = false;
        let mut offset = 0;
        let mut limit = -1;
        let mut position = key_position + 3;
        while position < args.len() {
            let word = args.get(position);
            let left = args.len() - position - 1;
            if !store && word.eq_ignore_ascii_case(b"withscores") {
                withscores = true;
            } else if word.eq_ignore_ascii_case(b"limit") && left >= 2 {
                offset = integer_arg(args.get(position + 1))?;
                limit = integer_arg(args.get(position + 2))?;
                position += 2;
            } else if direction == Direction::Auto && word.eq_ignore_ascii_case(b"rev") {
                direction = Direction::Reverse;
            } else if by == By::Auto && word.eq_ignore_ascii_case(b"bylex") {
                by = By::Lex;
            } else if by == By::Auto && word.eq_ignore_ascii_case(b"byscore") {
                by = By::Score;
            } else {
                return Err(Failure::message(keys::SYNTAX_ERROR));
            }
            position += 1;
        }
        let reverse = direction == Direction::Reverse;
        let by = if by == By::Auto { By::Rank } else { by };
        if limit != -1 && by == By::Rank {
            return Err(Failure::message(
                "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
            ));
        }
        if withscores && by == By::Lex {
            return Err(Failure::message(
                "ERR syntax error, WITHSCORES not supported in combination with BYLEX",
            ));
        }
        // BYSCORE and BYLEX in reverse take max first.
        let (min, max) = (args.get(key_position + 1), args.get(key_position + 2));
        let (min, max) = if reverse && by != By::Rank {
            (max, min)
        } else {
            (min, max)
        };
        let range = match by {
            By::Rank | By::Auto => Parsed::Rank(integer_arg(min)?, integer_arg(max)?),
            By::Score => Parsed::Score(ScoreRange::parse(min, max)?),
            By::Lex => Parsed::Lex(LexRange::parse(min, max)?),
        };
        Ok(RangeRequest {
            range,
            reverse,
            withscores,
            offset,
            limit,
        })
    }

    /// The members it selects, in reply order.
    fn select<'z>(&self, zset: &'z ZSetValue) -> Vec<&'z Entry> {
        let Ok(offset) = usize::try_from(self.offset) else {
            // Redis skips forever from a negative offset: nothing.
            return Vec::new();
        };
        let limit = usize::try_from(self.limit).unwrap_or(usize::MAX);
        match self.range {
            Parsed::Rank(start, stop) => {
                let len = zset.len();
                let Some((first, last)) = rank_window(len, start, stop) else {
                    return Vec::new();
                };
                if self.reverse {
                    let mut entries = zset.by_rank(len - 1 - last, len - 1 - first);
                    entries.reverse();
                    entries
                } else {
                    zset.by_rank(first, last)
                }
            }
            Parsed::Score(range) => {
                let entries = zset.by_score(&range);
                if self.reverse {
                    entries.rev().skip(offset).take(limit).collect()
                } else {
                    entries.skip(offset).take(limit).collect()
                }
            }
            Parsed::Lex(range) => zset.lex_range(&range, self.reverse, offset, limit),
        }
    }
}

/// ZRANGE key start stop [BYSCORE | BYLEX] [REV] [LIMIT offset count] [WITHSCORES]
pub fn zrange(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    range_command(session, args, reply, By::Auto, Direction::Auto)
}

/// ZREVRANGE key start stop [WITHSCORES]
pub fn zrevrange(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    range_command(session, args, reply, By::Rank, Direction::Reverse)
}

/// ZRANGEBYSCORE key min max [WITHSCORES] [LIMIT offset count]
pub fn zrangebyscore(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    range_command(session, args, reply, By::Score, Direction::Forward)
}

/// ZREVRANGEBYSCORE key max min [WITHSCORES] [LIMIT offset count]
pub fn zrevrangebyscore(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    range_command(session, args, reply, By::Score, Direction::Reverse)
}

/// ZRANGEBYLEX key min max [LIMIT offset count]
pub fn zrangebylex(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    range_command(session, args, reply, By::Lex, Direction::Forward)
}

/// ZREVRANGEBYLEX key max min [LIMIT offset count]
pub fn zrevrangebylex(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    range_command(session, args, reply, By::Lex, Direction::Reverse)
}

/// The ZRANGE family, as Redis's `zrangeGenericCommand`.
fn range_command(
    session: &mut Session,
    args: &Args,
    reply: &mut Reply<'_>,
    by: By,
    direction: Direction,
) -> After {
    let request = match RangeRequest::parse(args, by, direction) {
        Ok(request) => request,
        Err(failure) => {
            failure.reply(reply);
            return After::Continue;
        }
    };
    let target = Target::of(&session.state, session.database, args.get(1));
    // The reply is written under the read lock, straight from the tree: no member is copied
    // twice. `read` fails only before it calls this, so a failure is the whole reply.
    let outcome = collection::read(&target, |zset: Option<&ZSetValue>| {
        let entries = zset.map(|zset| request.select(zset)).unwrap_or_default();
        // A long range writes nothing and goes to the long-request pool instead.
        if session.should_offload(entries.len()) {
            return After::Offload;
        }
        reply_entries(reply, &entries, request.withscores);
        After::Continue
    });
    if let Ok(After::Offload) = outcome {
        return After::Offload;
    }
    finish(reply, outcome, |_, _| {})
}

/// ZRANGESTORE dst src min max [BYSCORE | BYLEX] [REV] [LIMIT offset count]: stores the
/// members ZRANGE would answer at `dst` (replacing what it held, with no expiry; deleting it
/// when there are none) and answers how many. It runs in the namespace's exclusive section, as
/// the other STORE commands do.
pub fn zrangestore(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let request = match RangeRequest::parse_from(args, 2, By::Auto, Direction::Auto) {
        Ok(request) => request,
        Err(failure) => {
            failure.reply(reply);
            return After::Continue;
        }
    };
    let state = Arc::clone(&session.state);
    let outcome = keys::namespace_of(&state).exclusive(|| {
        let target = Target::of(&session.state, session.database, args.get(2));
        let selected = collection::read(&target, |zset: Option<&ZSetValue>| {
            let mut selected = ZSetValue::default();
            for entry in zset.map(|zset| request.select(zset)).unwrap_or_default() {
                selected.insert(&entry.member, entry.score);
            }
            selected
        })?;
        let len = selected.len();
        collection::store_replacing(session, args.get(1), Box::new(selected), len)
    });
    finish(reply, outcome, reply_count)
}

/// Redis's reply to a ZRANDMEMBER count of -2^63.
const RANDOM_COUNT_OUT_OF_RANGE: &str = "ERR value is out of range, value must between \
                                         -9223372036854775807 and 9223372036854775807";

/// Largest reply ZRANDMEMBER with a negative count builds, in bytes: members repeat, so the
/// reply grows with the client's count rather than with the set. Redis's largest bulk string.
const REPEATED_REPLY_BYTES_MAX: usize = 512 * 1024 * 1024;

/// Reply bytes a member costs beyond its own bytes, at the least (`$0\r\n\r\n`), and a score
/// at the most (a RESP2 bulk string of 17 digits, sign, point and exponent).
const MEMBER_FRAMING_BYTES: usize = 6;
const SCORE_REPLY_BYTES_MAX: usize = 40;

/// Osprey's reply to a ZRANDMEMBER negative count whose reply would pass
/// [`REPEATED_REPLY_BYTES_MAX`].
const REPLY_TOO_LARGE: &str = "ERR value is out of range, the reply would exceed 512 MiB";

/// ZRANDMEMBER key [count [WITHSCORES]]: a random member (null if none); with a positive
/// count, that many distinct members (the whole set, highest score first, when it has no
/// more); with a negative one, that many members drawn independently, so they may repeat. A
/// `BTreeSet` has no random access: a call costs O(n) to index the set, plus the count.
pub fn zrandmember(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let request = match RandomRequest::parse(args) {
        Ok(request) => request,
        Err(failure) => {
            failure.reply(reply);
            return After::Continue;
        }
    };
    let target = Target::of(&session.state, session.database, args.get(1));
    // Written under the read lock, straight from the set: no copy of the members.
    let outcome = collection::read(&target, |zset: Option<&ZSetValue>| {
        match (zset, request.count) {
            (None, None) => {
                reply.null();
                Ok(())
            }
            (None, Some(_)) => {
                reply.array(0);
                Ok(())
            }
            (Some(zset), count) => reply_random(reply, zset, count, request.withscores),
        }
    });
    finish(reply, outcome.and_then(|answered| answered), |_, ()| {})
}

/// ZRANDMEMBER's count and WITHSCORES, checked in Redis's order and with its texts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct RandomRequest {
    count: Option<i64>,
    withscores: bool,
}

impl RandomRequest {
    fn parse(args: &Args) -> Result<RandomRequest, Failure> {
        if args.len() == 2 {
            return Ok(RandomRequest {
                count: None,
                withscores: false,
            });
        }
        let count = match keys::parse_i64(args.get(2)) {
            Ok(i64::MIN) => return Err(Failure::message(RANDOM_COUNT_OUT_OF_RANGE)),
            Ok(count) => count,
            Err(()) => return Err(Failure::message(keys::NOT_AN_INTEGER)),
        };
        let withscores = args.len() == 4;
        if args.len() > 4 || (withscores && !args.get(3).eq_ignore_ascii_case(b"withscores")) {
            return Err(Failure::message(keys::SYNTAX_ERROR));
        }
        if withscores && !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&count) {
            return Err(Failure::message("ERR value is out of range"));
        }
        Ok(RandomRequest {
            count: Some(count),
            withscores,
        })
    }
}

/// Answers ZRANDMEMBER from `zset` (not empty).
///
/// # Errors
/// A negative count whose reply would pass [`REPEATED_REPLY_BYTES_MAX`]; nothing is written.
fn reply_random(
    reply: &mut Reply<'_>,
    zset: &ZSetValue,
    count: Option<i64>,
    withscores: bool,
) -> Result<(), Failure> {
    let entries: Vec<&Entry> = zset.iter().collect();
    let Some(count) = count else {
        let index = super::sets::with_rng(|rng| rng.random_range(0..entries.len()));
        reply.bulk(&entries[index].member);
        return Ok(());
    };
    let wanted = usize::try_from(count.unsigned_abs()).unwrap_or(usize::MAX);
    if count < 0 {
        return reply_repeated(reply, &entries, wanted, withscores);
    }
    let picked: Vec<&Entry> = if wanted >= entries.len() {
        // Redis walks a sorted set from its highest score down here (`zuiInitIterator`).
        entries.into_iter().rev().collect()
    } else {
        let indices =
            super::sets::with_rng(|rng| rand::seq::index::sample(rng, entries.len(), wanted));
        indices.into_iter().map(|index| entries[index]).collect()
    };
    reply_entries(reply, &picked, withscores);
    Ok(())
}

/// Answers `count` entries drawn independently from `entries`. A first pass adds up the
/// reply's size, a second draws the same entries again from the same seed and writes them, so
/// nothing is allocated by the count.
///
/// # Errors
/// When the reply would pass [`REPEATED_REPLY_BYTES_MAX`]; nothing is written.
fn reply_repeated(
    reply: &mut Reply<'_>,
    entries: &[&Entry],
    count: usize,
    withscores: bool,
) -> Result<(), Failure> {
    let score_bytes = if withscores { SCORE_REPLY_BYTES_MAX } else { 0 };
    if count.saturating_mul(MEMBER_FRAMING_BYTES + score_bytes) > REPEATED_REPLY_BYTES_MAX {
        return Err(Failure::message(REPLY_TOO_LARGE));
    }
    let seed = super::sets::with_rng(|rng| rng.random::<u64>());
    let draws = || {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
        (0..count).map(move |_| entries[rng.random_range(0..entries.len())])
    };
    let mut reply_bytes = 0;
    for entry in draws() {
        reply_bytes += entry.member.len() + MEMBER_FRAMING_BYTES + score_bytes;
        if reply_bytes > REPEATED_REPLY_BYTES_MAX {
            return Err(Failure::message(REPLY_TOO_LARGE));
        }
    }
    let pairs = withscores && reply.is_resp3();
    reply.array(if withscores && !pairs {
        count * 2
    } else {
        count
    });
    for entry in draws() {
        if pairs {
            reply.array(2);
        }
        reply.bulk(&entry.member);
        if withscores {
            reply.double(entry.score);
        }
    }
    Ok(())
}

/// ZSCAN key cursor [MATCH pattern] [COUNT count]: the whole set in score order, cursor 0.
pub fn zscan(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let options = match ScanOptions::parse(args) {
        Ok(options) => options,
        Err(failure) => {
            failure.reply(reply);
            return After::Continue;
        }
    };
    let target = Target::of(&session.state, session.database, args.get(1));
    let outcome = collection::read(&target, |zset: Option<&ZSetValue>| {
        zset.into_iter()
            .flat_map(ZSetValue::iter)
            .filter(|entry| options.keeps_under_lock(&entry.member))
            .map(|entry| (entry.member.to_vec(), entry.score))
            .collect::<Vec<_>>()
    });
    finish(reply, outcome, |reply, mut entries| {
        entries.retain(|(member, _)| options.matches_late(member));
        reply.array(2);
        reply.bulk(b"0");
        reply.array(entries.len() * 2);
        let mut text = Vec::new();
        for (member, score) in entries {
            reply.bulk(&member);
            text.clear();
            wire_resp::encode::double_text(&mut text, score);
            reply.bulk(&text);
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::NativeValue as _;

    fn zset(pairs: &[(f64, &str)]) -> ZSetValue {
        let mut zset = ZSetValue::default();
        for &(score, member) in pairs {
            zset.insert(member.as_bytes(), score);
        }
        zset
    }

    fn members(entries: &[&Entry]) -> Vec<String> {
        entries
            .iter()
            .map(|entry| String::from_utf8(entry.member.to_vec()).unwrap())
            .collect()
    }

    fn lex<'a>(min: &'a str, max: &'a str) -> LexRange<'a> {
        LexRange::parse(min.as_bytes(), max.as_bytes()).unwrap()
    }

    #[test]
    fn inserts_update_both_structures_and_the_size() {
        let mut z = ZSetValue::default();
        assert!(z.insert(b"a", 1.0));
        assert!(!z.insert(b"a", 2.0));
        assert!(z.insert(b"b", 1.5));
        assert_eq!(z.score(b"a"), Some(2.0));
        assert_eq!(members(&z.iter().collect::<Vec<_>>()), ["b", "a"]);
        assert_eq!(z.size_bytes(), 2 * (1 + MEMBER_OVERHEAD_BYTES));
        assert!(z.remove(b"a"));
        assert!(!z.remove(b"a"));
        assert_eq!(&*z.pop(false).unwrap().member, b"b");
        assert!(z.is_empty());
        assert_eq!(z.size_bytes(), 0);
    }

    #[test]
    fn negative_zero_is_stored_as_zero() {
        let mut z = zset(&[(-0.0, "a"), (0.0, "b")]);
        assert!(z.score(b"a").unwrap().is_sign_positive());
        assert!(!z.insert(b"b", -0.0));
        assert!(z.score(b"b").unwrap().is_sign_positive());
        assert_eq!(members(&z.iter().collect::<Vec<_>>()), ["a", "b"]);
        let range = ScoreRange::parse(b"-0", b"0").unwrap();
        assert_eq!(z.by_score(&range).count(), 2);
    }

    #[test]
    fn ranks_count_from_the_nearer_end() {
        let names: Vec<String> = (0..101).map(|i| format!("m{i:03}")).collect();
        let mut z = ZSetValue::default();
        for (i, name) in names.iter().enumerate() {
            z.insert(name.as_bytes(), i as f64);
        }
        for (i, name) in names.iter().enumerate() {
            assert_eq!(z.rank(name.as_bytes()), Some((i, i as f64)));
        }
        assert_eq!(z.rank(b"nope"), None);
        assert_eq!(members(&z.by_rank(0, 1)), ["m000", "m001"]);
        assert_eq!(members(&z.by_rank(99, 100)), ["m099", "m100"]);
        assert_eq!(z.by_rank(0, 100).len(), 101);
    }

    #[test]
    fn rank_windows_follow_redis() {
        assert_eq!(rank_window(5, 0, -1), Some((0, 4)));
        assert_eq!(rank_window(5, -100, 100), Some((0, 4)));
        assert_eq!(rank_window(5, 3, 1), None);
        assert_eq!(rank_window(5, 5, 10), None);
        assert_eq!(rank_window(5, -2, -1), Some((3, 4)));
        assert_eq!(rank_window(0, 0, -1), None);
        assert_eq!(rank_window(5, i64::MIN, i64::MAX), Some((0, 4)));
    }

    #[test]
    fn score_ranges_honour_exclusive_bounds_without_panicking() {
        let z = zset(&[(1.0, "a"), (2.0, "b"), (2.0, "c"), (3.0, "d")]);
        let pick = |min: &str, max: &str| {
            let range = ScoreRange::parse(min.as_bytes(), max.as_bytes()).unwrap();
            members(&z.by_score(&range).collect::<Vec<_>>())
        };
        assert_eq!(pick("2", "2"), ["b", "c"]);
        assert_eq!(pick("(1", "(3"), ["b", "c"]);
        assert_eq!(pick("(2", "3"), ["d"]);
        assert_eq!(pick("-inf", "+inf").len(), 4);
        assert!(pick("(2", "(2").is_empty());
        assert!(pick("3", "1").is_empty());
        assert!(pick("2", "(2").is_empty());
    }

    #[test]
    fn score_bounds_parse_as_strtod_and_scores_as_string2d() {
        assert_eq!(range_double(b""), Some(0.0));
        assert_eq!(range_double(b" 1.5"), Some(1.5));
        assert_eq!(range_double(b" "), None);
        assert_eq!(range_double(b"1e400"), Some(f64::INFINITY));
        assert_eq!(range_double(b"nan"), None);
        assert_eq!(range_double(b"1x"), None);
        assert_eq!(parse_score(b"1.5"), Some(1.5));
        assert_eq!(parse_score(b"-INF"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_score(b"1e400"), None);
        assert_eq!(parse_score(b"1e-400"), None);
        assert_eq!(parse_score(b"0e5"), Some(0.0));
        assert_eq!(parse_score(b" 1"), None);
        assert_eq!(parse_score(b"nan"), None);
    }

    #[test]
    fn lex_ranges_with_equal_scores_are_byte_ranges() {
        let z = zset(&[(0.0, "a"), (0.0, "b"), (0.0, "c"), (0.0, "d"), (0.0, "e")]);
        let pick = |min: &str, max: &str, reverse: bool| {
            members(&z.lex_range(&lex(min, max), reverse, 0, usize::MAX))
        };
        assert_eq!(pick("-", "+", false), ["a", "b", "c", "d", "e"]);
        assert_eq!(pick("[b", "(d", false), ["b", "c"]);
        assert_eq!(pick("(b", "[d", false), ["c", "d"]);
        assert_eq!(pick("[b", "[d", true), ["d", "c", "b"]);
        assert_eq!(pick("-", "(d", true), ["c", "b", "a"]);
        assert!(pick("[c", "(c", false).is_empty());
        assert!(pick("+", "+", false).is_empty());
        assert!(pick("[z", "+", false).is_empty());
        assert_eq!(pick("[c", "[c", false), ["c"]);
        assert_eq!(
            members(&z.lex_range(&lex("[a", "+"), false, 1, 2)),
            ["b", "c"]
        );
        assert_eq!(
            members(&z.lex_range(&lex("-", "+"), true, 3, 10)),
            ["b", "a"]
        );
    }

    #[test]
    fn lex_ranges_with_mixed_scores_walk_as_a_listpack_does() {
        // Score order: a(1) z(2) b(3) c(3).
        let z = zset(&[(1.0, "a"), (2.0, "z"), (3.0, "b"), (3.0, "c")]);
        let pick = |min: &str, max: &str, reverse: bool| {
            members(&z.lex_range(&lex(min, max), reverse, 0, usize::MAX))
        };
        // From the first member >= "b" (z), and z > "c" ends it at once.
        assert!(pick("[b", "[c", false).is_empty());
        // From a, stopping at z.
        assert_eq!(pick("-", "[c", false), ["a"]);
        assert_eq!(pick("[b", "+", false), ["z", "b", "c"]);
        // Backward from the last member <= "c" (c), down to the first < "b" (z stops: z >= b,
        // then a < b).
        assert_eq!(pick("[b", "[c", true), ["c", "b", "z"]);
        // The first member >= "c" is z (score 2), found past score 1's seek.
        assert_eq!(pick("[c", "+", false), ["z", "b", "c"]);
    }

    #[test]
    fn zadd_follows_zset_add() {
        let mut z = ZSetValue::default();
        let flags = AddFlags::default();
        assert_eq!(z.add(b"a", 1.0, flags).unwrap(), Added::New(1.0));
        let gt = AddFlags { gt: true, ..flags };
        assert_eq!(z.add(b"a", 0.5, gt).unwrap(), Added::Skipped);
        assert_eq!(
            z.add(b"a", 2.0, gt).unwrap(),
            Added::Processed {
                score: 2.0,
                changed: true
            }
        );
        let incr = AddFlags {
            incr: true,
            ..flags
        };
        z.insert(b"i", f64::INFINITY);
        assert!(z.add(b"i", f64::NEG_INFINITY, incr).is_err());
        assert_eq!(z.score(b"i"), Some(f64::INFINITY));
        let xx = AddFlags { xx: true, ..flags };
        assert_eq!(z.add(b"new", 1.0, xx).unwrap(), Added::Skipped);
        assert_eq!(z.score(b"new"), None);
    }

    #[test]
    fn the_rendered_bin_decodes_to_the_same_zset() {
        let z = zset(&[(1.5, "a"), (-2.0, "b"), (1e300, "c")]);
        let decoded = ZSetValue::decode(&z.encoded()).expect("decodes");
        assert_eq!(decoded.len(), 3);
        assert_eq!(decoded.score(b"c"), Some(1e300));
        assert_eq!(decoded.size_bytes(), z.size_bytes());
    }
}
